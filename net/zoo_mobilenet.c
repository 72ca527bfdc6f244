/* MobileNetV2 (width 1.0) as torchvision builds it: a 3x3 stride-2 conv to 32
 * channels, 17 inverted residual blocks, a 1x1 conv to 1280, global average
 * pool and a dense layer to 1000 classes. Convs have batch norm and no bias;
 * activations are ReLU6; the projecting 1x1 conv of a block is linear and,
 * where the block keeps stride 1 and its channel count, carries the fused
 * residual add of the block input. The depthwise 3x3 is groups = channels. */
#include <stdio.h>

#include "zoo-impl.h"

#define NAME_LEN MT_LAYER_NAME_MAX

/* One inverted residual block: [1x1 expand] -> 3x3 depthwise (stride) -> 1x1
 * project. torchvision numbers the block's modules conv.0, conv.1, ...: a
 * conv-bn-relu6 unit is one module ("conv.0.0" conv, "conv.0.1" bn); the
 * projecting conv and its bn are two ("conv.2", "conv.3"). */
static int inverted_residual(mt_network *net, int x, int in, int out, int stride, int expand, int block) {
    char conv[NAME_LEN], bn[NAME_LEN];
    int hidden = in * expand;
    int residual = stride == 1 && in == out ? x : -1;
    int m = 0;
    if (expand != 1) {
        snprintf(conv, NAME_LEN, "features.%d.conv.%d.0", block, m);
        snprintf(bn, NAME_LEN, "features.%d.conv.%d.1", block, m);
        x = mt__net_conv(net, conv, bn, x, hidden, 1, 1, 0, 1, 0, MT_ACT_RELU6, -1);
        m++;
    }
    snprintf(conv, NAME_LEN, "features.%d.conv.%d.0", block, m);
    snprintf(bn, NAME_LEN, "features.%d.conv.%d.1", block, m);
    x = mt__net_conv(net, conv, bn, x, hidden, 3, stride, 1, hidden, 0, MT_ACT_RELU6, -1);
    m++;
    snprintf(conv, NAME_LEN, "features.%d.conv.%d", block, m);
    snprintf(bn, NAME_LEN, "features.%d.conv.%d", block, m + 1);
    return mt__net_conv(net, conv, bn, x, out, 1, 1, 0, 1, 0, MT_ACT_NONE, residual);
}

mt_status mt__zoo_mobilenet_v2(mt_network *net, int batch, int image_size) {
    /* t (expansion), c (output channels), n (repeats), s (stride of the first) */
    static const int setting[7][4] = {{1, 16, 1, 1}, {6, 24, 2, 2}, {6, 32, 3, 2}, {6, 64, 4, 2}, {6, 96, 3, 1}, {6, 160, 3, 2}, {6, 320, 1, 1}};
    int x = mt_network_add_input(net, "input", batch, 3, image_size, image_size);
    x = mt__net_conv(net, "features.0.0", "features.0.1", x, 32, 3, 2, 1, 1, 0, MT_ACT_RELU6, -1);
    int in = 32, block = 1;
    for (int i = 0; i < 7; i++)
        for (int j = 0; j < setting[i][2]; j++) {
            x = inverted_residual(net, x, in, setting[i][1], j == 0 ? setting[i][3] : 1, setting[i][0], block++);
            in = setting[i][1];
        }
    char n1[NAME_LEN], n2[NAME_LEN];
    snprintf(n1, NAME_LEN, "features.%d.0", block);
    snprintf(n2, NAME_LEN, "features.%d.1", block);
    x = mt__net_conv(net, n1, n2, x, 1280, 1, 1, 0, 1, 0, MT_ACT_RELU6, -1);
    x = mt_network_add_global_avgpool(net, "avgpool", x);
    x = mt_network_add_flatten(net, "flatten", x);
    x = mt_network_add_dense(net, "classifier.1", x, 1000, 1, MT_ACT_NONE);
    mt_network_add_softmax(net, "softmax", x);
    return mt_network_status(net, NULL, 0);
}
