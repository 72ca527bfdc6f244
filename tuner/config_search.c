/* Config search: uniform random, and AutoTVM's model-guided simulated
 * annealing (sa_model_optimizer.py + model_based_tuner.py), in C.
 *
 * "sa", per next_batch of B configs once the model is fitted:
 *  - local: local_share of the model's share comes from the one-knob
 *    neighbourhoods of the two best measured configs, ranked by the model;
 *  - annealing: `chains` points (kept from the previous call, a quarter of
 *    them restarted at the best measured configs) each propose a one-knob
 *    move per step; the model scores all proposals in one call; a proposal is
 *    accepted with probability exp((new - old) / T), T falling linearly. Every
 *    scored config that is neither measured nor returned competes for a
 *    min-heap of the best pool_factor * B. Scores are memoised for the call,
 *    so a chain revisiting a config costs nothing. The rest of the model's
 *    share is the heap's best after the diversity filter;
 *  - exploration: epsilon * B configs that do not follow the model, half
 *    mutations of the best measured configs, half uniform (both skipping
 *    configs the model knows cannot be built).
 * Why the local picks and the larger epsilon: with batches of 16 on the
 * synthetic task of tests/test_search.c (best configs need several knobs
 * right at once), epsilon 0.1 without local picks needed 50-320 trials to get
 * within 5% of the optimum, 2 of 8 seeds over 200; with both, 50-123 over the
 * same 8 seeds. The model's global picks chase what it believes; the local
 * ones and the mutations test the one-knob changes it has no data on. */
#include "config_search.h"
#include "fail.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define EMPTY UINT64_MAX
/* Under a candidate restriction: the nearest others kept per config (the
 * moves of a chain), and how many others a config is compared with to find
 * them (a larger restriction is sampled, keeping n x NEAR_SAMPLE work). */
#define NEAR 16
#define NEAR_SAMPLE 4096

enum { KIND_RANDOM, KIND_SA };

/* ---- a set of config indices (open addressing, linear probing) ---- */

typedef struct idxset {
    uint64_t *keys;
    size_t cap, count; /* cap: power of two, or 0 */
} idxset;

static uint64_t mix(uint64_t x) {
    x ^= x >> 33;
    x *= UINT64_C(0xff51afd7ed558ccd);
    x ^= x >> 33;
    return x;
}

static size_t set_find(const idxset *s, uint64_t k) {
    size_t m = s->cap - 1, i = (size_t)mix(k) & m;
    while (s->keys[i] != EMPTY && s->keys[i] != k) i = (i + 1) & m;
    return i;
}

static int set_has(const idxset *s, uint64_t k) { return s->cap && s->keys[set_find(s, k)] == k; }

/* Room for `extra` more keys without growing: later adds cannot fail. */
static int set_reserve(idxset *s, size_t extra) {
    size_t need = (s->count + extra) * 2;
    if (s->cap >= need && s->cap) return 1;
    size_t cap = s->cap ? s->cap : 64;
    while (cap < need) cap *= 2;
    uint64_t *keys = malloc(sizeof *keys * cap);
    if (!keys) return 0;
    for (size_t i = 0; i < cap; i++) keys[i] = EMPTY;
    idxset n = {keys, cap, 0};
    for (size_t i = 0; i < s->cap; i++)
        if (s->keys[i] != EMPTY) {
            keys[set_find(&n, s->keys[i])] = s->keys[i];
            n.count++;
        }
    free(s->keys);
    *s = n;
    return 1;
}

/* 1 added, 0 already there, -1 out of memory. */
static int set_add(idxset *s, uint64_t k) {
    if (!set_reserve(s, 1)) return -1;
    size_t i = set_find(s, k);
    if (s->keys[i] == k) return 0;
    s->keys[i] = k;
    s->count++;
    return 1;
}

/* Linear probing's backward-shift deletion: later keys of the same run move
 * up so that lookups never stop early at the hole. */
static void set_remove(idxset *s, uint64_t k) {
    if (!s->cap) return;
    size_t m = s->cap - 1, i = set_find(s, k);
    if (s->keys[i] != k) return;
    for (size_t j = (i + 1) & m; s->keys[j] != EMPTY; j = (j + 1) & m) {
        size_t home = (size_t)mix(s->keys[j]) & m;
        /* keys[j] may fill the hole at i when i lies cyclically in [home, j) */
        int movable = i <= j ? (home <= i || home > j) : (home <= i && home > j);
        if (movable) {
            s->keys[i] = s->keys[j];
            i = j;
        }
    }
    s->keys[i] = EMPTY;
    s->count--;
}

/* ---- score memo for one annealing run ---- */

typedef struct memo {
    uint64_t *keys;
    double *score;
    unsigned char *in_heap;
    size_t cap, count;
} memo;

static void memo_free(memo *m) {
    free(m->keys);
    free(m->score);
    free(m->in_heap);
    memset(m, 0, sizeof *m);
}

static size_t memo_find(const memo *m, uint64_t k) {
    size_t mask = m->cap - 1, i = (size_t)mix(k) & mask;
    while (m->keys[i] != EMPTY && m->keys[i] != k) i = (i + 1) & mask;
    return i;
}

