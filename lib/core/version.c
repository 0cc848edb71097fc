/* SPDX-License-Identifier: MIT */
#include <orbit/version.h>

const char *orbit_version_string(void)
{
    return ORBIT_VERSION_STRING;
}
