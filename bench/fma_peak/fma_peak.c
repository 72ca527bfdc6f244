/* The CPU's fp32 FMA peak two ways, in turns: native loops of independent
 * vector FMA chains (AVX2 8 lanes and, where the CPU has it, AVX-512 16),
 * one thread per core started together, each chain's registers never
 * leaving the core; and mtgpu's own probe (mt_device_measure_peak), whose
 * figure `mtgpu run --profile` takes the layers' fractions of peak against.
 * Their ratio says how far those fractions overstate the kernels on this
 * CPU. Then kvec's 8-lane reduction step on one thread with its data in L1
 * (step_1x14, step_3x4): what its broadcasts leave of the chains' rate.
 * Prints a markdown table; --json writes one JSON object instead.
 *
 *   bench_fma_peak [--device D] [--rounds R] [--threads T] [--json]
 */
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "bench_util.h"
#include "mtgpu/device.h"

#define NATIVE_ITERS 100000000L /* about 0.4 s per thread at 4 GHz */

#if defined(__x86_64__) && defined(__GNUC__)
#include <immintrin.h>
#define HAVE_X86 1

/* Ten chains: FMA latency (4-5 cycles) x 2 ports, with room to spare,
 * within AVX2's 16 registers with the two operands. Each chain starts from
 * its own value, x0 + i/1024 (x0 from the caller at run time): chains that
 * started alike computed alike, and GCC 12 merged all ten into one, whose
 * 4-cycle latency per iteration then passed for ten FMAs (1.25x the
 * 2-per-cycle peak on a Zen 3; bench/fma_peak/results before 2026-12-06). */
#define CHAIN_START(x0, i) ((x0) + (float)(i) / 1024.0f)
__attribute__((target("avx2,fma"))) static float chains_avx2(long iters, float x0) {
    __m256 a0 = _mm256_set1_ps(CHAIN_START(x0, 0)), a1 = _mm256_set1_ps(CHAIN_START(x0, 1)), a2 = _mm256_set1_ps(CHAIN_START(x0, 2)),
           a3 = _mm256_set1_ps(CHAIN_START(x0, 3)), a4 = _mm256_set1_ps(CHAIN_START(x0, 4)), a5 = _mm256_set1_ps(CHAIN_START(x0, 5)),
           a6 = _mm256_set1_ps(CHAIN_START(x0, 6)), a7 = _mm256_set1_ps(CHAIN_START(x0, 7)), a8 = _mm256_set1_ps(CHAIN_START(x0, 8)),
           a9 = _mm256_set1_ps(CHAIN_START(x0, 9));
    const __m256 b = _mm256_set1_ps(0.999f), c = _mm256_set1_ps(0.001f);
    for (long i = 0; i < iters; i++) {
        a0 = _mm256_fmadd_ps(a0, b, c), a1 = _mm256_fmadd_ps(a1, b, c), a2 = _mm256_fmadd_ps(a2, b, c);
        a3 = _mm256_fmadd_ps(a3, b, c), a4 = _mm256_fmadd_ps(a4, b, c), a5 = _mm256_fmadd_ps(a5, b, c);
        a6 = _mm256_fmadd_ps(a6, b, c), a7 = _mm256_fmadd_ps(a7, b, c), a8 = _mm256_fmadd_ps(a8, b, c);
        a9 = _mm256_fmadd_ps(a9, b, c);
    }
    __m256 s = _mm256_add_ps(_mm256_add_ps(_mm256_add_ps(a0, a1), _mm256_add_ps(a2, a3)),
                             _mm256_add_ps(_mm256_add_ps(a4, a5), _mm256_add_ps(_mm256_add_ps(a6, a7), _mm256_add_ps(a8, a9))));
    float out[8];
    _mm256_storeu_ps(out, s);
    return out[0];
}