static int memo_reserve(memo *m, size_t extra) {
    size_t need = (m->count + extra) * 2;
    if (m->cap >= need && m->cap) return 1;
    size_t cap = m->cap ? m->cap : 1024;
    while (cap < need) cap *= 2;
    memo n = {malloc(sizeof(uint64_t) * cap), malloc(sizeof(double) * cap), malloc(cap), cap, 0};
    if (!n.keys || !n.score || !n.in_heap) {
        memo_free(&n);
        return 0;
    }
    for (size_t i = 0; i < cap; i++) n.keys[i] = EMPTY;
    for (size_t i = 0; i < m->cap; i++)
        if (m->keys[i] != EMPTY) {
            size_t j = memo_find(&n, m->keys[i]);
            n.keys[j] = m->keys[i];
            n.score[j] = m->score[i];
            n.in_heap[j] = m->in_heap[i];
            n.count++;
        }
    memo_free(m);
    *m = n;
    return 1;
}

static void memo_clear(memo *m) {
    for (size_t i = 0; i < m->cap; i++) m->keys[i] = EMPTY;
    m->count = 0;
}

/* ---- the search ---- */

typedef struct measured {
    uint64_t idx;
    double cost;
} measured;

typedef struct cand {
    double score;
    uint64_t idx;
    mt_config cfg;
} cand;

struct mt_search {
    int kind;
    const mt_workload *wl;
    const mt_template *t;
    const mt_space *sp;
    mt_costmodel *model;
    mt_search_params p;
    uint64_t rng;
    uint64_t size;
    idxset visited;
    measured *meas;
    int nmeas, capmeas;
    int have_best;
    mt_config best;
    double best_cost;
    /* candidate restriction (p.only): its configs decoded, and each one's
     * NEAR nearest others as positions in p.only (-1 where there are fewer) */
    mt_config *ocfg;
    int *near;
    /* annealing state kept between calls (AutoTVM's persistent points) */
    mt_config *points;
    double *pscore;
    int npoints;
    /* scratch */
    memo mm;
    int64_t scored;
};

mt_search_params mt_search_default_params(void) {
    return (mt_search_params){
        .seed = 1,
        .chains = 128,
        .iterations = 500,
        .early_stop = 30,
        .temp_start = 1.0,
        .temp_end = 0.0,
        .epsilon = 0.2,
        .min_knob_diff = 2,
        .pool_factor = 3,
        .local_share = 0.25,
    };
}

/* Position of idx in the restriction, or -1 when it is not there. */
static long only_pos(const mt_search *s, uint64_t idx) {
    size_t lo = 0, hi = s->p.nonly;
    while (lo < hi) {
        size_t mid = lo + (hi - lo) / 2;
        if (s->p.only[mid] < idx) lo = mid + 1;
        else hi = mid;
    }
    return lo < s->p.nonly && s->p.only[lo] == idx ? (long)lo : -1;
}

/* Decodes the restriction and finds each config's NEAR nearest others by
 * knob difference; ties go in an order drawn from the seed, so that a chain
 * among many equally near configs does not always take the same ones.
 * 0 when out of memory. */
static int build_near(mt_search *s) {
    size_t n = s->p.nonly, cap = n ? n : 1;
    s->ocfg = malloc(sizeof *s->ocfg * cap);
    s->near = malloc(sizeof *s->near * NEAR * cap);
    if (!s->ocfg || !s->near) return 0;
    for (size_t i = 0; i < n; i++) mt_space_config_from_index(s->sp, s->p.only[i], &s->ocfg[i]);
    uint64_t rng = s->p.seed ^ UINT64_C(0x5851f42d4c957f2d);
    size_t ncmp = n - (n > 0) <= NEAR_SAMPLE ? n : NEAR_SAMPLE;
    for (size_t i = 0; i < n; i++) {
        int *row = s->near + i * NEAR;
        int dist[NEAR];
        uint64_t tie[NEAR];
        int nb = 0;
        for (size_t c = 0; c < ncmp; c++) {
            size_t j = ncmp == n ? c : (size_t)mt_rng_below(&rng, n);
            if (j == i) continue;
            int d = 0;
            for (int k = 0; k < s->sp->nknobs; k++) d += s->ocfg[i].choice[k] != s->ocfg[j].choice[k];
            uint64_t t = mix(s->p.seed ^ ((uint64_t)i << 32) ^ (uint64_t)j);
            if (nb == NEAR && (d > dist[NEAR - 1] || (d == dist[NEAR - 1] && t >= tie[NEAR - 1]))) continue;
            int dup = 0;
            for (int q = 0; q < nb && !dup; q++) dup = row[q] == (int)j;
            if (dup) continue; /* a sample drew it twice */
            int at = nb < NEAR ? nb++ : NEAR - 1;
            while (at > 0 && (dist[at - 1] > d || (dist[at - 1] == d && tie[at - 1] > t))) {
                dist[at] = dist[at - 1], tie[at] = tie[at - 1], row[at] = row[at - 1];
                at--;
            }
            dist[at] = d, tie[at] = t, row[at] = (int)j;
        }
        for (int q = nb; q < NEAR; q++) row[q] = -1;
    }
    return 1;
}

