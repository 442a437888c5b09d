/* Symbol visibility: only functions marked KN_API are exported from the
 * shared library; everything else stays internal. */
#ifndef KN_EXPORT_H
#define KN_EXPORT_H

#if defined(KN_BUILDING) && defined(__GNUC__)
#define KN_API __attribute__((visibility("default")))
#else
#define KN_API
#endif

#endif
