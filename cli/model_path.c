/* Where the shipped cost-model files are found: gnn-meta and gnn-transfer
 * without --model use the model trained for this project's OpenCL CPU
 * device (data/README.md), from $MTGPU_MODEL_DIR, else the source tree's
 * data/ (a build tree), else the installed share/mtgpu. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "cli.h"

#ifndef MTGPU_SOURCE_DATA_DIR
#define MTGPU_SOURCE_DATA_DIR ""
#endif
#ifndef MTGPU_INSTALL_DATA_DIR
#define MTGPU_INSTALL_DATA_DIR ""
#endif

const char *mt_cli_model_file_name(const char *kind) {
    if (strcmp(kind, "gnn-meta") == 0) return "opencl_gnn_meta.model";
    if (strcmp(kind, "gnn-transfer") == 0) return "opencl_gnn_pooled.model";
    return NULL;
}

int mt_cli_default_model(const char *kind, char *path, size_t len) {
    const char *name = mt_cli_model_file_name(kind);
    if (!name) return -1;
    const char *env = getenv("MTGPU_MODEL_DIR");
    const char *dirs[] = {env && *env ? env : NULL, MTGPU_SOURCE_DATA_DIR, MTGPU_INSTALL_DATA_DIR};
    for (size_t i = 0; i < sizeof dirs / sizeof dirs[0]; i++) {
        if (!dirs[i] || !*dirs[i]) continue;
        int n = snprintf(path, len, "%s/%s", dirs[i], name);
        if (n > 0 && (size_t)n < len && access(path, R_OK) == 0) return 0;
        /* $MTGPU_MODEL_DIR, when set, is the only place looked at */
        if (i == 0) break;
    }
    return -1;
}
