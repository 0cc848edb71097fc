/* SPDX-License-Identifier: MIT */
/*
 * Exchange control frames: 64 bytes, little-endian (docs/design.md §7).
 *   0 magic "OEXC" | 4 version | 5 event | 6 flow | 7 flags (bit 0 HAS_PAYLOAD)
 *   8 exchange id u64 | 16 chunk id u64 | 24 generation u64 | 32 first slot u32
 *  36 slot count u32 | 40 length u32 | 44 arena kind u8 | 45..47 zero
 *  48 producer node u16 | 50 reset code u32 | 54..63 zero
 */
#include <string.h>
#include "exch_layout.h"

static void put16(unsigned char *p, uint16_t v) { p[0] = (unsigned char)v; p[1] = (unsigned char)(v >> 8); }
static void put32(unsigned char *p, uint32_t v) { put16(p, (uint16_t)v); put16(p + 2, (uint16_t)(v >> 16)); }
static void put64(unsigned char *p, uint64_t v) { put32(p, (uint32_t)v); put32(p + 4, (uint32_t)(v >> 32)); }
static uint16_t get16(const unsigned char *p) { return (uint16_t)(p[0] | p[1] << 8); }
static uint32_t get32(const unsigned char *p) { return get16(p) | (uint32_t)get16(p + 2) << 16; }
static uint64_t get64(const unsigned char *p) { return get32(p) | (uint64_t)get32(p + 4) << 32; }

void xframe_encode(const struct xframe *f, unsigned char out[XFRAME_BYTES])
{
    memset(out, 0, XFRAME_BYTES);
    put32(out, XFRAME_MAGIC);
    out[4] = XFRAME_VERSION;
    out[5] = f->event;
    out[6] = f->flow;
    out[7] = f->flags;
    put64(out + 8, f->exchange);
    if (f->flags & XFRAME_HAS_PAYLOAD) {
        put64(out + 16, f->chunk_id);
        put64(out + 24, f->desc.generation);
        put32(out + 32, f->desc.first_slot);
        put32(out + 36, f->desc.slot_count);
        put32(out + 40, f->desc.len);
        out[44] = f->desc.arena_kind;
        put16(out + 48, f->desc.node);
    }
    if (f->event == ORBIT_EXCHANGE_RESET)
        put32(out + 50, f->reset_code);
}

static bool zero(const unsigned char *p, size_t n)
{
    for (size_t i = 0; i < n; i++)
        if (p[i])
            return false;
    return true;
}

int xframe_decode(const unsigned char in[XFRAME_BYTES], struct xframe *f)
{
    memset(f, 0, sizeof *f);
    if (get32(in) != XFRAME_MAGIC || in[4] != XFRAME_VERSION)
        return -ORBIT_ECORRUPT;
    f->event = in[5];
    f->flow = in[6];
    f->flags = in[7];
    if (f->event < ORBIT_EXCHANGE_START || f->event > ORBIT_EXCHANGE_RESET ||
        (f->flow != ORBIT_FLOW_A_TO_B && f->flow != ORBIT_FLOW_B_TO_A) || (f->flags & ~XFRAME_HAS_PAYLOAD))
        return -ORBIT_ECORRUPT;
    bool payload = f->flags & XFRAME_HAS_PAYLOAD;
    /* DATA always carries a chunk, FIN and RESET never; START may. */
    if ((f->event == ORBIT_EXCHANGE_DATA && !payload) ||
        ((f->event == ORBIT_EXCHANGE_FIN || f->event == ORBIT_EXCHANGE_RESET) && payload))
        return -ORBIT_ECORRUPT;
    f->exchange = get64(in + 8);
    if (!zero(in + 45, 3) || !zero(in + 54, 10))
        return -ORBIT_ECORRUPT;
    if (payload) {
        f->chunk_id = get64(in + 16);
        f->desc = (struct orbit_chunk_desc){ .arena_kind = in[44], .node = get16(in + 48),
                                             .first_slot = get32(in + 32), .slot_count = get32(in + 36),
                                             .len = get32(in + 40), .generation = get64(in + 24) };
    } else if (!zero(in + 16, 29) || !zero(in + 48, 2)) {
        return -ORBIT_ECORRUPT;
    }
    if (f->event == ORBIT_EXCHANGE_RESET)
        f->reset_code = get32(in + 50);
    else if (!zero(in + 50, 4))
        return -ORBIT_ECORRUPT;
    return 0;
}