mt_status mt_search_create_ex(const char *kind, const mt_workload *wl, const mt_template *t, const mt_space *space, mt_costmodel *model,
                              const mt_search_params *p, mt_search **out, char *err, size_t errlen) {
    if (!out) return mt__fail(err, errlen, MT_INVALID_ARG, "search: NULL argument");
    *out = NULL;
    int k;
    if (kind && strcmp(kind, "random") == 0) k = KIND_RANDOM;
    else if (kind && strcmp(kind, "sa") == 0) k = KIND_SA;
    else return mt__fail(err, errlen, MT_INVALID_ARG, "unknown search '%s' (known: random, sa)", kind ? kind : "(null)");
    if (!wl || !t || !space) return mt__fail(err, errlen, MT_INVALID_ARG, "search: NULL workload, template or space");
    if (strcmp(space->template_name, mt_template_name(t)) != 0)
        return mt__fail(err, errlen, MT_INVALID_ARG, "search: space of '%s' given with template '%s'", space->template_name, mt_template_name(t));
    if (space->nknobs < 1) return mt__fail(err, errlen, MT_INVALID_ARG, "search: empty space");
    mt_search_params prm = p ? *p : mt_search_default_params();
    if (prm.chains < 1 || prm.iterations < 0 || prm.early_stop < 1 || prm.pool_factor < 1 || !(prm.epsilon >= 0 && prm.epsilon <= 1) ||
        !(prm.local_share >= 0 && prm.local_share <= 1) ||
        !(prm.temp_start >= 0) || !(prm.temp_end >= 0))
        return mt__fail(err, errlen, MT_INVALID_ARG, "search: chains, early_stop, pool_factor >= 1, iterations >= 0, epsilon and local_share in [0, 1]");
    if (prm.only) {
        uint64_t size = mt_space_size(space);
        if (prm.nonly > (size_t)INT32_MAX) return mt__fail(err, errlen, MT_INVALID_ARG, "search: a restriction of %zu configs is too large", prm.nonly);
        for (size_t i = 0; i < prm.nonly; i++)
            if (prm.only[i] >= size || (i > 0 && prm.only[i] <= prm.only[i - 1]))
                return mt__fail(err, errlen, MT_INVALID_ARG, "search: the restriction is not ascending config indices of the space (entry %zu)", i);
    } else {
        prm.nonly = 0;
    }
    mt_search *s = calloc(1, sizeof *s);
    if (!s) return mt__fail(err, errlen, MT_NOMEM, "search: out of memory");
    s->kind = k;
    s->wl = wl;
    s->t = t;
    s->sp = space;
    s->model = model;
    s->p = prm;
    s->rng = prm.seed;
    s->size = prm.only ? (uint64_t)prm.nonly : mt_space_size(space);
    if (!set_reserve(&s->visited, 64) || (prm.only && !build_near(s))) {
        mt_search_free(s);
        return mt__fail(err, errlen, MT_NOMEM, "search: out of memory");
    }
    *out = s;
    return MT_OK;
}

mt_status mt_search_create(const char *kind, const mt_workload *wl, const mt_template *t, const mt_space *space, mt_costmodel *model,
                           uint64_t seed, mt_search **out, char *err, size_t errlen) {
    mt_search_params p = mt_search_default_params();
    p.seed = seed;
    return mt_search_create_ex(kind, wl, t, space, model, &p, out, err, errlen);
}

void mt_search_free(mt_search *s) {
    if (!s) return;
    free(s->visited.keys);
    free(s->meas);
    free(s->points);
    free(s->pscore);
    free(s->ocfg);
    free(s->near);
    memo_free(&s->mm);
    free(s);
}

const char *mt_search_kind(const mt_search *s) { return !s ? "(null)" : s->kind == KIND_SA ? "sa" : "random"; }
uint64_t mt_search_visited(const mt_search *s) { return s ? s->visited.count : 0; }
uint64_t mt_search_space_size(const mt_search *s) { return s ? s->size : 0; }
int64_t mt_search_scored(const mt_search *s) { return s ? s->scored : 0; }

mt_status mt_search_best(const mt_search *s, mt_config *cfg, double *cost_ms, char *err, size_t errlen) {
    if (!s) return mt__fail(err, errlen, MT_INVALID_ARG, "search: NULL argument");
    if (!s->have_best) return mt__fail(err, errlen, MT_NOT_FOUND, "search: no measured config has succeeded yet");
    if (cfg) *cfg = s->best;
    if (cost_ms) *cost_ms = s->best_cost;
    return MT_OK;
}

mt_status mt_search_mark_measured(mt_search *s, const mt_config *cfg, double cost_ms, char *err, size_t errlen) {
    if (!s || !cfg) return mt__fail(err, errlen, MT_INVALID_ARG, "search: NULL argument");
    if (mt_space_check(s->sp, cfg) != MT_OK) return mt__fail(err, errlen, MT_INVALID_ARG, "search: measured config is not in the space");
    if (s->nmeas == s->capmeas) {
        int cap = s->capmeas ? 2 * s->capmeas : 64;
        measured *m = realloc(s->meas, sizeof *m * (size_t)cap);
        if (!m) return mt__fail(err, errlen, MT_NOMEM, "search: out of memory");
        s->meas = m;
        s->capmeas = cap;
    }
    uint64_t idx = mt_space_config_index(s->sp, cfg);
    if (set_add(&s->visited, idx) < 0) return mt__fail(err, errlen, MT_NOMEM, "search: out of memory");
    double c = cost_ms > 0 && isfinite(cost_ms) ? cost_ms : INFINITY;
    s->meas[s->nmeas++] = (measured){idx, c};
    if (isfinite(c) && (!s->have_best || c < s->best_cost)) {
        s->have_best = 1;
        s->best = *cfg;
        s->best_cost = c;
    }
    return MT_OK;
}

