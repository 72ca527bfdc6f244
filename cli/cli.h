/* Shared pieces of the mtgpu command: subcommand entry points and a small
 * option parser. Subcommands return the process exit status: 0 success, 1 a
 * failure while working, 2 bad usage. */
#ifndef MTGPU_CLI_H
#define MTGPU_CLI_H

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

#endif
