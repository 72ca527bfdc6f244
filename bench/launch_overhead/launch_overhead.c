/* What a kernel launch costs on a device apart from its work: chains of
 * launches of a kernel that does next to nothing (one add per work-group),
 * queued back to back as a network's pass queues them, over a range of
 * work-group counts. Per count: the median device time of one launch (its
 * profiling events: what `mtgpu run --profile` charges to a layer) and the
 * chain's wall time per launch (what the pass pays). A network of L launches
 * of G work-groups each pays about L x (fixed + G x per-group) on top of its
 * kernels' work.
 *
 * Then the same with work-groups that each run a fixed chain of dependent
 * multiply-adds (`spin`): with one work-group per core the launch should take
 * one work-group's time; what it takes beyond is the time the device's
 * threads take to start together (a worker woken late, chunks of uneven
 * length).
 *
 *   bench_launch_overhead [--device D] [--chain N] [--rounds R] [--json]
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "bench_util.h"
#include "mtgpu/device.h"
#include "program.h"

static const char *touch_src =
    "__kernel void touch(__global float *o) {\n"
    "    if (get_local_id(0) == 0) o[get_group_id(0)] += 1.0f;\n"
    "}\n";

static const char *spin_src =
    "__kernel void spin(__global float *o, __global const int *n) {\n"
    "    float a = o[get_group_id(0)];\n"
    "    for (int i = 0; i < n[0]; i++) a = a * 0.999f + 0.001f;\n"
    "    if (get_local_id(0) == 0) o[get_group_id(0)] = a;\n"
    "}\n";

static double median(double *v, int n) {
    qsort(v, (size_t)n, sizeof *v, cmp_double);
    return n % 2 ? v[n / 2] : 0.5 * (v[n / 2 - 1] + v[n / 2]);
}

static int usage(void) {
    fprintf(stderr, "usage: bench_launch_overhead [--device D] [--chain N] [--rounds R] [--spin N] [--json]\n"
                    "  chains of N (default 50) launches per work-group count, R rounds (default 5); --spin: the\n"
                    "  multiply-adds per work-group of the second kernel (default 20000)\n");
    return 2;
}

typedef struct run_ctx {
    mt_device *dev;
    int chain, rounds, json;
    double *dev_ms, *wall;
    char err[4096];
} run_ctx;

/* Times chains of launches of prog over `groups` one-work-item work-groups;
 * prints one line. 0 on success. */
static int time_case(run_ctx *c, const char *kernel, mt_program *prog, mt_dbuf **args, int nargs, int64_t groups) {
    const int64_t grid[3] = {groups, 1, 1}, block[3] = {1, 1, 1};
    /* The first launch of a work-group count generates its code (PoCL): outside the timing. */
    if (mt_program_launch(c->dev, prog, args, nargs, grid, block, c->err, sizeof c->err) != MT_OK ||
        mt_device_finish(c->dev, c->err, sizeof c->err) != MT_OK)
        return 1;
    for (int r = 0; r < c->rounds; r++) {
        double t0 = now_ms();
        for (int i = 0; i < c->chain; i++)
            if (mt_program_launch_timed(c->dev, prog, args, nargs, grid, block, &c->dev_ms[r * c->chain + i], c->err, sizeof c->err) != MT_OK)
                return 1;
        if (mt_device_finish(c->dev, c->err, sizeof c->err) != MT_OK) return 1;
        c->wall[r] = (now_ms() - t0) / c->chain;
    }
    double d = median(c->dev_ms, c->chain * c->rounds) * 1e3, w = median(c->wall, c->rounds) * 1e3;
    if (c->json)
        printf("{\"kernel\": \"%s\", \"groups\": %lld, \"chain\": %d, \"rounds\": %d, \"device_us\": %.3f, \"wall_us\": %.3f}\n", kernel,
               (long long)groups, c->chain, c->rounds, d, w);
    else
        printf("%8s %10lld %16.2f %16.2f\n", kernel, (long long)groups, d, w);
    return 0;
}

