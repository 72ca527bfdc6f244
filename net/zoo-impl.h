/* Private to net/: the zoo's builders and a shorthand for convolutions.
 *
 * A builder appends a whole network to an empty mt_network and returns
 * mt_network_status of it; builders rely on the sticky error of the add calls
 * and need not check each one. */
#ifndef MTGPU_NET_ZOO_IMPL_H
#define MTGPU_NET_ZOO_IMPL_H

#include "mtgpu/net.h"

typedef mt_status (*mt__zoo_builder)(mt_network *net, int batch, int image_size);

mt_status mt__zoo_resnet18(mt_network *net, int batch, int image_size);
mt_status mt__zoo_resnet34(mt_network *net, int batch, int image_size);
mt_status mt__zoo_resnet50(mt_network *net, int batch, int image_size);
mt_status mt__zoo_vgg16(mt_network *net, int batch, int image_size);
mt_status mt__zoo_mobilenet_v2(mt_network *net, int batch, int image_size);
mt_status mt__zoo_squeezenet1_1(mt_network *net, int batch, int image_size);

/* A square convolution: k outputs, r x r kernel, stride and pad on both axes,
 * dilation 1. Batch norm when bn_name is not NULL. Returns as mt_network_add_conv. */
int mt__net_conv(mt_network *net, const char *name, const char *bn_name, int input, int k, int r, int stride, int pad, int groups,
                 int bias, mt_activation act, int residual);

#endif
