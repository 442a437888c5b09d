/* SIGINT/SIGTERM ask kncat to stop cleanly; SIGPIPE is ignored so that a
 * closed stdout shows up as EPIPE from write(2), handled where it happens. */
#ifndef KNCAT_SIGNALS_H
#define KNCAT_SIGNALS_H

/* Installs the handlers.  Without SA_RESTART: a blocking read(2) returns
 * EINTR so produce notices the signal.  A second SIGINT or SIGTERM kills
 * the process at once, for when a clean stop takes too long. */
void kc_signals_install(void);
/* The signal that asked for a stop, or 0. */
int kc_signal_received(void);

#endif
