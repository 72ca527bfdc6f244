/* Real encoded candidates for GNN tests (test_gnn, test_gnn_gpu): random
 * configs of a few workloads, encoded by the template's graph encoder, with a
 * target the features determine (so a ranking loss has pairs). One copy, so
 * the CPU and GPU tests score the same kind of graphs. */
#ifndef MTGPU_TEST_GNN_SAMPLES_H
#define MTGPU_TEST_GNN_SAMPLES_H

#include "gnn.h"
#include "graph_enc.h"
#include "template.h"

/* Fills x (cap graphs of the encoder's shape) and smp[0..n) and returns n,
 * the number of buildable configs found (at most cap). */
static int mt_test_encode_samples(const mt_template *t, mt_graph_encoder *enc, int cap, float *x, mt_gnn_sample *smp) {
    static const char *wls[] = {"n=1,c=32,h=28,w=28,k=32,r=3,s=3,pad=1", "n=1,c=32,h=28,w=28,k=32,r=3,s=3,pad=1,groups=32",
                                "n=1,c=64,h=14,w=14,k=96,r=1,s=1", "n=1,c=3,h=32,w=32,k=24,r=3,s=3,stride=2,pad=1"};
    const mt_graph_shape *s = mt_graph_encoder_shape(enc);
    size_t per = (size_t)s->n_nodes * MT_GRAPH_FEATS;
    char err[256];
    int n = 0;
    for (size_t w = 0; w < sizeof wls / sizeof wls[0] && n < cap; w++) {
        mt_workload wl;
        assert_int_equal(mt_workload_parse(wls[w], &wl, err, sizeof err), MT_OK);
        if (!mt_template_accepts(t, &wl)) continue;
        mt_space sp;
        assert_int_equal(mt_template_space(t, &wl, &sp), MT_OK);
        uint64_t rng = 31 + w;
        for (int tries = 0; tries < 40 * cap && n < cap; tries++) {
            mt_config cfg;
            mt_space_random(&sp, &rng, &cfg);
            int valid = 0;
            assert_int_equal(mt_graph_encode(enc, &wl, &sp, &cfg, 1, NULL, x + (size_t)n * per, &valid, err, sizeof err), MT_OK);
            if (!valid) continue;
            float tg = 0;
            for (size_t j = 0; j < per; j += 7) tg += x[(size_t)n * per + j];
            smp[n] = (mt_gnn_sample){.shape = s, .feats = x + (size_t)n * per, .target = tg, .group = (int)w};
            n++;
        }
        mt_space_free(&sp);
    }
    return n;
}

#endif
