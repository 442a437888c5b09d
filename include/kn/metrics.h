/* The metric families of kn_consumer_metrics() and kn_producer_metrics():
 * their documentation, generated from the library's own table. */
#ifndef KN_METRICS_H
#define KN_METRICS_H

#include <stdio.h>

#include "kn/export.h"

#ifdef __cplusplus
extern "C" {
#endif

/* Writes docs/METRICS.md: every family with its type, labels and
 * meaning. */
KN_API void kn_metrics_markdown(FILE *out);

#ifdef __cplusplus
}
#endif

#endif
