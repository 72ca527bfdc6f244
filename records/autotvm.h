/* Import and export of AutoTVM tuning logs (JSON lines).
 *
 * A line: {"input": [target, task, [args], {}], "config": {"index", "code_hash",
 * "entity": [[knob, "sp"|"ot", value], ...]}, "result": [[costs in s],
 * error_no, all_cost, timestamp], "version": 0.2, "tvm_version": "..."}.
 *
 * Supported tasks: "conv2d_nchw.<anything>" with AutoTVM's CUDA knobs ->
 * template `direct`; "depthwise_conv2d_nchw.<anything>" -> `depthwise`.
 * AutoTVM's knobs map to ours by name, except the two kernel-window splits of
 * conv2d_nchw, which map by position (the first splits the kernel height,
 * whatever its name: older TVM named it "tile_rx"); a split part written as
 * -1 is derived from the extent. Our extra knobs are set to what AutoTVM's
 * schedules do: vec=1, stage_local=1. The device is the target string: a
 * device row with backend "autotvm", name = target, fingerprint = 16 hex
 * digits of a 64-bit hash of the target; source "autotvm:<target>". */
#ifndef MTGPU_AUTOTVM_H
#define MTGPU_AUTOTVM_H

#include <stdint.h>
#include <stdio.h>

#include "mtgpu/records.h"

#ifdef __cplusplus
extern "C" {
#endif

/* What happened to one line. */
#define MT_AUTOTVM_OUTCOME_MAP(X)                                                          \
    X(IMPORTED,              "imported",              "imported")                          \
    X(DUPLICATE,             "duplicate",             "already in the database")           \
    X(BLANK,                 "blank",                 "blank line")                        \
    X(COMMENT,               "comment",               "comment line")                      \
    X(MALFORMED,             "malformed",             "malformed JSON or record")          \
    X(UNSUPPORTED_TEMPLATE,  "unsupported_template",  "unsupported AutoTVM template")      \
    X(ASYMMETRIC_PADDING,    "asymmetric_padding",    "asymmetric padding")                \
    X(UNSUPPORTED_WORKLOAD,  "unsupported_workload",  "workload our template cannot run")  \
    X(NOT_IN_SPACE,          "not_in_space",          "knob value not in our space")

typedef enum mt_autotvm_outcome {
#define MT__AUTOTVM_ENUM(name, token, text) MT_AUTOTVM_##name,
    MT_AUTOTVM_OUTCOME_MAP(MT__AUTOTVM_ENUM)
#undef MT__AUTOTVM_ENUM
    MT_AUTOTVM_OUTCOME_COUNT
} mt_autotvm_outcome;

/* "not_in_space" etc.; "unknown" out of range. */
const char *mt_autotvm_outcome_name(mt_autotvm_outcome o);
/* "knob value not in our space" etc. */
const char *mt_autotvm_outcome_str(mt_autotvm_outcome o);

#define MT_AUTOTVM_MAX_TASK_NAMES 16

typedef struct mt_autotvm_stats {
    int64_t lines;                              /* lines read */
    int64_t count[MT_AUTOTVM_OUTCOME_COUNT];    /* lines per outcome; they sum to `lines` */
    /* The unsupported tasks seen and how many lines each (the first
     * MT_AUTOTVM_MAX_TASK_NAMES names; later ones count in count[] only). */
    int ntasks;
    char task_name[MT_AUTOTVM_MAX_TASK_NAMES][64];
    int64_t task_count[MT_AUTOTVM_MAX_TASK_NAMES];
    /* The first skipped line that was not blank/comment/duplicate: its number and why. */
    int64_t first_skip_line;
    char first_skip[256];
} mt_autotvm_stats;

/* Decodes one log line (len bytes, no NUL needed, a trailing newline is fine)
 * into rec (with costs in ms, status, timestamp, source, device fingerprint)
 * and target (the AutoTVM target string, truncated to targetlen). Returns the
 * outcome: MT_AUTOTVM_IMPORTED for a line that converts (rec and target are
 * then set), otherwise the reason it is skipped, with detail in err. Touches
 * no database; never fails hard. */
mt_autotvm_outcome mt_autotvm_decode(const char *line, size_t len, mt_record *rec, char *target, size_t targetlen, char *err, size_t errlen);

/* The device fingerprint of an AutoTVM target: 16 lowercase hex digits. */
void mt_autotvm_fingerprint(const char *target, char out[17]);

/* Reads the JSON-lines file at path ("-": stdin) into db. Each converted line
 * becomes a record (one committed transaction each) on the target's device;
 * other lines are counted by reason in *stats (which is zeroed first; may be
 * NULL) and skipped. A UTF-8 byte-order mark before line 1 is ignored. A
 * path must name a regular file (a FIFO or a device is refused unread), and
 * the import stops at a NUL byte or at a line running past 64 MiB, which no
 * log holds, so that a stream that never ends cannot keep it reading. Returns
 * MT_OK when the file was read to the end, MT_IO when it cannot be read or is
 * not a regular file, MT_PARSE at binary data or a runaway line, or the
 * database's error (records stored before any of these stay stored). */
mt_status mt_autotvm_import(mt_db *db, const char *path, mt_autotvm_stats *stats, char *err, size_t errlen);

typedef struct mt_autotvm_export_stats {
    int64_t written;         /* lines written */
    int64_t other_template;  /* records of templates AutoTVM has no schedule for (gemm, ...) */
    int64_t not_expressible; /* direct/depthwise records with vec != 1 or stage_local != 1 */
    int64_t bad;             /* records whose config no longer parses in the template's space */
} mt_autotvm_export_stats;

/* Writes the `direct` and `depthwise` records matching filter (NULL: all) to
 * out as AutoTVM JSON lines (version 0.2; tvm_version the one an imported
 * record came with, else "0.7.dev0"), in
 * insertion order. The target is the device's AutoTVM target for imported
 * records, else "<backend> -model=<device name>" with the name reduced to
 * [A-Za-z0-9_-]. Error records get costs [1e9] and an AutoTVM error_no.
 * Importing the output gives back the same records for records that came
 * from AutoTVM (same device, source and version); measured records come back
 * on the AutoTVM device of their derived target. stats may be NULL.
 * MT_IO when writing fails. */
mt_status mt_autotvm_export(mt_db *db, FILE *out, const mt_db_filter *filter, mt_autotvm_export_stats *stats, char *err, size_t errlen);

#ifdef __cplusplus
}
#endif
#endif
