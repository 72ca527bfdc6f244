/* libFuzzer harness for mt_weights_load (weights files are outside input).
 *
 * Each input is loaded twice against a small fixed network: as it is, and
 * with its trailing checksum recomputed, so that the fuzzer gets past the
 * checksum into the tensor walk and the shape checks. Any input must load or
 * fail cleanly; a file that loads must save and load back to the same values. */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "mtgpu/weights.h"

static mt_network *g_net;
static char g_path[64], g_path2[80];

static void cleanup(void) {
    remove(g_path);
    remove(g_path2);
}

static void setup(void) {
    mt_network_new("fuzz", &g_net);
    int x = mt_network_add_input(g_net, "input", 1, 2, 6, 6);
    mt_conv_spec s = mt_conv_spec_default(4, 3, 1, 1);
    s.batch_norm = 1;
    s.bn_name = "bn1";
    x = mt_network_add_conv(g_net, "conv1", x, &s);
    x = mt_network_add_global_avgpool(g_net, "pool", x);
    x = mt_network_add_flatten(g_net, "flatten", x);
    mt_network_add_dense(g_net, "fc", x, 3, 1, MT_ACT_NONE);
    snprintf(g_path, sizeof g_path, "/tmp/mtgpu-fuzz-weights-XXXXXX");
    int fd = mkstemp(g_path);
    if (fd >= 0) close(fd);
    snprintf(g_path2, sizeof g_path2, "%s.saved", g_path);
    atexit(cleanup);
}

static uint64_t fnv(const uint8_t *p, size_t n) {
    uint64_t h = 0xcbf29ce484222325ULL;
    for (size_t i = 0; i < n; i++) h = (h ^ p[i]) * 0x100000001b3ULL;
    return h;
}

static void try_load(const uint8_t *data, size_t size) {
    FILE *f = fopen(g_path, "wb");
    if (!f) return;
    fwrite(data, 1, size, f);
    fclose(f);
    char err[256];
    mt_weights *w = NULL;
    if (mt_weights_load(g_path, g_net, &w, err, sizeof err) != MT_OK) return;
    mt_weights *back = NULL;
    if (mt_weights_save(w, g_path2, err, sizeof err) != MT_OK || mt_weights_load(g_path2, g_net, &back, err, sizeof err) != MT_OK) abort();
    for (int i = 0; i < mt_weights_count(w); i++) {
        const char *name;
        const float *a;
        int64_t n = 0;
        mt_weights_tensor(w, i, &name, NULL, NULL, &a);
        const float *b = mt_weights_find(back, name, &n);
        if (!b || memcmp(a, b, sizeof(float) * (size_t)n) != 0) abort();
    }
    mt_weights_free(back);
    mt_weights_free(w);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    if (!g_net) setup();
    try_load(data, size);
    if (size >= 24) {
        uint8_t *fixed = malloc(size);
        if (!fixed) return 0;
        memcpy(fixed, data, size);
        uint64_t h = fnv(fixed, size - 8);
        for (int i = 0; i < 8; i++) fixed[size - 8 + i] = (uint8_t)(h >> (8 * i));
        try_load(fixed, size);
        free(fixed);
    }
    return 0;
}
