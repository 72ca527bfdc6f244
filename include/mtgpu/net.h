/* Network descriptions (the model zoo) and task extraction.
 *
 * A network is a list of layers in topological order: every layer names its
 * inputs by index, and an input index is always smaller than the layer's own.
 * Layer 0 is the only input layer. Every tensor is NCHW fp32; a flattened
 * tensor (after flatten, dense, softmax) has shape (n, features, 1, 1).
 *
 * The description carries what an inference executor needs to run the network,
 * not only its convolutions: pooling parameters, concat order, the fused
 * residual add and activation of each convolution, dense layers. Layer names
 * follow torchvision's module names ("layer1.0.conv1", "features.3.squeeze")
 * so that weights can be matched to layers by name.
 *
 * Networks come from the zoo (mt_network_create) or are built layer by layer
 * (mt_network_new + mt_network_add_*). Every add infers the new layer's output
 * shape and checks it against its inputs; a bad description gives an error,
 * never a crash. Ownership: a network owns its layers; pointers returned by
 * mt_network_layer stay valid until the next add or mt_network_free. Nothing
 * here is shared between networks, so distinct networks may be used from
 * distinct threads. */
#ifndef MTGPU_NET_H
#define MTGPU_NET_H

#include <stddef.h>

#include "mtgpu/status.h"
#include "mtgpu/workload.h"

