/* Shared pieces of the mtgpu command: subcommand entry points and a small
 * option parser. Subcommands return the process exit status: 0 success, 1 a
 * failure while working, 2 bad usage. */
#ifndef MTGPU_CLI_H
#define MTGPU_CLI_H

#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#include "mtgpu/status.h"

#define MT_EXIT_OK 0
#define MT_EXIT_FAIL 1
#define MT_EXIT_USAGE 2

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
 * returns MT_EXIT_USAGE. Accepts --name=value and --name value. `--help`/-h
 * sets *help. */
int mt_opt_parse(const char *cmd, int argc, char **argv, mt_opt *opts, int nopts, const char **positional, int max_positional,
                 int *npositional, int *help);
/* Parses a non-negative integer option value; prints an error and returns -1 when malformed. */
long long mt_opt_int(const char *cmd, const mt_opt *opt, long long min, long long max);
/* Parses a number option value in [min, max] into *out; prints an error and returns -1 when malformed. */
int mt_opt_double(const char *cmd, const mt_opt *opt, double min, double max, double *out);

/* manifest.c: FNV-1a 64 and length of a file's bytes; the current UTC time
 * as ISO 8601; writing a file through a temporary file, fsync and rename
 * (path holds the old file or all of the new one). The ints return 0, or
 * -1 with the reason in err. */
int mt_cli_hash_file(const char *path, uint64_t *hash, long long *bytes, char *err, size_t errlen);
void mt_cli_utc_now(char *buf, size_t len);
int mt_cli_write_atomic(const char *path, const char *data, size_t len, char *err, size_t errlen);

#endif
