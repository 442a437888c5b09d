/* libkinesis: everything in one include. */
#ifndef KN_KN_H
#define KN_KN_H

#include "kn/version.h"
#include "kn/error.h"
#include "kn/conf.h"
#include "kn/record.h"
#include "kn/base64.h"
#include "kn/client.h"
#include "kn/consumer.h"
#include "kn/producer.h"
#include "kn/leases.h"
#include "kn/metrics.h"
#include "kn/position.h"
#include "kn/snapshot.h"
#include "kn/enumerator.h"
#include "kn/stream_reader.h"

#endif
