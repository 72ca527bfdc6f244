/* SqueezeNet 1.1 as torchvision builds it: a 3x3 stride-2 conv to 64
 * channels, max pools 3/2 with ceil_mode, eight fire modules (1x1 squeeze,
 * then 1x1 and 3x3 expand convs concatenated along channels, 1x1 first), and a
 * final 1x1 conv to 1000 classes with ReLU before a global average pool.
 * Convs have bias and ReLU, no batch norm. */
#include <stdio.h>

#include "zoo-impl.h"

#define NAME_LEN MT_LAYER_NAME_MAX

static int fire(mt_network *net, int x, int module, int squeeze, int expand1, int expand3) {
    char name[NAME_LEN];
    snprintf(name, NAME_LEN, "features.%d.squeeze", module);
    int s = mt__net_conv(net, name, NULL, x, squeeze, 1, 1, 0, 1, 1, MT_ACT_RELU, -1);
    snprintf(name, NAME_LEN, "features.%d.expand1x1", module);
    int e1 = mt__net_conv(net, name, NULL, s, expand1, 1, 1, 0, 1, 1, MT_ACT_RELU, -1);
    snprintf(name, NAME_LEN, "features.%d.expand3x3", module);
    int e3 = mt__net_conv(net, name, NULL, s, expand3, 3, 1, 1, 1, 1, MT_ACT_RELU, -1);
    snprintf(name, NAME_LEN, "features.%d", module);
    int ins[2] = {e1, e3};
    return mt_network_add_concat(net, name, ins, 2);
}

mt_status mt__zoo_squeezenet1_1(mt_network *net, int batch, int image_size) {
    int x = mt_network_add_input(net, "input", batch, 3, image_size, image_size);
    x = mt__net_conv(net, "features.0", NULL, x, 64, 3, 2, 0, 1, 1, MT_ACT_RELU, -1);
    x = mt_network_add_pool(net, "features.2", MT_LAYER_MAXPOOL, x, 3, 2, 0, 1);
    x = fire(net, x, 3, 16, 64, 64);
    x = fire(net, x, 4, 16, 64, 64);
    x = mt_network_add_pool(net, "features.5", MT_LAYER_MAXPOOL, x, 3, 2, 0, 1);
    x = fire(net, x, 6, 32, 128, 128);
    x = fire(net, x, 7, 32, 128, 128);
    x = mt_network_add_pool(net, "features.8", MT_LAYER_MAXPOOL, x, 3, 2, 0, 1);
    x = fire(net, x, 9, 48, 192, 192);
    x = fire(net, x, 10, 48, 192, 192);
    x = fire(net, x, 11, 64, 256, 256);
    x = fire(net, x, 12, 64, 256, 256);
    x = mt__net_conv(net, "classifier.1", NULL, x, 1000, 1, 1, 0, 1, 1, MT_ACT_RELU, -1);
    x = mt_network_add_global_avgpool(net, "classifier.3", x);
    x = mt_network_add_flatten(net, "flatten", x);
    mt_network_add_softmax(net, "softmax", x);
    return mt_network_status(net, NULL, 0);
}
