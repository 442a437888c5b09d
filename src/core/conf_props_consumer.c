/* Properties of kn_consumer_t. */
#include "core/conf.h"

const kn_prop_t kn_props_consumer[] = {
    {NULL, NULL, 0, NULL, 0, 0, NULL, NULL}};
