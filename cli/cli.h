/* Shared pieces of the mtgpu command: subcommand entry points and a small
 * option parser. Subcommands return the process exit status, one rule for
 * all: 0 success, 1 a failure while working, 2 bad usage (an unknown or
 * malformed option, an empty option value, a malformed workload or device
 * spec), 130 interrupted (Ctrl-C or SIGTERM; the work done is kept). */
#ifndef MTGPU_CLI_H
#define MTGPU_CLI_H

#include <signal.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#include "mtgpu/device.h"
#include "mtgpu/net.h"
#include "mtgpu/status.h"

#define MT_EXIT_OK 0
#define MT_EXIT_FAIL 1
#define MT_EXIT_USAGE 2
#define MT_EXIT_INTERRUPTED 130 /* 128 + SIGINT, what a shell reports for a command Ctrl-C ended */

typedef struct mt_cli_cmd {
    const char *name;
    const char *summary;
    int (*run)(int argc, char **argv);
} mt_cli_cmd;

int mt_cmd_devices(int argc, char **argv);
int mt_cmd_conv(int argc, char **argv);
int mt_cmd_tasks(int argc, char **argv);
int mt_cmd_tune(int argc, char **argv);
int mt_cmd_best(int argc, char **argv);
int mt_cmd_import_autotvm(int argc, char **argv);
int mt_cmd_export_autotvm(int argc, char **argv);
int mt_cmd_merge_db(int argc, char **argv);
int mt_cmd_run(int argc, char **argv);
int mt_cmd_refine(int argc, char **argv);
int mt_cmd_collect(int argc, char **argv);

/* mtgpu refine's work, also run at the end of `mtgpu tune NETWORK`
 * (after_tune: a device the executor does not run is a note, not a
 * failure): returns the exit status. db_path, device: NULL for the defaults. */
struct mt_refine_params;
int mt_cli_refine_network(const char *model, int batch, const char *db_path, const char *device, const struct mt_refine_params *rp, int json,
                          int after_tune);
int mt_cmd_train(int argc, char **argv);
int mt_cmd_eval_model(int argc, char **argv);

/* Options: each has a long name, an optional short letter, and whether it
 * takes a value. mt_opt_parse fills `value`/`given` and collects positionals. */
typedef struct mt_opt {
    const char *name;  /* "json" for --json */
    char short_name;   /* 0 if none */
    int takes_value;
    const char *value; /* set when given with a value */
    int given;
} mt_opt;

/* Returns 0 on success; on error prints a message naming the command and
 * returns MT_EXIT_USAGE. Accepts --name=value and --name value; an empty
 * value is an error (never "the default" or "none"). `--help`/-h sets *help. */
int mt_opt_parse(const char *cmd, int argc, char **argv, mt_opt *opts, int nopts, const char **positional, int max_positional,
                 int *npositional, int *help);
/* Parses a non-negative integer option value; prints an error and returns -1 when malformed. */
long long mt_opt_int(const char *cmd, const mt_opt *opt, long long min, long long max);
/* Parses a number option value in [min, max] into *out; prints an error and returns -1 when malformed. */
int mt_opt_double(const char *cmd, const mt_opt *opt, double min, double max, double *out);

/* The same for an option that may be absent: when opt was given, its value
 * in [min, max] goes to *out (as an int, a long long, a uint64_t, seconds as
 * a double from an integer, or a number); when it was not, *out keeps its
 * default. 0 on success, -1 (message printed) when malformed. */
int mt_opt_set_int(const char *cmd, const mt_opt *opt, long long min, long long max, int *out);
int mt_opt_set_ll(const char *cmd, const mt_opt *opt, long long min, long long max, long long *out);
int mt_opt_set_u64(const char *cmd, const mt_opt *opt, long long min, long long max, uint64_t *out);
int mt_opt_set_secs(const char *cmd, const mt_opt *opt, long long min, long long max, double *out);
int mt_opt_set_double(const char *cmd, const mt_opt *opt, double min, double max, double *out);

/* How every command starts: parses argv into opts and positional[], prints
 * the help on --help, and requires exactly `npositional` positionals (-1:
 * up to max_positional), saying `expected` (e.g. "one MODEL argument")
 * otherwise. Returns -1 when the command should go on, else the exit status
 * to return (MT_EXIT_OK after the help, MT_EXIT_USAGE on bad usage). */
int mt_cli_begin(const char *cmd, int argc, char **argv, mt_opt *opts, int nopts, const char **positional, int max_positional,
                 int npositional, const char *expected, void (*help)(void));

/* ---- targets: a network of the zoo, or one workload ---- */

/* Creates the network `name` (batch, image_size 0: the network's own) into
 * *out, printing why not as "mtgpu CMD: ...". Returns MT_EXIT_OK, or the
 * exit status: MT_EXIT_USAGE for a name or sizes the caller got wrong,
 * MT_EXIT_FAIL otherwise. */