static double unit(uint64_t *rng) { return (double)(mt_rng_next(rng) >> 11) * 0x1.0p-53; }

/* random_unvisited under a restriction: the visited set may also hold
 * configs outside it (marked measured), so only a scan says it is used up. */
static int random_unvisited_only(mt_search *s, mt_config *cfg) {
    size_t n = s->p.nonly;
    if (n == 0) return 0;
    for (int tries = 0; tries < 64; tries++) {
        size_t pos = (size_t)mt_rng_below(&s->rng, n);
        if (!set_has(&s->visited, s->p.only[pos])) {
            *cfg = s->ocfg[pos];
            return 1;
        }
    }
    size_t start = (size_t)mt_rng_below(&s->rng, n);
    for (size_t k = 0; k < n; k++) {
        size_t pos = (start + k) % n;
        if (!set_has(&s->visited, s->p.only[pos])) {
            *cfg = s->ocfg[pos];
            return 1;
        }
    }
    return 0;
}

/* A uniformly random config neither visited nor picked; 0 when none is left. */
static int random_unvisited(mt_search *s, mt_config *cfg) {
    if (s->p.only) return random_unvisited_only(s, cfg);
    if (s->visited.count >= s->size) return 0;
    for (int tries = 0; tries < 64; tries++) {
        mt_space_random(s->sp, &s->rng, cfg);
        if (!set_has(&s->visited, mt_space_config_index(s->sp, cfg))) return 1;
    }
    /* Nearly exhausted (so the space is small): scan from a random start. */
    uint64_t start = mt_rng_below(&s->rng, s->size);
    for (uint64_t k = 0; k < s->size; k++) {
        uint64_t idx = (start + k) % s->size;
        if (!set_has(&s->visited, idx)) return mt_space_config_from_index(s->sp, idx, cfg) == MT_OK;
    }
    return 0;
}

/* For a SPLIT knob: the option that moves one prime factor from one part
 * to another (4x2 -> 2x4, 1x2x4x2 -> 1x1x4x4), or -1 when the move leads
 * outside the options (POW2 splits) or no part can give a factor. */
static int factor_move(mt_search *s, const mt_knob *kb, int from) {
    int np = kb->nparts;
    if (np < 2 || np > MT_MAX_SPLIT_PARTS) return -1;
    const int *v = kb->values + (size_t)from * (size_t)np;
    int donors[MT_MAX_SPLIT_PARTS], nd = 0;
    for (int i = 0; i < np; i++)
        if (v[i] > 1) donors[nd++] = i;
    if (nd == 0) return -1;
    int i = donors[mt_rng_below(&s->rng, (uint64_t)nd)];
    int j = (int)mt_rng_below(&s->rng, (uint64_t)(np - 1));
    if (j >= i) j++;
    int primes[32], npr = 0, x = v[i];
    for (int p = 2; (int64_t)p * p <= x && npr < 32; p++)
        if (x % p == 0) {
            primes[npr++] = p;
            while (x % p == 0) x /= p;
        }
    if (x > 1 && npr < 32) primes[npr++] = x;
    int p = primes[mt_rng_below(&s->rng, (uint64_t)npr)];
    int want[MT_MAX_SPLIT_PARTS];
    for (int t = 0; t < np; t++) want[t] = v[t];
    want[i] /= p;
    if (want[j] > INT32_MAX / p) return -1;
    want[j] *= p;
    for (int o = 0; o < kb->noptions; o++)
        if (memcmp(kb->values + (size_t)o * (size_t)np, want, sizeof(int) * (size_t)np) == 0) return o;
    return -1;
}

/* A move under a restriction: to one of from's nearest others in it, or,
 * for a config outside it (a restart at a config marked measured), to a
 * random config of it. */
static void restricted_move(mt_search *s, const mt_config *from, mt_config *to) {
    *to = *from;
    if (s->p.nonly == 0) return;
    long pos = only_pos(s, mt_space_config_index(s->sp, from));
    if (pos < 0) {
        *to = s->ocfg[mt_rng_below(&s->rng, s->p.nonly)];
        return;
    }
    const int *row = s->near + (size_t)pos * NEAR;
    int k = 0;
    while (k < NEAR && row[k] >= 0) k++;
    if (k > 0) *to = s->ocfg[row[mt_rng_below(&s->rng, (uint64_t)k)]];
}

/* Up to max configs near cfg, and how many there are in all: those differing
 * in exactly one knob, or under a restriction cfg's nearest others in it. */
static int search_neighbours(const mt_search *s, const mt_config *cfg, mt_config *out, int max) {
    if (!s->p.only) return mt_space_neighbours(s->sp, cfg, out, max);
    long pos = only_pos(s, mt_space_config_index(s->sp, cfg));
    if (pos < 0) return 0;
    const int *row = s->near + (size_t)pos * NEAR;
    int k = 0;
    for (; k < NEAR && row[k] >= 0; k++)
        if (out && k < max) out[k] = s->ocfg[row[k]];
    return k;
}

