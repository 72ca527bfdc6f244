/* Small helpers the benchmark programs share (bench/tune_network/onednn_convs.c,
 * bench/e2e/onednn_net.c, bench/launch_overhead/launch_overhead.c): a
 * monotonic clock, a comparison for medians, and a JSON string writer. Header-only: the benchmarks are single files. */
#ifndef MTGPU_BENCH_UTIL_H
#define MTGPU_BENCH_UTIL_H

#include <stdio.h>
#include <time.h>

static inline double now_ms(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return 1e3 * (double)ts.tv_sec + 1e-6 * (double)ts.tv_nsec;
}

static inline int cmp_double(const void *a, const void *b) {
    double x = *(const double *)a, y = *(const double *)b;
    return x < y ? -1 : x > y;
}

/* Writes s as a JSON string (quoted, escaped) to f. */
static inline void json_str(FILE *f, const char *s) {
    fputc('"', f);
    for (; *s; s++) {
        unsigned char ch = (unsigned char)*s;
        if (ch == '"' || ch == '\\') fprintf(f, "\\%c", ch);
        else if (ch < 0x20) fprintf(f, "\\u%04x", ch);
        else fputc(ch, f);
    }
    fputc('"', f);
}

#endif
