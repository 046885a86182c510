/*
 * libFuzzer target: fab_rec_read, fab_rec_fits and fab_rec_granted
 * (src/transport/fabric/fabric_progress.c), the checks the libfabric
 * progress thread makes on a record a peer wrote into its landing ring
 * before copying the record's payload into a local region. The input
 * (fuzz_common.h, FUZZ_REC_PREFIX) gives the ring slot from the completion
 * data, the ring position applied so far, the target region's length, then
 * the ring bytes at that slot. There is no encoder to round-trip through;
 * instead an accepted record must be the next one in ring order and lie
 * inside the ring, and a record that fits must lie inside its region, which
 * is what makes the copy safe. Refusals must be SPINDLE_EPROTO. The grant
 * check (check_grants) runs on every accepted record.
 */
#include "fuzz_common.h"
#include "transport/fabric/fabric_impl.h"

static uint8_t ring[FAB_RING_SIZE];

static uint64_t record_size(uint32_t length)
{
    return (FAB_REC_HDR + (uint64_t)length + FAB_REC_ALIGN - 1) / FAB_REC_ALIGN * FAB_REC_ALIGN;
}

/* Write grants (fab_rec_granted, fabric_grant.c): with member 7 granted
 * the middle half of the region, a record passes for member 7 only when
 * its payload lies inside that half, never for member 8, which has no
 * grant; in a region never granted every member passes, in one granted
 * nothing (a grant of 0 bytes) none. Refusals are SPINDLE_EPERM. */
static void check_grants(const struct fab_rec_hdr *hdr, struct fab_region *region)
{
    FUZZ_CHECK(fab_rec_granted(hdr, region, 8) == 0);
    region->granted = true;
    FUZZ_CHECK(fab_rec_granted(hdr, region, 8) == SPINDLE_EPERM);
    struct fab_grant grant = {
        .member = 7, .offset = region->length / 4, .length = region->length / 2};
    region->grants = &grant;
    region->num_grants = 1;
    int rc = fab_rec_granted(hdr, region, 7);
    int inside = hdr->offset >= grant.offset && hdr->offset - grant.offset <= grant.length &&
                 hdr->length <= grant.length - (hdr->offset - grant.offset);
    FUZZ_CHECK(inside ? rc == 0 : rc == SPINDLE_EPERM);
    FUZZ_CHECK(fab_rec_granted(hdr, region, 8) == SPINDLE_EPERM);
    region->grants = NULL;
    region->num_grants = 0;
    region->granted = false;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (size < FUZZ_REC_PREFIX)
        return 0;
    /* The completion data carries 16 bits of slot (fab_handle_completion). */
    uint64_t off = fuzz_get_le(data, 2) * FAB_REC_ALIGN;
    /* applied is the progress thread's own count of ring bytes, from 0: it
     * stays far below 2^62 (a century at 1 TB/s), so start + size cannot
     * wrap. */
    uint64_t applied = fuzz_get_le(data + 2, 8) & ((1ull << 62) - 1);
    struct fab_region region = {.id = 1, .length = fuzz_get_le(data + 10, 8)};
    const uint8_t *landed = data + FUZZ_REC_PREFIX;
    size_t landed_len = size - FUZZ_REC_PREFIX;
    size_t room = off < FAB_RING_SIZE ? FAB_RING_SIZE - off : 0;
    size_t copied = landed_len < room ? landed_len : room;
    if (copied > FAB_REC_HDR)
        copied = FAB_REC_HDR; /* only the header is read */
    if (copied > 0)
        memcpy(ring + off, landed, copied);

    struct fab_rec_hdr hdr;
    memset(&hdr, 0, sizeof hdr);
    int rc = fab_rec_read(ring, off, applied, &hdr);
    if (rc != 0) {
        FUZZ_CHECK(rc == SPINDLE_EPROTO);
    } else {
        uint64_t rec = record_size(hdr.length);
        FUZZ_CHECK(off + rec <= FAB_RING_SIZE);
        FUZZ_CHECK(hdr.start % FAB_RING_SIZE == off);
        FUZZ_CHECK(hdr.end - hdr.start == rec && hdr.end > hdr.start);
        FUZZ_CHECK(hdr.start >= applied && hdr.start - applied < FAB_RING_SIZE);
        region.id = hdr.region;
        rc = fab_rec_fits(&hdr, &region);
        if (rc == 0)
            FUZZ_CHECK(hdr.offset <= region.length && hdr.length <= region.length - hdr.offset);
        else
            FUZZ_CHECK(rc == SPINDLE_EPROTO);
        FUZZ_CHECK(fab_rec_fits(&hdr, NULL) == SPINDLE_EPROTO);
        check_grants(&hdr, &region);
    }
    if (copied > 0)
        memset(ring + off, 0, copied);
    return 0;
}
