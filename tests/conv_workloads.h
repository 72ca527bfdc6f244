/* The workloads every backend's convolution test runs (test_conv_harness on
 * the first device, test_cuda_gpu on cuda:0): the shapes a template can get
 * wrong. One list, so that a shape added here is tested everywhere. */
#ifndef MTGPU_TEST_CONV_WORKLOADS_H
#define MTGPU_TEST_CONV_WORKLOADS_H

static const char *const mt_test_conv_workloads[] = {
    "n=1,c=16,h=20,w=20,k=24,r=3,s=3,pad=1",             /* 3x3, padding */
    "n=1,c=8,h=17,w=17,k=16,r=3,s=3,stride=2,pad=1",     /* stride 2, odd size */
    "n=1,c=8,h=16,w=16,k=8,r=3,s=3,pad=2,dilation=2",    /* dilation 2 */
    "n=1,c=32,h=14,w=14,k=48,r=1,s=1",                   /* 1x1 */
    "n=1,c=16,h=14,w=14,k=32,r=1,s=1,stride=2",          /* 1x1 stride 2 */
    "n=1,c=6,h=15,w=15,k=10,r=5,s=5,pad=2",              /* 5x5 */
    "n=1,c=3,h=32,w=32,k=16,r=7,s=7,stride=2,pad=3",     /* 7x7 stem */
    "n=1,c=8,h=12,w=20,k=8,r=3,s=3,pad=1",               /* non-square image */
    "n=1,c=8,h=10,w=17,k=8,r=1,s=7,pad=0x3",             /* 1x7 */
    "n=1,c=8,h=17,w=10,k=8,r=7,s=1,pad=3x0",             /* 7x1 */
    "n=1,c=8,h=11,w=13,k=8,r=3,s=3,stride=2x1,pad=1",    /* stride per axis */
    "n=1,c=16,h=14,w=14,k=16,r=3,s=3,pad=1,groups=16",   /* depthwise */
    "n=1,c=24,h=15,w=15,k=24,r=3,s=3,stride=2,pad=1,groups=24", /* depthwise stride 2 */
    "n=1,c=16,h=12,w=12,k=32,r=3,s=3,pad=1,groups=4",    /* grouped */
    "n=2,c=8,h=10,w=10,k=12,r=3,s=3,pad=1",              /* batch 2 */
    "n=1,c=12,h=13,w=13,k=20,r=3,s=3,pad=1",             /* sizes that divide no tile */
    "n=1,c=7,h=9,w=11,k=5,r=2,s=4,pad=1x2",              /* even kernel, uneven padding */
    "n=1,c=12,h=24,w=24,k=16,r=1,s=1,groups=2",          /* planes past 2 KiB: input prefetch (grouped: its channel clamp) */
};
#define MT_TEST_NCONV_WORKLOADS (int)(sizeof mt_test_conv_workloads / sizeof mt_test_conv_workloads[0])

#endif