/* One knob of cfg changed to another of its options: AutoTVM's random_walk
 * (a uniformly random other option), or, for half of the moves on SPLIT
 * knobs, one prime factor moved between two parts of the split. The factor
 * moves keep the rest of the tiling as it is, so chains take small steps
 * where a random option would reshuffle every part of the split at once. */
static void random_move(mt_search *s, const mt_config *from, mt_config *to) {
    if (s->p.only) {
        restricted_move(s, from, to);
        return;
    }
    *to = *from;
    int movable[MT_MAX_KNOBS], nm = 0;
    for (int i = 0; i < s->sp->nknobs; i++)
        if (s->sp->knobs[i].noptions > 1) movable[nm++] = i;
    if (nm == 0) return;
    int k = movable[mt_rng_below(&s->rng, (uint64_t)nm)];
    const mt_knob *kb = &s->sp->knobs[k];
    if (kb->kind == MT_KNOB_SPLIT && (mt_rng_next(&s->rng) & 1)) {
        int o = factor_move(s, kb, from->choice[k]);
        if (o >= 0 && o != from->choice[k]) {
            to->choice[k] = o;
            return;
        }
    }
    int j = (int)mt_rng_below(&s->rng, (uint64_t)(kb->noptions - 1));
    if (j >= from->choice[k]) j++;
    to->choice[k] = j;
}

static int knob_diff(const mt_config *a, const mt_config *b, int nknobs) {
    int d = 0;
    for (int i = 0; i < nknobs; i++) d += a->choice[i] != b->choice[i];
    return d;
}

/* Scores cfgs[0..n) (indices idx) into out through the memo; configs not
 * scored before in this run go to the model in one call. mcfg, mpos and
 * mscore are scratch of n entries. */
static mt_status score(mt_search *s, const mt_config *cfgs, const uint64_t *idx, int n, double *out, mt_config *mcfg, int *mpos,
                       double *mscore, char *err, size_t errlen) {
    if (!memo_reserve(&s->mm, (size_t)n)) return mt__fail(err, errlen, MT_NOMEM, "search: out of memory");
    int nq = 0;
    for (int i = 0; i < n; i++) {
        size_t j = memo_find(&s->mm, idx[i]);
        if (s->mm.keys[j] == idx[i]) {
            out[i] = s->mm.score[j]; /* NAN: a duplicate inside this call, filled below */
            continue;
        }
        s->mm.keys[j] = idx[i];
        s->mm.score[j] = NAN;
        s->mm.in_heap[j] = 0;
        s->mm.count++;
        out[i] = NAN;
        mpos[nq] = i;
        mcfg[nq++] = cfgs[i];
    }
    if (nq > 0) {
        mt_cm_query q = {s->wl, s->t, s->sp, s->p.dev};
        char why[512] = "";
        mt_status st = mt_costmodel_predict(s->model, &q, mcfg, nq, mscore, why, sizeof why);
        if (st != MT_OK) {
            memo_clear(&s->mm); /* drop the pending entries */
            return mt__fail(err, errlen, st, "search: cost model: %s", why);
        }
        s->scored += nq;
        for (int m = 0; m < nq; m++) s->mm.score[memo_find(&s->mm, idx[mpos[m]])] = mscore[m];
    }
    for (int i = 0; i < n; i++)
        if (isnan(out[i])) out[i] = s->mm.score[memo_find(&s->mm, idx[i])];
    return MT_OK;
}

/* ---- the candidate heap (min-heap on score) ---- */

typedef struct heap {
    cand *items;
    int n, cap;
} heap;

static void heap_swap(cand *a, cand *b) {
    cand t = *a;
    *a = *b;
    *b = t;
}

static void sift_down(heap *h, int i) {
    for (;;) {
        int l = 2 * i + 1, r = l + 1, m = i;
        if (l < h->n && h->items[l].score < h->items[m].score) m = l;
        if (r < h->n && h->items[r].score < h->items[m].score) m = r;
        if (m == i) return;
        heap_swap(&h->items[i], &h->items[m]);
        i = m;
    }
}

static void sift_up(heap *h, int i) {
    while (i > 0 && h->items[(i - 1) / 2].score > h->items[i].score) {
        heap_swap(&h->items[i], &h->items[(i - 1) / 2]);
        i = (i - 1) / 2;
    }
}

/* Offers a scored config; 1 when it entered the heap. */
static int heap_offer(mt_search *s, heap *h, const mt_config *cfg, uint64_t idx, double sc) {
    if (isnan(sc) || sc <= MT_COSTMODEL_INVALID_SCORE / 2 || set_has(&s->visited, idx)) return 0;
    if (s->p.only && only_pos(s, idx) < 0) return 0; /* a chain restarted outside the restriction */
    if (h->n == h->cap && sc <= h->items[0].score) return 0;
    size_t j = memo_find(&s->mm, idx);
    if (s->mm.keys[j] != idx || s->mm.in_heap[j]) return 0;
    if (h->n == h->cap) {
        s->mm.in_heap[memo_find(&s->mm, h->items[0].idx)] = 0;
        h->items[0] = (cand){sc, idx, *cfg};
        sift_down(h, 0);
    } else {
        h->items[h->n] = (cand){sc, idx, *cfg};
        sift_up(h, h->n++);
    }
    s->mm.in_heap[j] = 1;
    return 1;
}

