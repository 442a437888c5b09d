#include "signals.h"

#include <pthread.h>
#include <signal.h>
#include <string.h>

static volatile sig_atomic_t received;
static pthread_t main_thread;
/* Process groups of children to kill when a second signal ends kncat; 0:
 * a free slot.  Written by the main thread only, read by the handler,
 * which runs on it too. */
#define MAX_GROUPS 8192
static volatile sig_atomic_t groups[MAX_GROUPS];

void kc_signals_track_group(int pgid) {
  for (int i = 0; i < MAX_GROUPS; i++)
    if (!groups[i]) {
      groups[i] = pgid;
      return;
    }
}

void kc_signals_untrack_group(int pgid) {
  for (int i = 0; i < MAX_GROUPS; i++)
    if (groups[i] == pgid) {
      groups[i] = 0;
      return;
    }
}

static void on_stop(int sig) {
  /* The library's threads may catch the signal; pass it to the main
   * thread so that its blocking read(2) is interrupted too. */
  if (!pthread_equal(pthread_self(), main_thread)) {
    pthread_kill(main_thread, sig);
    return;
  }
  if (received) { /* second request: give up on the clean stop */
    for (int i = 0; i < MAX_GROUPS; i++)
      if (groups[i] > 0) kill(-(pid_t)groups[i], SIGKILL);
    signal(sig, SIG_DFL);
    raise(sig);
    return;
  }
  received = sig;
}

void kc_signals_install(void) {
  main_thread = pthread_self();
  struct sigaction sa;
  memset(&sa, 0, sizeof(sa));
  sa.sa_handler = on_stop;
  sigemptyset(&sa.sa_mask);
  sigaction(SIGINT, &sa, NULL);
  sigaction(SIGTERM, &sa, NULL);
  signal(SIGPIPE, SIG_IGN);
}

int kc_signal_received(void) { return (int)received; }