__attribute__((target("avx512f"))) static float chains_avx512(long iters, float x0) {
    __m512 a0 = _mm512_set1_ps(CHAIN_START(x0, 0)), a1 = _mm512_set1_ps(CHAIN_START(x0, 1)), a2 = _mm512_set1_ps(CHAIN_START(x0, 2)),
           a3 = _mm512_set1_ps(CHAIN_START(x0, 3)), a4 = _mm512_set1_ps(CHAIN_START(x0, 4)), a5 = _mm512_set1_ps(CHAIN_START(x0, 5)),
           a6 = _mm512_set1_ps(CHAIN_START(x0, 6)), a7 = _mm512_set1_ps(CHAIN_START(x0, 7)), a8 = _mm512_set1_ps(CHAIN_START(x0, 8)),
           a9 = _mm512_set1_ps(CHAIN_START(x0, 9));
    const __m512 b = _mm512_set1_ps(0.999f), c = _mm512_set1_ps(0.001f);
    for (long i = 0; i < iters; i++) {
        a0 = _mm512_fmadd_ps(a0, b, c), a1 = _mm512_fmadd_ps(a1, b, c), a2 = _mm512_fmadd_ps(a2, b, c);
        a3 = _mm512_fmadd_ps(a3, b, c), a4 = _mm512_fmadd_ps(a4, b, c), a5 = _mm512_fmadd_ps(a5, b, c);
        a6 = _mm512_fmadd_ps(a6, b, c), a7 = _mm512_fmadd_ps(a7, b, c), a8 = _mm512_fmadd_ps(a8, b, c);
        a9 = _mm512_fmadd_ps(a9, b, c);
    }
    __m512 s = _mm512_add_ps(_mm512_add_ps(_mm512_add_ps(a0, a1), _mm512_add_ps(a2, a3)),
                             _mm512_add_ps(_mm512_add_ps(a4, a5), _mm512_add_ps(_mm512_add_ps(a6, a7), _mm512_add_ps(a8, a9))));
    return _mm512_reduce_add_ps(s);
}

/* kvec's reduction step in 8-lane vectors, without its memory traffic: per
 * input channel its weight vectors loaded and its input values broadcast
 * from L1 (4 KiB, cycled), each broadcast feeding one FMA per weight vector,
 * into accumulators that stay in registers. 1 x 14: one vector x 14 pixels
 * (14 broadcasts per 14 FMAs, AVX2's default on 14-wide rows); 3 x 4: three
 * vectors x 4 pixels (4 per 12). Against the chains above, they say what
 * the broadcasts cost where they compete with the FMAs for execution ports. */
#define STEP_ROWS 64
__attribute__((target("avx2,fma"))) static float step_1x14(const float *in, const float *wt, long iters) {
    __m256 a[14];
    for (int j = 0; j < 14; j++) a[j] = _mm256_setzero_ps();
    for (long i = 0; i < iters; i++) {
        const float *x = in + (i % STEP_ROWS) * 16;
        const __m256 w = _mm256_loadu_ps(wt + (i % STEP_ROWS) * 8);
#pragma GCC unroll 14
        for (int j = 0; j < 14; j++) a[j] = _mm256_fmadd_ps(_mm256_broadcast_ss(x + j), w, a[j]);
    }
    for (int j = 1; j < 14; j++) a[0] = _mm256_add_ps(a[0], a[j]);
    float out[8];
    _mm256_storeu_ps(out, a[0]);
    return out[0];
}

__attribute__((target("avx2,fma"))) static float step_3x4(const float *in, const float *wt, long iters) {
    __m256 a[12];
    for (int j = 0; j < 12; j++) a[j] = _mm256_setzero_ps();
    for (long i = 0; i < iters; i++) {
        const float *x = in + (i % STEP_ROWS) * 16, *w = wt + (i % STEP_ROWS) * 24;
        const __m256 w0 = _mm256_loadu_ps(w), w1 = _mm256_loadu_ps(w + 8), w2 = _mm256_loadu_ps(w + 16);
#pragma GCC unroll 4
        for (int p = 0; p < 4; p++) {
            const __m256 b = _mm256_broadcast_ss(x + p);
            a[3 * p] = _mm256_fmadd_ps(b, w0, a[3 * p]);
            a[3 * p + 1] = _mm256_fmadd_ps(b, w1, a[3 * p + 1]);
            a[3 * p + 2] = _mm256_fmadd_ps(b, w2, a[3 * p + 2]);
        }
    }
    for (int j = 1; j < 12; j++) a[0] = _mm256_add_ps(a[0], a[j]);
    float out[8];
    _mm256_storeu_ps(out, a[0]);
    return out[0];
}