static int by_cost(const void *a, const void *b) {
    const measured *x = a, *y = b;
    return x->cost < y->cost ? -1 : x->cost > y->cost ? 1 : 0;
}

static int by_score_desc(const void *a, const void *b) {
    const cand *x = a, *y = b;
    return x->score > y->score ? -1 : x->score < y->score ? 1 : (x->idx < y->idx ? -1 : x->idx > y->idx);
}

/* Simulated annealing: fills h with the best unvisited configs it finds. */
static mt_status anneal(mt_search *s, heap *h, char *err, size_t errlen) {
    int C = s->p.chains;
    mt_status st = MT_OK;
    mt_config *prop = malloc(sizeof(mt_config) * (size_t)C);
    mt_config *mcfg = malloc(sizeof(mt_config) * (size_t)C);
    uint64_t *idx = calloc((size_t)C, sizeof(uint64_t));
    double *psc = malloc(sizeof(double) * (size_t)C);
    double *msc = malloc(sizeof(double) * (size_t)C);
    int *mpos = malloc(sizeof(int) * (size_t)C);
    measured *top = NULL;
    if (!prop || !mcfg || !idx || !psc || !msc || !mpos) {
        st = mt__fail(err, errlen, MT_NOMEM, "search: out of memory");
        goto done;
    }
    if (!s->points) {
        s->points = malloc(sizeof(mt_config) * (size_t)C);
        s->pscore = malloc(sizeof(double) * (size_t)C);
        if (!s->points || !s->pscore) {
            free(s->points), free(s->pscore);
            s->points = NULL, s->pscore = NULL;
            st = mt__fail(err, errlen, MT_NOMEM, "search: out of memory");
            goto done;
        }
        for (int i = 0; i < C; i++) {
            if (s->p.only) s->points[i] = s->ocfg[mt_rng_below(&s->rng, s->p.nonly)];
            else mt_space_random(s->sp, &s->rng, &s->points[i]);
        }
        s->npoints = C;
    }
    /* Restart the first chains at the best measured configs (new ones since
     * the model last saw them are exactly where it is most informed). */
    if (s->nmeas > 0) {
        int ntop = C / 4 < s->nmeas ? C / 4 : s->nmeas;
        top = malloc(sizeof *top * (size_t)s->nmeas);
        if (!top) {
            st = mt__fail(err, errlen, MT_NOMEM, "search: out of memory");
            goto done;
        }
        memcpy(top, s->meas, sizeof *top * (size_t)s->nmeas);
        qsort(top, (size_t)s->nmeas, sizeof *top, by_cost);
        for (int i = 0; i < ntop && isfinite(top[i].cost); i++) mt_space_config_from_index(s->sp, top[i].idx, &s->points[i]);
    }
    memo_clear(&s->mm);
    for (int i = 0; i < C; i++) idx[i] = mt_space_config_index(s->sp, &s->points[i]);
    if ((st = score(s, s->points, idx, C, s->pscore, mcfg, mpos, msc, err, errlen)) != MT_OK) goto done;
    double mean = 0, var = 0;
    int nv = 0;
    for (int i = 0; i < C; i++) {
        heap_offer(s, h, &s->points[i], idx[i], s->pscore[i]);
        if (s->pscore[i] > MT_COSTMODEL_INVALID_SCORE / 2) mean += s->pscore[i], nv++;
    }
    mean = nv ? mean / nv : 0;
    for (int i = 0; i < C; i++)
        if (s->pscore[i] > MT_COSTMODEL_INVALID_SCORE / 2) var += (s->pscore[i] - mean) * (s->pscore[i] - mean);
    double spread = nv > 1 ? sqrt(var / (nv - 1)) : 0;
    if (!(spread > 0)) spread = 1;
    double temp = s->p.temp_start * spread;
    double cool = (s->p.temp_start - s->p.temp_end) * spread / (s->p.iterations + 1);
    int last = 0;
    for (int k = 0; k < s->p.iterations && k < last + s->p.early_stop; k++) {
        for (int i = 0; i < C; i++) {
            random_move(s, &s->points[i], &prop[i]);
            idx[i] = mt_space_config_index(s->sp, &prop[i]);
        }
        if ((st = score(s, prop, idx, C, psc, mcfg, mpos, msc, err, errlen)) != MT_OK) goto done;
        for (int i = 0; i < C; i++) {
            double d = psc[i] - s->pscore[i];
            if (d >= 0 || (temp > 0 && unit(&s->rng) < exp(d / temp))) {
                s->points[i] = prop[i];
                s->pscore[i] = psc[i];
            }
            if (heap_offer(s, h, &prop[i], idx[i], psc[i])) last = k;
        }
        temp -= cool;
    }
done:
    free(prop);
    free(mcfg);
    free(idx);
    free(psc);
    free(msc);
    free(mpos);
    free(top);
    return st;
}

/* Exploration: `need` configs appended to out[*got..], drawn uniformly
 * (mutate == 0) or as one- or two-knob mutations of the best measured
 * configs (mutate != 0). With a model, candidates go to it in pools and
 * those it scores as unbuildable are passed over (it does not rank them:
 * exploration must not follow the model). Picked configs are marked visited. */
