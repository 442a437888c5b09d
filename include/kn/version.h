#ifndef KN_VERSION_H
#define KN_VERSION_H

#include "kn/export.h"

#define KN_VERSION_MAJOR 0
#define KN_VERSION_MINOR 1
#define KN_VERSION_PATCH 0
#define KN_VERSION_STR "0.1.0"
/* 0xMMmmpp: compare with KN_VERSION_NUM >= 0x000100 */
#define KN_VERSION_NUM \
  ((KN_VERSION_MAJOR << 16) | (KN_VERSION_MINOR << 8) | KN_VERSION_PATCH)

#ifdef __cplusplus
extern "C" {
#endif

/* The version of the library actually linked, which may differ from the
 * header's when the shared library was upgraded. */
KN_API const char *kn_version_str(void);
KN_API int kn_version_num(void);

#ifdef __cplusplus
}
#endif
#endif
