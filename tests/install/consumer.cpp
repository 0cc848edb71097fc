// SPDX-License-Identifier: MIT
// The installed headers from C++17: every header, the default initialisers,
// and a call into each library.
#include <cstdio>
#include <cstring>
#include <orbit/orbit.h>
#include <orbit/uring.h>
#include <orbit/reaper.h>

int main()
{
    struct orbit_fleet_opts opts = ORBIT_FLEET_OPTS_DEFAULT;
    struct orbit_pool_spec pool = ORBIT_POOL_SPEC_DEFAULT;
    struct orbit_stream_spec stream = ORBIT_STREAM_SPEC_DEFAULT;
    struct orbit_admission_spec adm = ORBIT_ADMISSION_SPEC_DEFAULT;
    struct orbit_exchange_spec ex = ORBIT_EXCHANGE_SPEC_DEFAULT;
    opts.backing = ORBIT_BACKING_PRIVATE;
    struct orbit_fleet *f = nullptr;
    int rc = orbit_fleet_join(nullptr, &opts, &f);
    if (rc < 0) {
        std::fprintf(stderr, "consumer (C++): join: %s\n", orbit_strerror(rc));
        return 1;
    }
    struct orbit_pool *p = nullptr;
    rc = orbit_pool_open(f, &pool, &p);
    if (rc < 0) {
        std::fprintf(stderr, "consumer (C++): pool_open: %s\n", orbit_strerror(rc));
        return 1;
    }
    orbit_pool_close(p);
    orbit_fleet_leave(f);
    if (std::strcmp(orbit_version_string(), ORBIT_VERSION_STRING) != 0 || stream.kind != ORBIT_STREAM_KIND ||
        adm.kind != ORBIT_ADMISSION_KIND || ex.a_to_b.kind != ORBIT_ARENA_KIND)
        return 1;
    std::printf("consumer (C++17): liborbit %s, reaper backend %s\n", orbit_version_string(),
                orbit_reaper_backend_name(ORBIT_REAPER_AUTO));
    return 0;
}