static mt_status explore(mt_search *s, int need, int mutate, mt_config *out, int *got, char *err, size_t errlen) {
    if (need <= 0) return MT_OK;
    int filter = s->kind == KIND_SA && s->model != NULL;
    int pool_n = filter ? 4 * need : need;
    mt_config *pool = malloc(sizeof(mt_config) * (size_t)pool_n);
    uint64_t *pidx = malloc(sizeof(uint64_t) * (size_t)pool_n);
    double *psc = malloc(sizeof(double) * (size_t)pool_n);
    measured *top = NULL;
    int ntop = 0;
    mt_status st = MT_OK;
    if (!pool || !pidx || !psc) {
        st = mt__fail(err, errlen, MT_NOMEM, "search: out of memory");
        goto done;
    }
    if (mutate) {
        /* the best few successful measurements */
        top = malloc(sizeof *top * (size_t)(s->nmeas ? s->nmeas : 1));
        if (!top) {
            st = mt__fail(err, errlen, MT_NOMEM, "search: out of memory");
            goto done;
        }
        memcpy(top, s->meas, sizeof *top * (size_t)s->nmeas);
        qsort(top, (size_t)s->nmeas, sizeof *top, by_cost);
        while (ntop < s->nmeas && ntop < 4 && isfinite(top[ntop].cost)) ntop++;
        if (ntop == 0) mutate = 0;
    }
    int want = need;
    for (int round = 0; round < 8 && want > 0; round++) {
        int m = 0;
        for (int tries = 0; m < pool_n && tries < 4 * pool_n; tries++) {
            mt_config c;
            if (mutate) {
                mt_config base;
                if (mt_space_config_from_index(s->sp, top[mt_rng_below(&s->rng, (uint64_t)ntop)].idx, &base) != MT_OK) continue;
                random_move(s, &base, &c);
                if (unit(&s->rng) < 0.5) {
                    base = c;
                    random_move(s, &base, &c);
                }
            } else if (!random_unvisited(s, &c)) {
                break; /* exhausted */
            }
            uint64_t idx = mt_space_config_index(s->sp, &c);
            if (set_has(&s->visited, idx) || (s->p.only && only_pos(s, idx) < 0)) continue;
            int dup = 0;
            for (int j = 0; j < m && !dup; j++) dup = pidx[j] == idx;
            if (dup) continue;
            pool[m] = c;
            pidx[m++] = idx;
        }
        if (m == 0) break;
        if (filter && round < 7) {
            mt_cm_query q = {s->wl, s->t, s->sp, s->p.dev};
            char why[512] = "";
            st = mt_costmodel_predict(s->model, &q, pool, m, psc, why, sizeof why);
            if (st != MT_OK) {
                st = mt__fail(err, errlen, st, "search: cost model: %s", why);
                goto done;
            }
            s->scored += m;
        } else {
            for (int j = 0; j < m; j++) psc[j] = 0; /* last round: take what there is */
        }
        for (int j = 0; j < m && want > 0; j++) {
            if (isnan(psc[j]) || psc[j] <= MT_COSTMODEL_INVALID_SCORE / 2) continue;
            out[(*got)++] = pool[j];
            set_add(&s->visited, pidx[j]);
            want--;
        }
    }
done:
    free(pool);
    free(pidx);
    free(psc);
    free(top);
    return st;
}

/* Up to `need` configs from the one-knob neighbourhoods of the two best
 * measured configs, best predicted first, appended to out[*got..] and marked
 * visited. The model is most trustworthy next to what it was trained on;
 * this is where a one-knob improvement of the incumbent (a flag, a vector
 * width) is found without waiting for a chain to stumble on it. */
static mt_status local_picks(mt_search *s, int need, mt_config *out, int *got, char *err, size_t errlen) {
    if (need <= 0 || s->nmeas == 0) return MT_OK;
    measured b[2] = {{0, INFINITY}, {0, INFINITY}};
    for (int i = 0; i < s->nmeas; i++) {
        if (s->meas[i].cost < b[0].cost) b[1] = b[0], b[0] = s->meas[i];
        else if (s->meas[i].cost < b[1].cost && s->meas[i].idx != b[0].idx) b[1] = s->meas[i];
    }
    int total = 0;
    mt_config base[2];
    int nb = 0;
    for (int i = 0; i < 2; i++)
        if (isfinite(b[i].cost) && mt_space_config_from_index(s->sp, b[i].idx, &base[nb]) == MT_OK)
            total += search_neighbours(s, &base[nb++], NULL, 0);
    if (total == 0) return MT_OK;
    mt_config *nbr = malloc(sizeof(mt_config) * (size_t)total);
    cand *c = malloc(sizeof(cand) * (size_t)total);
    double *sc = malloc(sizeof(double) * (size_t)total);
    mt_status st = MT_OK;
    if (!nbr || !c || !sc) {
        st = mt__fail(err, errlen, MT_NOMEM, "search: out of memory");
        goto done;
    }
    int m = 0;
    for (int i = 0; i < nb; i++) m += search_neighbours(s, &base[i], nbr + m, total - m);
    /* unvisited, each once (the two neighbourhoods may overlap) */
    int k = 0;
    for (int i = 0; i < m; i++) {
        uint64_t idx = mt_space_config_index(s->sp, &nbr[i]);
        if (set_has(&s->visited, idx)) continue;
        int dup = 0;
        for (int j = 0; j < k && !dup; j++) dup = c[j].idx == idx;
        if (dup) continue;
        c[k] = (cand){0, idx, nbr[i]};
        nbr[k++] = nbr[i];
    }
    if (k == 0) goto done;
    mt_cm_query q = {s->wl, s->t, s->sp, s->p.dev};
    char why[512] = "";
    st = mt_costmodel_predict(s->model, &q, nbr, k, sc, why, sizeof why);
    if (st != MT_OK) {
        st = mt__fail(err, errlen, st, "search: cost model: %s", why);
        goto done;
    }
    s->scored += k;
    for (int i = 0; i < k; i++) c[i].score = sc[i];
    qsort(c, (size_t)k, sizeof *c, by_score_desc);
    for (int i = 0; i < k && need > 0; i++) {
        if (isnan(c[i].score) || c[i].score <= MT_COSTMODEL_INVALID_SCORE / 2) break;
        out[(*got)++] = c[i].cfg;
        set_add(&s->visited, c[i].idx);
        need--;
    }
done:
    free(nbr);
    free(c);
    free(sc);
    return st;
}

