/* Ctrl-C in the long commands (tune, collect): the first stops the work
 * after what is in flight, the second ends the process (cli.h). */
#include <signal.h>

#include "cli.h"

static volatile sig_atomic_t stop_requested;

static void on_stop_signal(int sig) {
    if (stop_requested) {
        /* The second one: stop now. */
        signal(sig, SIG_DFL);
        raise(sig);
        return;
    }
    stop_requested = 1;
}

const volatile sig_atomic_t *mt_cli_catch_stop(mt_cli_signals *saved) {
    struct sigaction sa = {0};
    sa.sa_handler = on_stop_signal;
    sigemptyset(&sa.sa_mask);
    stop_requested = 0;
    sigaction(SIGINT, &sa, &saved->old_int);
    sigaction(SIGTERM, &sa, &saved->old_term);
    return &stop_requested;
}

void mt_cli_release_stop(const mt_cli_signals *saved) {
    sigaction(SIGINT, &saved->old_int, NULL);
    sigaction(SIGTERM, &saved->old_term, NULL);
}
