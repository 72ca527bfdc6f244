/* Times convolution kernel sources, in turns, by wall time and by process CPU
 * time: the program behind bench/kernel_anatomy/run.py, which feeds it a
 * generated kernel and variants of it edited to take away one cost at a time
 * (memory, per-work-group work, prefetches, edge tiles).
 *
 *   bench_anatomy [--device D] --input N --weights N --output N [--rounds R] [--runs K]
 *                 FILE G0xG1xG2 B0xB1xB2 [FILE G B]...
 *
 * Each FILE is an OpenCL C kernel taking (input, weight, output) as mtgpu's
 * convolution kernels do; N are element counts (floats). The input buffer
 * starts 64 KiB into a larger one, so that a variant made to read past the
 * image's first row or column (every tile through the interior path) reads
 * memory that exists. Each round runs every kernel K times in turn, waiting
 * for each run. Process CPU time is taken around each run and divided by the
 * device's compute units: on a CPU device the kernel's threads are the
 * process's, and a virtual machine's stolen time (up to half of it on the
 * shared 2-core machine this was written on) falls outside it, while wall
 * time and device events include it. Prints one JSON object per kernel
 * (medians and minimums over all runs) after one naming the device; the
 * peak to compare with is a kernel of FMA chains passed like the others
 * (run.py), so that it is timed the same way and in the same turns.
 * Exit status 0, 1 when a kernel fails to build or run, 2 on bad usage. */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "bench_util.h"
#include "mtgpu/device.h"
#include "program.h"

#define MAX_KERNELS 16
#define INPUT_MARGIN_BYTES (64 * 1024)

typedef struct {
    const char *file;
    int64_t grid[3], block[3];
    mt_program *prog;
    double *wall, *cpu;
    int n;
} anatomy_kernel;

static double cpu_ms(void) {
    struct timespec ts;
    clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &ts);
    return 1e3 * (double)ts.tv_sec + 1e-6 * (double)ts.tv_nsec;
}

static int parse_dims(const char *s, int64_t out[3]) {
    long long a, b, c;
    char tail;
    if (sscanf(s, "%lldx%lldx%lld%c", &a, &b, &c, &tail) != 3 || a < 1 || b < 1 || c < 1) return 0;
    out[0] = a, out[1] = b, out[2] = c;
    return 1;
}

static char *read_text(const char *path) {
    FILE *f = fopen(path, "rb");
    if (!f) return NULL;
    char *buf = NULL;
    long n = -1;
    if (fseek(f, 0, SEEK_END) == 0) n = ftell(f);
    if (n >= 0 && fseek(f, 0, SEEK_SET) == 0 && (buf = malloc((size_t)n + 1)) != NULL) {
        if (fread(buf, 1, (size_t)n, f) != (size_t)n) {
            free(buf);
            buf = NULL;
        } else {
            buf[n] = '\0';
        }
    }
    fclose(f);
    return buf;
}

/* The name of the source's __kernel function, into name. */
static int kernel_name(const char *src, char *name, size_t len) {
    const char *p = strstr(src, "__kernel");
    if (p) p = strstr(p, "void ");
    if (!p) return 0;
    p += 5;
    size_t n = 0;
    while (p[n] && p[n] != '(' && p[n] != ' ' && n + 1 < len) n++;
    if (!n || p[n] != '(') return 0;
    memcpy(name, p, n);
    name[n] = '\0';
    return 1;
}

static double median(double *v, int n) {
    qsort(v, (size_t)n, sizeof *v, cmp_double);
    return n % 2 ? v[n / 2] : 0.5 * (v[n / 2 - 1] + v[n / 2]);
}

static int usage(void) {
    fprintf(stderr, "usage: bench_anatomy [--device D] --input N --weights N --output N [--rounds R] [--runs K] "
                    "FILE G0xG1xG2 B0xB1xB2 [FILE G B]...\n");
    return 2;
}

static void fill(float *v, size_t n, uint32_t seed) {
    for (size_t i = 0; i < n; i++) {
        seed = seed * 1664525u + 1013904223u;
        v[i] = (float)(seed >> 8) / 16777216.0f - 0.5f;
    }
}

