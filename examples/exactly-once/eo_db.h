/* The PostgreSQL side of the exactly-once example: the connection, the
 * schema, and statements that end the program when they fail (a crash
 * here is like kill -9: the open transaction rolls back and a restart
 * resumes from what was committed).  See README.md for the tables. */
#ifndef EO_DB_H
#define EO_DB_H

#include <libpq-fe.h>
#include <stddef.h>

__attribute__((noreturn)) void eo_die(const char *who, const char *what,
                                      const char *why);

/* Connects to conninfo, creates the tables when missing, and takes the
 * session-long advisory lock named `lock_name`, waiting while another
 * process holds it: one process per role name, whatever the test or an
 * operator starts.  The lock goes with the connection, so a killed
 * process frees it at once. */
PGconn *eo_db_open(const char *who, const char *conninfo,
                   const char *lock_name);

/* Runs sql with n text parameters (NULL: SQL NULL; lengths and formats
 * from lens/binary, both may be NULL) and returns its result, which the
 * caller PQclear()s; dies unless it is PGRES_COMMAND_OK or
 * PGRES_TUPLES_OK. */
PGresult *eo_db_exec(PGconn *db, const char *who, const char *sql, int n,
                     const char *const *params, const int *lens,
                     const int *binary);
/* The same, for statements whose result is not needed. */
void eo_db_run(PGconn *db, const char *who, const char *sql, int n,
               const char *const *params);

/* The bytea value of row, column as bytes: *out is malloc'ed (free it),
 * NULL with *len 0 for SQL NULL. */
void eo_db_bytes(PGresult *res, int row, int col, const char *who,
                 unsigned char **out, size_t *len);

#endif