int mt_cli_network(const char *cmd, const char *name, int batch, int image_size, mt_network **out);

/* Prints the names of the zoo's networks, each after a space (for help texts). */
void mt_cli_print_network_names(void);

/* Opens the device `spec` (NULL: the first) into *out, printing why not as
 * "mtgpu CMD: ...". Returns MT_EXIT_OK, MT_EXIT_USAGE for a malformed spec,
 * else MT_EXIT_FAIL. */
int mt_cli_device(const char *cmd, const char *spec, mt_device **out);
/* MT_EXIT_OK when spec (NULL: the first device) is well formed, else prints
 * why as "mtgpu CMD: ..." and returns MT_EXIT_USAGE; opens nothing (for the
 * commands whose device is opened later, by the library). */
int mt_cli_device_spec(const char *cmd, const char *spec);

/* ---- several devices (device_list.c) ---- */

#define MT_CLI_MAX_DEVICES 64

typedef struct mt_cli_device_entry {
    char spec[32];        /* "opencl:N" */
    char name[128];
    char fingerprint[17];
    int group;            /* devices of one fingerprint share a group: 0..ngroups) in order of appearance */
} mt_cli_device_entry;

typedef struct mt_cli_devices {
    mt_cli_device_entry dev[MT_CLI_MAX_DEVICES];
    int n;                /* 0: a single device spec, left to the library to open */
    int ngroups;          /* distinct fingerprints among dev[0..n) */
} mt_cli_devices;

/* --device TEXT of a command that times on several devices: a spec (opencl:N,
 * cuda:N, N; checked only, n = 0), a comma-separated list of specs, or `all`
 * (every device of the first device's backend), `opencl:all`, `cuda:all`. A
 * list is resolved against the devices there are (each named once), with
 * their fingerprints. Returns MT_EXIT_OK, MT_EXIT_USAGE for a malformed list,
 * MT_EXIT_FAIL for a device that is not there; prints why as "mtgpu CMD: ...". */
int mt_cli_device_list(const char *cmd, const char *text, mt_cli_devices *out);
/* The specs of group `group`'s devices, comma-separated, into specs; returns
 * how many (-1 when len is too small). */
int mt_cli_device_group(const mt_cli_devices *d, int group, char *specs, size_t len);
/* One line per fingerprint: "  fingerprint FP ('NAME'): opencl:0 opencl:1". */
void mt_cli_device_print_groups(FILE *f, const mt_cli_devices *d);

/* TARGET of tune and best: a workload when the text has an '=', else a
 * network whose convolution tasks are tuned or looked up. */
typedef struct mt_cli_target {
    const mt_task *tasks; /* tasks[0..ntasks): the network's, or &single */
    int ntasks;
    int is_network;
    mt_task single;       /* a workload's task (count 1) */
    mt_task *owned;       /* the network's tasks, freed by mt_cli_target_free */
} mt_cli_target;

/* Reads TARGET (a network at batch `batch`); prints why not. Returns
 * MT_EXIT_OK or the exit status; on success free t with mt_cli_target_free.
 * t->tasks points into t: move t and the pointer goes stale. */
int mt_cli_target_open(const char *cmd, const char *text, int batch, mt_cli_target *t);
void mt_cli_target_free(mt_cli_target *t);

/* ---- Ctrl-C: finish the work in flight, then stop ---- */

/* The dispositions replaced by mt_cli_catch_stop. */
typedef struct mt_cli_signals {
    struct sigaction old_int, old_term;
} mt_cli_signals;

/* From now until mt_cli_release_stop, SIGINT and SIGTERM set the flag
 * returned (which long-running library calls poll: mt_tune_params.stop); a
 * second one ends the process at once. */
const volatile sig_atomic_t *mt_cli_catch_stop(mt_cli_signals *saved);
void mt_cli_release_stop(const mt_cli_signals *saved);
/* manifest.c: FNV-1a 64 and length of a regular file's bytes (0, or -1
 * with the reason in err); the current UTC time as ISO 8601. */
int mt_cli_hash_file(const char *path, uint64_t *hash, long long *bytes, char *err, size_t errlen);
void mt_cli_utc_now(char *buf, size_t len);


/* ---- the shipped cost-model files (model_path.c) ---- */

/* The file name of kind's shipped model ("gnn-meta": opencl_gnn_meta.model,
 * "gnn-transfer": opencl_gnn_pooled.model); NULL for other kinds. */
const char *mt_cli_model_file_name(const char *kind);
/* The path of kind's shipped model into path: $MTGPU_MODEL_DIR when set,
 * else the source tree's data/, else the installed share/mtgpu, the first
 * that has a readable file. 0 on success, -1 when there is none. */
int mt_cli_default_model(const char *kind, char *path, size_t len);

#endif
