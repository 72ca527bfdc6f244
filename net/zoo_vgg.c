/* VGG-16 as torchvision builds it (configuration "D", no batch norm): 13 3x3
 * convs with pad 1, bias and ReLU, five 2x2 max pools, an adaptive average
 * pool to 7x7 (an identity at 224x224), and three dense layers. Layer names
 * are torchvision's module indices ("features.0", "classifier.3"); the ReLU
 * and dropout modules between them have no layer of their own. */
#include <stdio.h>

#include "zoo-impl.h"

#define POOL (-1)

mt_status mt__zoo_vgg16(mt_network *net, int batch, int image_size) {
    static const int cfg[] = {64, 64, POOL, 128, 128, POOL, 256, 256, 256, POOL, 512, 512, 512, POOL, 512, 512, 512, POOL};
    char name[MT_LAYER_NAME_MAX];
    int x = mt_network_add_input(net, "input", batch, 3, image_size, image_size);
    int module = 0; /* torchvision's index into features: a conv and its ReLU take two */
    for (size_t i = 0; i < sizeof cfg / sizeof cfg[0]; i++) {
        snprintf(name, sizeof name, "features.%d", module);
        if (cfg[i] == POOL) {
            x = mt_network_add_pool(net, name, MT_LAYER_MAXPOOL, x, 2, 2, 0, 0);
            module += 1;
        } else {
            x = mt__net_conv(net, name, NULL, x, cfg[i], 3, 1, 1, 1, 1, MT_ACT_RELU, -1);
            module += 2;
        }
    }
    x = mt_network_add_adaptive_avgpool(net, "avgpool", x, 7, 7);
    x = mt_network_add_flatten(net, "flatten", x);
    x = mt_network_add_dense(net, "classifier.0", x, 4096, 1, MT_ACT_RELU);
    x = mt_network_add_dense(net, "classifier.3", x, 4096, 1, MT_ACT_RELU);
    x = mt_network_add_dense(net, "classifier.6", x, 1000, 1, MT_ACT_NONE);
    mt_network_add_softmax(net, "softmax", x);
    return mt_network_status(net, NULL, 0);
}
