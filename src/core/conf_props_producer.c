/* Properties of kn_producer_t. */
#include "core/conf.h"

const kn_prop_t kn_props_producer[] = {
    {NULL, NULL, 0, NULL, 0, 0, NULL, NULL}};