#ifdef __cplusplus
extern "C" {
#endif

#define MT_LAYER_NAME_MAX 64  /* bytes, including the terminating NUL */
#define MT_LAYER_MAX_INPUTS 8 /* inputs of one layer (concat has the most) */

typedef enum mt_layer_kind {
    MT_LAYER_INPUT,             /* the image batch: out = (batch, C, H, W) */
    MT_LAYER_CONV2D,            /* conv [+ bias] [+ batch norm] [+ residual] [-> activation] */
    MT_LAYER_MAXPOOL,           /* kernel, stride, pad, ceil_mode as torch.nn.MaxPool2d */
    MT_LAYER_AVGPOOL,           /* as torch.nn.AvgPool2d with count_include_pad */
    MT_LAYER_GLOBAL_AVGPOOL,    /* mean over H x W: out = (n, c, 1, 1) */
    MT_LAYER_ADAPTIVE_AVGPOOL,  /* torch.nn.AdaptiveAvgPool2d to out.h x out.w */
    MT_LAYER_CONCAT,            /* along channels, in input order */
    MT_LAYER_ADD,               /* elementwise a + b [-> activation], where not fused into a conv */
    MT_LAYER_DENSE,             /* fully connected on (n, in_features, 1, 1) [+ bias] [-> activation] */
    MT_LAYER_FLATTEN,           /* (n, c, h, w) -> (n, c*h*w, 1, 1), row-major as torch.flatten(x, 1) */
    MT_LAYER_SOFTMAX,           /* over the channel axis */
    MT_LAYER_KIND_COUNT
} mt_layer_kind;

typedef enum mt_activation {
    MT_ACT_NONE,
    MT_ACT_RELU,
    MT_ACT_RELU6, /* min(max(x, 0), 6), MobileNetV2 */
} mt_activation;

/* Opaque: a network and its layers. */
typedef struct mt_network mt_network;

typedef struct mt_shape {
    int n, c, h, w;
} mt_shape;

/* One layer. Only the members of the layer's kind are meaningful; the others
 * are zero (residual is -1 outside convolutions). */
typedef struct mt_layer {
    mt_layer_kind kind;
    char name[MT_LAYER_NAME_MAX];
    int ninputs;
    int inputs[MT_LAYER_MAX_INPUTS]; /* indices of earlier layers */
    mt_shape out;                    /* inferred output shape */
    /* Applied last: by CONV2D (after batch norm and the residual add), ADD and DENSE. */
    mt_activation act;
    struct {
        mt_workload wl; /* n = batch; c, h, w = the input's shape */
        int bias;       /* the conv has a bias vector of k elements */
        int batch_norm; /* followed by an inference batch norm (to be folded into weights and bias) */
        /* Layer whose output (same shape as this one's) is added after batch
         * norm and before the activation, as in ResNet blocks; -1 if none.
         * When present it is also inputs[1] (inputs[0] is the data input). */
        int residual;
        char bn_name[MT_LAYER_NAME_MAX]; /* torchvision name of the batch norm; "" if none */
    } conv;
    struct {
        int kernel_h, kernel_w, stride_h, stride_w, pad_h, pad_w;
        int ceil_mode;         /* output size rounds up, as PyTorch's ceil_mode=True */
        int count_include_pad; /* AVGPOOL: padding counts in the divisor (PyTorch's default, 1) */
    } pool;
    struct {
        int in_features, out_features;
        int bias;
    } dense;
} mt_layer;

/* ---- the zoo ---- */

/* Names of the built-in networks, in a fixed order; *count (if not NULL) gets
 * their number. The array and strings are static and never freed. */
const char *const *mt_network_names(int *count);

/* Builds the named zoo network for batch >= 1 images of image_size x
 * image_size (0 means 224). Returns MT_NOT_FOUND for an unknown name (err
 * lists the known ones), MT_RANGE for a batch or image size out of range
 * (including an image too small for the network's downsampling), MT_NOMEM.
 * On success *out is a new network the caller frees with mt_network_free; on
 * failure *out is untouched. */
mt_status mt_network_create(const char *name, int batch, int image_size, mt_network **out, char *err, size_t errlen);

/* ---- building a network layer by layer ---- */

/* Attributes of a convolution for mt_network_add_conv. */
typedef struct mt_conv_spec {
    int k, r, s;
    int stride_h, stride_w, pad_h, pad_w, dil_h, dil_w;
    int groups;
    int bias, batch_norm;
    mt_activation act;
    int residual;        /* layer index or -1 */
    const char *bn_name; /* NULL or "" if none */
} mt_conv_spec;

/* A k-output, r x r convolution with the given stride and pad on both axes,
 * dilation 1, groups 1, no bias, no batch norm, no activation, no residual. */
mt_conv_spec mt_conv_spec_default(int k, int r, int stride, int pad);

/* An empty network named name (copied). Returns MT_INVALID_ARG or MT_NOMEM. */
mt_status mt_network_new(const char *name, mt_network **out);
void mt_network_free(mt_network *net);

/* The mt_network_add_* calls return the new layer's index (>= 0) or a negative
 * mt_status. Errors are sticky: after the first failed add the network is
 * marked failed and every later add returns the same status without effect,
 * so a description can be written as a plain sequence of adds and checked once
 * with mt_network_status. An add fails with MT_INVALID_ARG for a bad name
 * (empty, too long, used before), a bad input index or a wrong number of
 * inputs, MT_RANGE for shapes that do not fit (e.g. an output under 1x1, a
 * concat of different sizes, a dense layer whose in_features differ from its
 * input), MT_NOMEM when out of memory. Names must be unique in a network. */
int mt_network_add_input(mt_network *net, const char *name, int n, int c, int h, int w);
int mt_network_add_conv(mt_network *net, const char *name, int input, const mt_conv_spec *spec);
/* kind is MT_LAYER_MAXPOOL or MT_LAYER_AVGPOOL; square kernel, stride and pad;
 * pad at most kernel/2 as PyTorch requires. AVGPOOL counts padding in the divisor. */
int mt_network_add_pool(mt_network *net, const char *name, mt_layer_kind kind, int input, int kernel, int stride, int pad, int ceil_mode);
int mt_network_add_global_avgpool(mt_network *net, const char *name, int input);
int mt_network_add_adaptive_avgpool(mt_network *net, const char *name, int input, int out_h, int out_w);
int mt_network_add_concat(mt_network *net, const char *name, const int *inputs, int ninputs);
int mt_network_add_add(mt_network *net, const char *name, int a, int b, mt_activation act);
int mt_network_add_dense(mt_network *net, const char *name, int input, int out_features, int bias, mt_activation act);
int mt_network_add_flatten(mt_network *net, const char *name, int input);
int mt_network_add_softmax(mt_network *net, const char *name, int input);

/* MT_OK, or the first error of an add, with its message copied to err. */
mt_status mt_network_status(const mt_network *net, char *err, size_t errlen);

/* ---- reading a network ---- */

const char *mt_network_name(const mt_network *net);
int mt_network_num_layers(const mt_network *net);
/* Layer i, or NULL when i is out of range. Valid until the next add or free. */
const mt_layer *mt_network_layer(const mt_network *net, int i);
/* The batch size (layer 0's n), 0 when the network has no input layer yet. */
int mt_network_batch(const mt_network *net);
/* Number of CONV2D layers, and the sum of mt_workload_flops over them (2 * MACs). */
int mt_network_num_convs(const mt_network *net);
double mt_network_conv_flops(const mt_network *net);
/* The convolution a CONV2D layer's kernel runs: the layer's own workload,
 * or for a strided 1x1 layer without padding the stride-1 convolution of
 * every stride-th pixel of its input (mt_workload_unit_stride), which the
 * executor copies into a dense plane first: strided reads ran those layers
 * 1.2-1.5x slower than the same convolution on the dense plane. Tasks, the
 * tuning database and the refinement key on this workload. */
mt_workload mt_layer_kernel_workload(const mt_layer *l);
/* "conv2d", "maxpool", ...; "unknown" out of range. */
const char *mt_layer_kind_name(mt_layer_kind kind);
const char *mt_activation_name(mt_activation act);

/* ---- task extraction ---- */

/* One unique convolution workload of a network. */
typedef struct mt_task {
    mt_workload wl;   /* the kernel's (mt_layer_kernel_workload), unique by every field, batch included */
    int count;        /* how many conv layers have this workload */
    double flops;     /* mt_workload_flops of one occurrence */
    int first_layer;  /* index of the first layer with this workload */
} mt_task;

/* The unique convolution workloads of net, in order of first occurrence.
 * On success *tasks is a new array of *ntasks entries that the caller frees
 * with mt_tasks_free (NULL when the network has no convolution). Returns the
 * network's sticky error if an add failed, MT_INVALID_ARG or MT_NOMEM; on
 * failure *tasks and *ntasks are untouched. */
mt_status mt_network_tasks(const mt_network *net, mt_task **tasks, int *ntasks);
void mt_tasks_free(mt_task *tasks);

#ifdef __cplusplus
}
#endif
#endif