int main(int argc, char **argv) {
    const char *device = "opencl:0";
    long long nin = 0, nw = 0, nout = 0;
    int rounds = 5, runs = 10;
    anatomy_kernel ks[MAX_KERNELS];
    int nk = 0;
    for (int i = 1; i < argc; i++) {
        if (!strcmp(argv[i], "--device") && i + 1 < argc) device = argv[++i];
        else if (!strcmp(argv[i], "--input") && i + 1 < argc) nin = atoll(argv[++i]);
        else if (!strcmp(argv[i], "--weights") && i + 1 < argc) nw = atoll(argv[++i]);
        else if (!strcmp(argv[i], "--output") && i + 1 < argc) nout = atoll(argv[++i]);
        else if (!strcmp(argv[i], "--rounds") && i + 1 < argc) rounds = atoi(argv[++i]);
        else if (!strcmp(argv[i], "--runs") && i + 1 < argc) runs = atoi(argv[++i]);
        else if (argv[i][0] == '-') return usage();
        else {
            if (nk == MAX_KERNELS || i + 2 >= argc) return usage();
            anatomy_kernel *k = &ks[nk++];
            memset(k, 0, sizeof *k);
            k->file = argv[i];
            if (!parse_dims(argv[i + 1], k->grid) || !parse_dims(argv[i + 2], k->block)) return usage();
            i += 2;
        }
    }
    if (nk == 0 || nin < 1 || nw < 1 || nout < 1 || rounds < 1 || runs < 1) return usage();

    char err[4096];
    mt_device *dev = NULL;
    mt_device_params dp = mt_device_default_params();
    dp.use_cache = 0; /* edited sources: nothing worth keeping */
    if (mt_device_open(device, &dp, &dev, err, sizeof err) != MT_OK) {
        fprintf(stderr, "bench_anatomy: %s\n", err);
        return 1;
    }
    const mt_device_info *info = mt_device_get_info(dev);
    const int units = info->compute_units > 0 ? info->compute_units : 1;
    int rc = 0;
    mt_dbuf *in_all = NULL, *in = NULL, *w = NULL, *out = NULL;
    float *host = malloc(sizeof(float) * (size_t)(nin > nw ? nin : nw));
    /* The input with a margin before and after it (see above). */
    const size_t in_view_bytes = sizeof(float) * (size_t)nin + INPUT_MARGIN_BYTES;
    if (!host || mt_dbuf_alloc(dev, INPUT_MARGIN_BYTES + in_view_bytes, &in_all) != MT_OK ||
        mt_dbuf_view(in_all, INPUT_MARGIN_BYTES, in_view_bytes, &in) != MT_OK ||
        mt_dbuf_alloc(dev, sizeof(float) * (size_t)nw, &w) != MT_OK || mt_dbuf_alloc(dev, sizeof(float) * (size_t)nout, &out) != MT_OK) {
        fprintf(stderr, "bench_anatomy: cannot allocate the buffers\n");
        rc = 1;
        goto done;
    }
    fill(host, (size_t)nin, 1);
    if (mt_dbuf_write(dev, in, 0, host, sizeof(float) * (size_t)nin) != MT_OK) rc = 1;
    fill(host, (size_t)nw, 2);
    if (mt_dbuf_write(dev, w, 0, host, sizeof(float) * (size_t)nw) != MT_OK) rc = 1;
    if (rc) {
        fprintf(stderr, "bench_anatomy: cannot write the buffers\n");
        goto done;
    }

    for (int i = 0; i < nk; i++) {
        char *src = read_text(ks[i].file);
        char name[128];
        if (!src || !kernel_name(src, name, sizeof name)) {
            fprintf(stderr, "bench_anatomy: %s: cannot read a __kernel from it\n", ks[i].file);
            free(src);
            rc = 1;
            goto done;
        }
        mt_status st = mt_program_build_source(dev, src, name, &ks[i].prog, err, sizeof err);
        free(src);
        if (st != MT_OK) {
            fprintf(stderr, "bench_anatomy: %s: %s: %s\n", ks[i].file, mt_status_str(st), err);
            rc = 1;
            goto done;
        }
        ks[i].wall = malloc(sizeof(double) * (size_t)rounds * (size_t)runs);
        ks[i].cpu = malloc(sizeof(double) * (size_t)rounds * (size_t)runs);
        if (!ks[i].wall || !ks[i].cpu) {
            rc = 1;
            goto done;
        }
    }

    mt_dbuf *args[3] = {in, w, out};
    for (int r = 0; r < rounds && !rc; r++)
        for (int i = 0; i < nk && !rc; i++) {
            /* One untimed run first: the kernel's code and data as the timed runs find them. */
            double warm_ms;
            if (mt_program_run(dev, ks[i].prog, args, 3, ks[i].grid, ks[i].block, 0, 1, &warm_ms, err, sizeof err) != MT_OK) {
                fprintf(stderr, "bench_anatomy: %s: %s\n", ks[i].file, err);
                rc = 1;
                break;
            }
            for (int j = 0; j < runs; j++) {
                double ms = 0, t0 = now_ms(), c0 = cpu_ms();
                if (mt_program_launch_timed(dev, ks[i].prog, args, 3, ks[i].grid, ks[i].block, &ms, err, sizeof err) != MT_OK ||
                    mt_device_finish(dev, err, sizeof err) != MT_OK) {
                    fprintf(stderr, "bench_anatomy: %s: %s\n", ks[i].file, err);
                    rc = 1;
                    break;
                }
                double c1 = cpu_ms(), t1 = now_ms();
                ks[i].wall[ks[i].n] = ms > 0 ? ms : t1 - t0;
                ks[i].cpu[ks[i].n] = (c1 - c0) / units;
                ks[i].n++;
            }
        }
    if (rc) goto done;
    printf("{\"device\": ");
    json_str(stdout, info->name);
    printf(", \"compute_units\": %d}\n", units);
    for (int i = 0; i < nk; i++) {
        printf("{\"file\": ");
        json_str(stdout, ks[i].file);
        double wall_min = 1e300, cpu_min = 1e300;
        for (int j = 0; j < ks[i].n; j++) {
            if (ks[i].wall[j] < wall_min) wall_min = ks[i].wall[j];
            if (ks[i].cpu[j] < cpu_min) cpu_min = ks[i].cpu[j];
        }
        const double wall_med = median(ks[i].wall, ks[i].n), cpu_med = median(ks[i].cpu, ks[i].n);
        printf(", \"runs\": %d, \"wall_ms_median\": %.4f, \"wall_ms_min\": %.4f, \"cpu_ms_median\": %.4f, \"cpu_ms_min\": %.4f}\n", ks[i].n, wall_med,
               wall_min, cpu_med, cpu_min);
    }

done:
    for (int i = 0; i < nk; i++) {
        mt_program_free(ks[i].prog);
        free(ks[i].wall);
        free(ks[i].cpu);
    }
    mt_dbuf_free(in);
    mt_dbuf_free(in_all);
    mt_dbuf_free(w);
    mt_dbuf_free(out);
    free(host);
    mt_device_close(dev);
    return rc;
}
