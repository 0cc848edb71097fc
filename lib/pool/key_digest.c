/* SPDX-License-Identifier: MIT */
/* Keys from the caller's bytes: XXH3-128 (xxHash 0.8, seed 0), compiled in from Debian's xxhash.h. */
#include <string.h>
#define XXH_INLINE_ALL
#include <xxhash.h>
#include <orbit/pool.h>

orbit_key orbit_key_from_bytes(const void *data, size_t len)
{
    XXH128_hash_t h = XXH3_128bits(data && len ? data : "", data ? len : 0);
    return (orbit_key){ .lo = h.low64, .hi = h.high64 };
}

orbit_key orbit_key_from_string(const char *s)
{
    return orbit_key_from_bytes(s ? s : "", s ? strlen(s) : 0);
}
