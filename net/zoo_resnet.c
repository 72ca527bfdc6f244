/* ResNet-18/34/50 as torchvision builds them (v1.5: in a bottleneck the
 * stride sits on the 3x3 conv).
 *
 * The residual add and the ReLU that ends each block are fused into a
 * convolution. In a block without downsampling that is the block's last conv,
 * with the block input as residual. In a block with a downsample branch the
 * downsample 1x1 conv comes after the block's own convs (torchvision computes
 * it after conv3 too) and carries the fused add, with the last main conv as
 * residual: relu(bn3(conv3(x)) + bn(ds(x))) in the other order of the sum.
 * That keeps the list topological and gives the order of first occurrence
 * that task tables (TVM's extraction, the reference timings) use. */
#include <stdio.h>

#include "zoo-impl.h"

#define NAME_LEN MT_LAYER_NAME_MAX

/* Names a module of block b of stage s: "layer<s>.<b>.<what>". */
static const char *bname(char *buf, int stage, int block, const char *what) {
    snprintf(buf, NAME_LEN, "layer%d.%d.%s", stage, block, what);
    return buf;
}

/* BasicBlock: 3x3 (stride) -> 3x3, expansion 1. Returns the block's output layer. */
static int basic_block(mt_network *net, int x, int inplanes, int planes, int stride, int stage, int block) {
    char n1[NAME_LEN], n2[NAME_LEN];
    int c1 = mt__net_conv(net, bname(n1, stage, block, "conv1"), bname(n2, stage, block, "bn1"), x, planes, 3, stride, 1, 1, 0, MT_ACT_RELU, -1);
    if (stride == 1 && inplanes == planes)
        return mt__net_conv(net, bname(n1, stage, block, "conv2"), bname(n2, stage, block, "bn2"), c1, planes, 3, 1, 1, 1, 0, MT_ACT_RELU, x);
    int c2 = mt__net_conv(net, bname(n1, stage, block, "conv2"), bname(n2, stage, block, "bn2"), c1, planes, 3, 1, 1, 1, 0, MT_ACT_NONE, -1);
    return mt__net_conv(net, bname(n1, stage, block, "downsample.0"), bname(n2, stage, block, "downsample.1"), x, planes, 1, stride, 0, 1, 0,
                        MT_ACT_RELU, c2);
}

/* Bottleneck: 1x1 -> 3x3 (stride) -> 1x1 to 4 * planes. */
static int bottleneck(mt_network *net, int x, int inplanes, int planes, int stride, int stage, int block) {
    char n1[NAME_LEN], n2[NAME_LEN];
    int out = planes * 4;
    int c1 = mt__net_conv(net, bname(n1, stage, block, "conv1"), bname(n2, stage, block, "bn1"), x, planes, 1, 1, 0, 1, 0, MT_ACT_RELU, -1);
    int c2 = mt__net_conv(net, bname(n1, stage, block, "conv2"), bname(n2, stage, block, "bn2"), c1, planes, 3, stride, 1, 1, 0, MT_ACT_RELU, -1);
    if (stride == 1 && inplanes == out)
        return mt__net_conv(net, bname(n1, stage, block, "conv3"), bname(n2, stage, block, "bn3"), c2, out, 1, 1, 0, 1, 0, MT_ACT_RELU, x);
    int c3 = mt__net_conv(net, bname(n1, stage, block, "conv3"), bname(n2, stage, block, "bn3"), c2, out, 1, 1, 0, 1, 0, MT_ACT_NONE, -1);
    return mt__net_conv(net, bname(n1, stage, block, "downsample.0"), bname(n2, stage, block, "downsample.1"), x, out, 1, stride, 0, 1, 0,
                        MT_ACT_RELU, c3);
}

static mt_status resnet(mt_network *net, int batch, int image_size, int use_bottleneck, const int blocks[4]) {
    int x = mt_network_add_input(net, "input", batch, 3, image_size, image_size);
    x = mt__net_conv(net, "conv1", "bn1", x, 64, 7, 2, 3, 1, 0, MT_ACT_RELU, -1);
    x = mt_network_add_pool(net, "maxpool", MT_LAYER_MAXPOOL, x, 3, 2, 1, 0);
    int inplanes = 64;
    for (int s = 0; s < 4; s++) {
        int planes = 64 << s;
        for (int b = 0; b < blocks[s]; b++) {
            int stride = s > 0 && b == 0 ? 2 : 1;
            if (use_bottleneck) {
                x = bottleneck(net, x, inplanes, planes, stride, s + 1, b);
                inplanes = planes * 4;
            } else {
                x = basic_block(net, x, inplanes, planes, stride, s + 1, b);
                inplanes = planes;
            }
        }
    }
    x = mt_network_add_global_avgpool(net, "avgpool", x);
    x = mt_network_add_flatten(net, "flatten", x);
    x = mt_network_add_dense(net, "fc", x, 1000, 1, MT_ACT_NONE);
    mt_network_add_softmax(net, "softmax", x);
    return mt_network_status(net, NULL, 0);
}

mt_status mt__zoo_resnet18(mt_network *net, int batch, int image_size) {
    static const int blocks[4] = {2, 2, 2, 2};
    return resnet(net, batch, image_size, 0, blocks);
}

mt_status mt__zoo_resnet34(mt_network *net, int batch, int image_size) {
    static const int blocks[4] = {3, 4, 6, 3};
    return resnet(net, batch, image_size, 0, blocks);
}

mt_status mt__zoo_resnet50(mt_network *net, int batch, int image_size) {
    static const int blocks[4] = {3, 4, 6, 3};
    return resnet(net, batch, image_size, 1, blocks);
}
