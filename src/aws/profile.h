/* One profile of the shared config and credentials files.
 *
 * The config file names profiles "[default]" and "[profile NAME]" (a
 * "[profile default]" section wins over "[default]"); the credentials file
 * names them "[NAME]".  A key is looked up in the credentials file first,
 * then in the config file, as botocore merges them.  Service-specific
 * settings come from the "[services NAME]" section that the profile's
 * `services` key names. */
#ifndef KN_AWS_PROFILE_H
#define KN_AWS_PROFILE_H

#include <stddef.h>

#include "aws/ini.h"
#include "kn/error.h"

typedef struct kn_aws_profile {
  char *name;
  kn_ini_t *config; /* NULL: no such file */
  kn_ini_t *credentials;
  const kn_ini_section_t *config_sec; /* the profile in each file, or NULL */
  const kn_ini_section_t *cred_sec;
} kn_aws_profile_t;

/* Largest shared file read, against a file that is not one. */
#define KN_AWS_PROFILE_MAX_FILE (4u << 20)

/* Reads both files (either path may be NULL; a missing file counts as
 * empty; an unreadable or malformed one is an error naming it as
 * "~/.aws/config:LINE") and finds the profile called name.  Everything is
 * copied.  On success sets *out (free with kn_aws_profile_destroy) and
 * returns NULL; on failure *out is NULL. */
kn_error_t *kn_aws_profile_load(const char *config_path,
                                const char *credentials_path, const char *name,
                                kn_aws_profile_t **out);
void kn_aws_profile_destroy(kn_aws_profile_t *p); /* accepts NULL */

/* Non-zero if either file has the profile. */
int kn_aws_profile_exists(const kn_aws_profile_t *p);

/* The value of key in the profile, or NULL.  where (if not NULL) receives
 * "file:line" of the value, for messages. */
const char *kn_aws_profile_get(const kn_aws_profile_t *p, const char *key,
                               char *where, size_t where_size);

/* The value of key for service ("kinesis", "dynamodb", "sts") in the
 * profile's services section, or NULL; where as above. */
const char *kn_aws_profile_service_get(const kn_aws_profile_t *p,
                                       const char *service, const char *key,
                                       char *where, size_t where_size);

/* Another profile of the same files: fills *view with pointers borrowed
 * from files (and name), valid while both live.  Never destroy a view. */
void kn_aws_profile_view(const kn_aws_profile_t *files, const char *name,
                         kn_aws_profile_t *view);

/* The value of key in one of the files only (credentials: the credentials
 * file, else the config file), or NULL; where as above. */
const char *kn_aws_profile_get_file(const kn_aws_profile_t *p, int credentials,
                                    const char *key, char *where,
                                    size_t where_size);

/* The "[sso-session NAME]" section of the config file, or NULL. */
const kn_ini_section_t *kn_aws_sso_session(const kn_aws_profile_t *p,
                                           const char *name);

/* The profile name a config file section stands for, or NULL if it is not
 * a profile section.  Returns a pointer into name or a static string, and
 * *len its length. */
const char *kn_aws_config_profile_name(const char *section, size_t *len);

#endif
