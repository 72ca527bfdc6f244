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

/* Convolution `conv` of block b of stage s with its batch norm `bn` (named
 * "layer<s>.<b>.<conv>" and "layer<s>.<b>.<bn>"): k outputs, r x r with
 * padding r / 2, no bias. Returns as mt_network_add_conv. */
static int block_conv(mt_network *net, int stage, int block, const char *conv, const char *bn, int input, int k, int r, int stride,
                      mt_activation act, int residual) {
    char cname[NAME_LEN], bname[NAME_LEN];
    snprintf(cname, sizeof cname, "layer%d.%d.%s", stage, block, conv);
    snprintf(bname, sizeof bname, "layer%d.%d.%s", stage, block, bn);
    return mt__net_conv(net, cname, bname, input, k, r, stride, r / 2, 1, 0, act, residual);
}

/* The end of a block on input x whose main path has reached y: the last
 * main conv (`conv`, `bn`: k outputs, r x r, stride 1) and, with a
 * downsample branch (the 1x1 conv of x with the block's stride), that
 * branch's conv, which then carries the fused add and ReLU. Returns the
 * block's output layer. */
static int block_end(mt_network *net, int stage, int block, int x, int y, const char *conv, const char *bn, int k, int r, int stride,
                     int downsample) {
    if (!downsample) return block_conv(net, stage, block, conv, bn, y, k, r, 1, MT_ACT_RELU, x);
    int last = block_conv(net, stage, block, conv, bn, y, k, r, 1, MT_ACT_NONE, -1);
    return block_conv(net, stage, block, "downsample.0", "downsample.1", x, k, 1, stride, MT_ACT_RELU, last);
}

/* BasicBlock: 3x3 (stride) -> 3x3, expansion 1. Returns the block's output layer. */
static int basic_block(mt_network *net, int x, int inplanes, int planes, int stride, int stage, int block) {
    int c1 = block_conv(net, stage, block, "conv1", "bn1", x, planes, 3, stride, MT_ACT_RELU, -1);
    return block_end(net, stage, block, x, c1, "conv2", "bn2", planes, 3, stride, stride != 1 || inplanes != planes);
}

/* Bottleneck: 1x1 -> 3x3 (stride) -> 1x1 to 4 * planes. */
static int bottleneck(mt_network *net, int x, int inplanes, int planes, int stride, int stage, int block) {
    int c1 = block_conv(net, stage, block, "conv1", "bn1", x, planes, 1, 1, MT_ACT_RELU, -1);
    int c2 = block_conv(net, stage, block, "conv2", "bn2", c1, planes, 3, stride, MT_ACT_RELU, -1);
    return block_end(net, stage, block, x, c2, "conv3", "bn3", planes * 4, 1, stride, stride != 1 || inplanes != planes * 4);
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
