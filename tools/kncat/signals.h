/* SIGINT/SIGTERM ask kncat to stop cleanly; SIGPIPE is ignored so that a
 * closed stdout shows up as EPIPE from write(2), handled where it happens. */
#ifndef KNCAT_SIGNALS_H
#define KNCAT_SIGNALS_H

/* Installs the handlers.  Without SA_RESTART: a blocking read(2) returns
 * EINTR so produce notices the signal.  A second SIGINT or SIGTERM kills
 * the process at once (and the process groups tracked below), for when a
 * clean stop takes too long. */
void kc_signals_install(void);
/* The signal that asked for a stop, or 0. */
int kc_signal_received(void);
/* Children in process groups of their own (main thread only): a second
 * signal kills these groups before it kills kncat (up to 8192 of them). */
void kc_signals_track_group(int pgid);
void kc_signals_untrack_group(int pgid);

#endif
