/* POCL_AFFINITY for PoCL's CPU device: see pocl_affinity.h. */
#define _GNU_SOURCE /* sched_getaffinity, CPU_COUNT */
#include "pocl_affinity.h"

#include <pthread.h>
#include <stdlib.h>
#include <unistd.h>
#ifdef __linux__
#include <sched.h>
#endif

static int pinned;

/* PoCL creates its worker threads inside the first clGetPlatformIDs and
 * reads the variable there; setenv is not thread-safe, so it runs once, from
 * the first device discovery. */
static void pin_once(void) {
#ifdef __linux__
    if (getenv("POCL_AFFINITY")) return;
    cpu_set_t allowed;
    if (sched_getaffinity(0, sizeof allowed, &allowed) != 0) return;
    long online = sysconf(_SC_NPROCESSORS_ONLN);
    if (online < 2 || online > CPU_SETSIZE || CPU_COUNT(&allowed) != online) return;
    for (long i = 0; i < online; i++)
        if (!CPU_ISSET((int)i, &allowed)) return;
    /* More workers than CPUs would pin some to CPUs that do not exist: PoCL
     * 3.1 takes a count from POCL_MAX_PTHREAD_COUNT and POCL_PTHREAD_MIN_THREADS,
     * later versions from POCL_CPU_MAX_CU_COUNT. */
    static const char *const counts[] = {"POCL_MAX_PTHREAD_COUNT", "POCL_PTHREAD_MIN_THREADS", "POCL_CPU_MAX_CU_COUNT"};
    for (size_t i = 0; i < sizeof counts / sizeof counts[0]; i++) {
        const char *v = getenv(counts[i]);
        if (v && atol(v) > online) return;
    }
    pinned = setenv("POCL_AFFINITY", "1", 0) == 0;
#endif
}

int mt_pocl_pin_workers(void) {
    static pthread_once_t once = PTHREAD_ONCE_INIT;
    pthread_once(&once, pin_once);
    return pinned;
}
