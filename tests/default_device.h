/* The default device that a test file's cases share: opened once by the
 * cmocka group's setup (default_device_open) and closed by its teardown
 * (default_device_close). Where none opens, `device` is NULL and
 * `device_err` says why, and skip_without_device() skips a case with that
 * reason. For test files that include it once, after cmocka.h and
 * mtgpu/device.h. */
#ifndef MTGPU_TESTS_DEFAULT_DEVICE_H
#define MTGPU_TESTS_DEFAULT_DEVICE_H

static mt_device *device;
static char device_err[512];

static int default_device_open(void **state) {
    (void)state;
    mt_device_params dp = mt_device_default_params();
    if (mt_device_open(NULL, &dp, &device, device_err, sizeof device_err) != MT_OK) device = NULL;
    return 0;
}

static int default_device_close(void **state) {
    (void)state;
    mt_device_close(device);
    device = NULL;
    return 0;
}

/* Skips the running case (cmocka's skip) where no device opened. */
static void skip_without_device(void) {
    if (device) return;
    print_message("skipped: no device: %s\n", device_err);
    skip();
}

#endif