#define STEP_ITERS 50000000L
#define STEP_TILES 2
static const char *const step_names[STEP_TILES] = {"1 x 14", "3 x 4"};
static const int step_fmas[STEP_TILES] = {14, 12};

/* GFLOP/s of one thread running tile's step (0: 1 x 14, 1: 3 x 4). */
static double step_gflops(int tile, float *sink) {
    static float in[STEP_ROWS * 16], wt[STEP_ROWS * 24];
    for (int i = 0; i < STEP_ROWS * 16; i++) in[i] = 1.0f / (float)(i + 1);
    for (int i = 0; i < STEP_ROWS * 24; i++) wt[i] = 0.5f / (float)(i + 1);
    double t0 = now_ms();
    *sink += tile == 0 ? step_1x14(in, wt, STEP_ITERS) : step_3x4(in, wt, STEP_ITERS);
    double s = (now_ms() - t0) / 1e3;
    return 2.0 * 8 * step_fmas[tile] * (double)STEP_ITERS / s / 1e9;
}
#else
#define HAVE_X86 0
#endif

#define NATIVE_CHAINS 10

/* Volatile, so that no chain's value is known when the loops are compiled. */
static volatile float chain_start = 1.0f;

typedef struct worker {
    int lanes;
    atomic_int *go;
    float start; /* the chains' first value, unknown to the compiler */
    float sink;
} worker;

static void *run_chains(void *p) {
    worker *w = p;
    while (!atomic_load(w->go)) /* every thread starts its chains at once */
        ;
#if HAVE_X86
    w->sink = w->lanes == 16 ? chains_avx512(NATIVE_ITERS, w->start) : chains_avx2(NATIVE_ITERS, w->start);
#endif
    return NULL;
}

/* GFLOP/s of `threads` threads each running the native chains of `lanes`
 * lanes, started together; the wall time of the slowest. -1 when a thread
 * could not be started. */
static double native_peak(int lanes, int threads) {
    pthread_t tid[64];
    worker w[64];
    atomic_int go = 0;
    int made = 0;
    for (; made < threads && made < 64; made++) {
        w[made] = (worker){.lanes = lanes, .go = &go, .start = chain_start};
        if (pthread_create(&tid[made], NULL, run_chains, &w[made]) != 0) break;
    }
    double t0 = now_ms();
    atomic_store(&go, 1);
    for (int i = 0; i < made; i++) pthread_join(tid[i], NULL);
    double wall = (now_ms() - t0) / 1e3;
    if (made < threads) return -1;
    return 2.0 * lanes * NATIVE_CHAINS * (double)NATIVE_ITERS * threads / wall / 1e9;
}

static int usage(void) {
    fprintf(stderr, "usage: bench_fma_peak [--device D] [--rounds R] [--threads T] [--json]\n"
                    "  R rounds (default 3) of: native FMA chains on 1 and on T threads (default: the online CPUs)\n"
                    "  per vector width the CPU has, then mtgpu's probe on device D (default opencl:0),\n"
                    "  then kvec's 8-lane 1 x 14 and 3 x 4 reduction steps on 1 thread\n");
    return 2;
}