mt_status mt_search_next_batch(mt_search *s, int batch, mt_config *out, int *n, char *err, size_t errlen) {
    if (n) *n = 0;
    if (!s || !n || batch < 0 || (batch > 0 && !out))
        return mt__fail(err, errlen, MT_INVALID_ARG, "search: NULL argument or a negative batch (%d)", batch);
    if (batch == 0 || (s->p.only && s->p.nonly == 0)) return MT_OK;
    if (!set_reserve(&s->visited, (size_t)batch)) return mt__fail(err, errlen, MT_NOMEM, "search: out of memory");
    int use_model = s->kind == KIND_SA && s->model && mt_costmodel_trained(s->model) > 0;
    int n_model = 0;
    if (use_model) {
        double want = s->p.epsilon * batch;
        int n_rand = (int)want;
        if (unit(&s->rng) < want - n_rand) n_rand++;
        n_model = batch - n_rand;
    }
    int got = 0;
    mt_status st = MT_OK;
    if (n_model > 0) {
        int n_local = (int)(s->p.local_share * n_model + 0.5);
        st = local_picks(s, n_local, out, &got, err, errlen);
        if (st != MT_OK) {
            for (int i = 0; i < got; i++) set_remove(&s->visited, mt_space_config_index(s->sp, &out[i]));
            return st;
        }
        n_model -= got;
    }
    if (n_model > 0) {
        int first = got;
        int end = first + n_model;
        heap h = {malloc(sizeof(cand) * (size_t)n_model * (size_t)s->p.pool_factor), 0, n_model * s->p.pool_factor};
        unsigned char *used = NULL;
        if (!h.items) st = mt__fail(err, errlen, MT_NOMEM, "search: out of memory");
        if (st == MT_OK) st = anneal(s, &h, err, errlen);
        if (st == MT_OK && !(used = calloc((size_t)h.n + 1, 1))) st = mt__fail(err, errlen, MT_NOMEM, "search: out of memory");
        if (st != MT_OK) {
            free(h.items);
            for (int i = 0; i < got; i++) set_remove(&s->visited, mt_space_config_index(s->sp, &out[i]));
            return st;
        }
        qsort(h.items, (size_t)h.n, sizeof(cand), by_score_desc);
        /* Best first, skipping near-duplicates of what is already picked ... */
        for (int i = 0; i < h.n && got < end; i++) {
            if (set_has(&s->visited, h.items[i].idx)) continue; /* a local pick */
            int ok = 1;
            for (int j = 0; j < got && ok && s->p.min_knob_diff > 1; j++)
                ok = knob_diff(&h.items[i].cfg, &out[j], s->sp->nknobs) >= s->p.min_knob_diff;
            if (ok) out[got++] = h.items[i].cfg, used[i] = 1;
        }
        /* ... then the skipped ones if the pool ran short. */
        for (int i = 0; i < h.n && got < end; i++)
            if (!used[i] && !set_has(&s->visited, h.items[i].idx)) out[got++] = h.items[i].cfg, used[i] = 1;
        for (int i = first; i < got; i++) set_add(&s->visited, mt_space_config_index(s->sp, &out[i]));
        free(used);
        free(h.items);
    }
    /* Exploration: half of it around the best measured configs once the
     * model is in use, the rest uniform. */
    int left = batch - got;
    int n_mut = use_model ? left / 2 : 0;
    if (use_model && (left & 1) && unit(&s->rng) < 0.5) n_mut++;
    st = explore(s, n_mut, 1, out, &got, err, errlen);
    if (st == MT_OK) st = explore(s, batch - got, 0, out, &got, err, errlen);
    if (st != MT_OK) {
        /* a call that fails returns nothing: forget this call's picks */
        for (int i = 0; i < got; i++) set_remove(&s->visited, mt_space_config_index(s->sp, &out[i]));
        return st;
    }
    *n = got;
    return MT_OK;
}
