/* Private: a device description as one JSON object (the database stores it;
 * `mtgpu devices --json` prints it). */
#ifndef MTGPU_DEVICE_INFO_JSON_H
#define MTGPU_DEVICE_INFO_JSON_H
#include "mtgpu/device.h"
#include "strbuf.h"
void mt__device_info_json(mt_strbuf *sb, const mt_device_info *d);
#endif