int main(int argc, char **argv) {
    const char *spec = "opencl:0";
    int rounds = 3, threads = (int)sysconf(_SC_NPROCESSORS_ONLN), json = 0;
    for (int i = 1; i < argc; i++) {
        if (!strcmp(argv[i], "--device") && i + 1 < argc) spec = argv[++i];
        else if (!strcmp(argv[i], "--rounds") && i + 1 < argc) rounds = atoi(argv[++i]);
        else if (!strcmp(argv[i], "--threads") && i + 1 < argc) threads = atoi(argv[++i]);
        else if (!strcmp(argv[i], "--json")) json = 1;
        else return usage();
    }
    if (rounds < 1 || rounds > 64 || threads < 1 || threads > 64) return usage();
#if !HAVE_X86
    fprintf(stderr, "bench_fma_peak: the native loops are written for x86-64\n");
    return 1;
#else
    int widths[2], nwidths = 0;
    __builtin_cpu_init();
    if (__builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma")) widths[nwidths++] = 8;
    if (__builtin_cpu_supports("avx512f")) widths[nwidths++] = 16;
    if (nwidths == 0) {
        fprintf(stderr, "bench_fma_peak: this CPU has neither AVX2+FMA nor AVX-512\n");
        return 1;
    }
    char err[4096];
    mt_device *dev = NULL;
    if (mt_device_open(spec, NULL, &dev, err, sizeof err) != MT_OK) {
        fprintf(stderr, "bench_fma_peak: %s: %s\n", spec, err);
        return 1;
    }
    double one[2][64], all[2][64], probe[64], step[STEP_TILES][64];
    float sink = 0;
    for (int r = 0; r < rounds; r++) {
        for (int w = 0; w < nwidths; w++) {
            one[w][r] = native_peak(widths[w], 1);
            all[w][r] = native_peak(widths[w], threads);
        }
        for (int t = 0; t < STEP_TILES; t++) step[t][r] = step_gflops(t, &sink);
        if (mt_device_measure_peak(dev, &probe[r], err, sizeof err) != MT_OK) {
            fprintf(stderr, "bench_fma_peak: probe: %s\n", err);
            mt_device_close(dev);
            return 1;
        }
    }
    const mt_device_info *di = mt_device_get_info(dev);
    if (json) {
        printf("{\"device\": ");
        json_str(stdout, di->name);
        printf(", \"threads\": %d, \"rounds\": %d, \"native_chains\": %d, \"probe_gflops\": [", threads, rounds, NATIVE_CHAINS);
        for (int r = 0; r < rounds; r++) printf("%s%.2f", r ? ", " : "", probe[r]);
        printf("], \"native\": [");
        for (int w = 0; w < nwidths; w++) {
            printf("%s{\"lanes\": %d, \"one_thread_gflops\": [", w ? ", " : "", widths[w]);
            for (int r = 0; r < rounds; r++) printf("%s%.2f", r ? ", " : "", one[w][r]);
            printf("], \"all_threads_gflops\": [");
            for (int r = 0; r < rounds; r++) printf("%s%.2f", r ? ", " : "", all[w][r]);
            printf("]}");
        }
        printf("], \"kvec_steps\": [");
        for (int t = 0; t < STEP_TILES; t++) {
            printf("%s{\"tile\": \"%s\", \"fmas\": %d, \"one_thread_gflops\": [", t ? ", " : "", step_names[t], step_fmas[t]);
            for (int r = 0; r < rounds; r++) printf("%s%.2f", r ? ", " : "", step[t][r]);
            printf("]}");
        }
        printf("], \"sink\": %.3g}\n", sink);
    } else {
        printf("device %s, %d threads, %d rounds\n\n| round | probe GFLOP/s |", di->name, threads, rounds);
        for (int w = 0; w < nwidths; w++) printf(" native %d lanes, 1 thread | native %d lanes, %d threads | probe / native |", widths[w], widths[w], threads);
        for (int t = 0; t < STEP_TILES; t++) printf(" kvec %s step, 1 thread |", step_names[t]);
        printf("\n|---|---|");
        for (int w = 0; w < nwidths; w++) printf("---|---|---|");
        for (int t = 0; t < STEP_TILES; t++) printf("---|");
        printf("\n");
        for (int r = 0; r < rounds; r++) {
            printf("| %d | %.1f |", r + 1, probe[r]);
            for (int w = 0; w < nwidths; w++) printf(" %.1f | %.1f | %.2f |", one[w][r], all[w][r], all[w][r] > 0 ? probe[r] / all[w][r] : 0);
            for (int t = 0; t < STEP_TILES; t++) printf(" %.1f |", step[t][r]);
            printf("\n");
        }
        if (sink == 12345.0f) printf("\n"); /* keeps the steps' results live */
    }
    mt_device_close(dev);
    return 0;
#endif
}