int main(int argc, char **argv) {
    const char *device = NULL;
    run_ctx c = {.chain = 50, .rounds = 5};
    int spin = 20000;
    for (int i = 1; i < argc; i++) {
        if (!strcmp(argv[i], "--device") && i + 1 < argc) device = argv[++i];
        else if (!strcmp(argv[i], "--chain") && i + 1 < argc) c.chain = atoi(argv[++i]);
        else if (!strcmp(argv[i], "--rounds") && i + 1 < argc) c.rounds = atoi(argv[++i]);
        else if (!strcmp(argv[i], "--spin") && i + 1 < argc) spin = atoi(argv[++i]);
        else if (!strcmp(argv[i], "--json")) c.json = 1;
        else return usage();
    }
    if (c.chain < 1 || c.chain > 10000 || c.rounds < 1 || c.rounds > 1000 || spin < 1) return usage();

    static const int64_t touch_groups[] = {1, 2, 8, 32, 128, 512, 2048};
    enum { NG = sizeof touch_groups / sizeof touch_groups[0] };
    mt_device_params dp = mt_device_default_params();
    if (mt_device_open(device, &dp, &c.dev, c.err, sizeof c.err) != MT_OK) {
        fprintf(stderr, "bench_launch_overhead: %s\n", c.err);
        return 1;
    }
    mt_program *touch = NULL, *spinp = NULL;
    mt_dbuf *out = NULL, *nbuf = NULL;
    c.dev_ms = calloc((size_t)c.chain * (size_t)c.rounds, sizeof *c.dev_ms);
    c.wall = calloc((size_t)c.rounds, sizeof *c.wall);
    int rc = 1;
    if (!c.dev_ms || !c.wall) {
        snprintf(c.err, sizeof c.err, "out of memory");
        goto done;
    }
    if (mt_program_build_source(c.dev, touch_src, "touch", &touch, c.err, sizeof c.err) != MT_OK ||
        mt_program_build_source(c.dev, spin_src, "spin", &spinp, c.err, sizeof c.err) != MT_OK)
        goto done;
    if (mt_dbuf_alloc(c.dev, sizeof(float) * (size_t)touch_groups[NG - 1], &out) != MT_OK || mt_dbuf_alloc(c.dev, sizeof(int), &nbuf) != MT_OK ||
        mt_dbuf_write(c.dev, nbuf, 0, &spin, sizeof spin) != MT_OK) {
        snprintf(c.err, sizeof c.err, "buffers failed");
        goto done;
    }
    const mt_device_info *info = mt_device_get_info(c.dev);
    const int64_t units = info->compute_units > 0 ? info->compute_units : 1;
    if (!c.json)
        printf("%s (%lld compute units): chains of %d launches, %d rounds; spin: %d multiply-adds per work-group\n%8s %10s %16s %16s\n",
               info->name, (long long)units, c.chain, c.rounds, spin, "kernel", "groups", "device us/launch", "wall us/launch");
    mt_dbuf *touch_args[1] = {out}, *spin_args[2] = {out, nbuf};
    for (int g = 0; g < NG; g++)
        if (time_case(&c, "touch", touch, touch_args, 1, touch_groups[g])) goto done;
    const int64_t spin_groups[] = {1, units, 2 * units, 4 * units};
    for (int g = 0; g < 4; g++)
        if ((g == 0 || spin_groups[g] != spin_groups[g - 1]) && time_case(&c, "spin", spinp, spin_args, 2, spin_groups[g])) goto done;
    rc = 0;
done:
    if (rc) fprintf(stderr, "bench_launch_overhead: %s\n", c.err);
    mt_dbuf_free(out);
    mt_dbuf_free(nbuf);
    mt_program_free(touch);
    mt_program_free(spinp);
    free(c.dev_ms);
    free(c.wall);
    mt_device_close(c.dev);
    return rc;
}
