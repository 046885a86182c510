/*
 * Valid sample messages of every membership message (src/view/view_wire.h),
 * encoded with the library's own encoders: the starting points of the codec
 * unit tests and the seeds of the fuzz targets. Each builder writes the
 * encoded message into buf (cap bytes) and returns its size.
 */
#ifndef SPINDLE_TESTS_VIEW_WIRE_SAMPLES_H
#define SPINDLE_TESTS_VIEW_WIRE_SAMPLES_H

#include <stdio.h>
#include <string.h>

#include "view/view_wire.h"

#define SAMPLE_UNUSED __attribute__((unused))

static SAMPLE_UNUSED void sample_desc_fill(struct sst_member_desc *desc, uint8_t seed)
{
    memset(desc, 0, sizeof *desc);
    desc->address.len = 24;
    desc->region.len = 40;
    desc->side.len = seed % 2 ? 0 : 16;
    for (uint32_t i = 0; i < TP_DESC_MAX; i++) {
        desc->address.bytes[i] = i < desc->address.len ? (uint8_t)(seed + i) : 0;
        desc->region.bytes[i] = i < desc->region.len ? (uint8_t)(seed * 3 + i) : 0;
        desc->side.bytes[i] = i < desc->side.len ? (uint8_t)(seed * 7 + i) : 0;
    }
}

static SAMPLE_UNUSED struct smc_layout sample_layout(uint32_t rows, uint32_t senders)
{
    struct smc_layout l;
    memset(&l, 0, sizeof l);
    for (uint32_t r = 0; r < rows; r++)
        l.members[l.num_members++] = r;
    for (uint32_t s = 0; s < senders && s < rows; s++)
        l.senders[l.num_senders++] = s;
    l.window_size = 100;
    l.max_payload = 1024;
    l.mode = SPINDLE_MODE_ATOMIC;
    return l;
}

/* A member identity: name "node-<n>", incarnation 1000 + n. */
static SAMPLE_UNUSED struct spindle_member_identity sample_identity(uint32_t n)
{
    struct spindle_member_identity identity;
    memset(&identity, 0, sizeof identity);
    snprintf(identity.name, sizeof identity.name, "node-%u", n);
    identity.incarnation = 1000u + n;
    return identity;
}

static SAMPLE_UNUSED size_t sample_desc(uint8_t *buf, size_t cap)
{
    struct view_start_desc start;
    memset(&start, 0, sizeof start);
    sample_desc_fill(&start.desc, 3);
    start.identity = sample_identity(3);
    return view_wire_encode_desc(&start, buf, cap);
}

static SAMPLE_UNUSED size_t sample_ready(uint8_t *buf, size_t cap)
{
    return view_wire_encode_ready(41, buf, cap);
}

/* A blob of a group of 2 subgroups. */
#define SAMPLE_BLOB_SUBGROUPS 2
static SAMPLE_UNUSED size_t sample_blob(uint8_t *buf, size_t cap)
{
    uint64_t counts[SAMPLE_BLOB_SUBGROUPS * SST_MAX_ROWS] = {0};
    for (uint32_t i = 0; i < 6; i++)
        counts[i] = 1000 + i;
    counts[SST_MAX_ROWS] = 77;
    struct view_blob blob = {.view_id = 5,
                             .suspected = 0x4,
                             .joiner = VIEW_NO_JOINER,
                             .num_subgroups = SAMPLE_BLOB_SUBGROUPS,
                             .counts = counts};
    sample_desc_fill(&blob.desc, 9);
    return view_wire_encode_blob(&blob, buf, cap);
}

static SAMPLE_UNUSED size_t sample_commit(uint8_t *buf, size_t cap)
{
    struct view_commit commit = {6, 0x12, 7};
    return view_wire_encode_commit(&commit, buf, cap);
}

static SAMPLE_UNUSED size_t sample_suspect(uint8_t *buf, size_t cap)
{
    struct view_suspect suspect = {6, 0x14};
    return view_wire_encode_suspect(&suspect, buf, cap);
}

static SAMPLE_UNUSED size_t sample_join_request(uint8_t *buf, size_t cap)
{
    static struct view_join_request req;
    memset(&req, 0, sizeof req);
    snprintf(req.address.host, sizeof req.address.host, "joiner.example");
    req.address.port = 7100;
    req.identity = sample_identity(9);
    req.num_subgroups = 3;
    for (uint32_t g = 0; g < 3; g++)
        req.subgroups[g] = (struct view_join_subgroup){100 + g, 1024, g % 2};
    return view_wire_encode_join_request(&req, buf, cap);
}

/* A join request of a member following a total restart, which asks for
 * the member id its log holds. */
static SAMPLE_UNUSED size_t sample_restart_join_request(uint8_t *buf, size_t cap)
{
    static struct view_join_request req;
    memset(&req, 0, sizeof req);
    snprintf(req.address.host, sizeof req.address.host, "10.0.0.5");
    req.address.port = 7105;
    req.identity = sample_identity(5);
    req.flags = VIEW_JOIN_CATCHUP | VIEW_JOIN_RESTART;
    req.restart_id = 5;
    req.num_subgroups = 2;
    for (uint32_t g = 0; g < 2; g++)
        req.subgroups[g] = (struct view_join_subgroup){100, 1024, 0};
    return view_wire_encode_join_request(&req, buf, cap);
}

/* kind: VIEW_OFFER_ADMIT, _REDIRECT or _REFUSE. */
static SAMPLE_UNUSED size_t sample_join_offer(uint32_t kind, uint8_t *buf, size_t cap)
{
    static struct view_join_offer offer;
    static struct smc_layout layouts[2];
    memset(&offer, 0, sizeof offer);
    offer.kind = kind;
    if (kind == VIEW_OFFER_REFUSE) {
        offer.error = SPINDLE_EAGAIN;
        snprintf(offer.why, sizeof offer.why, "a view change is under way");
    } else if (kind == VIEW_OFFER_REDIRECT) {
        snprintf(offer.redirect.host, sizeof offer.redirect.host, "10.0.0.1");
        offer.redirect.port = 7000;
    } else {
        snprintf(offer.group_name, sizeof offer.group_name, "orders");
        offer.id = 4;
        offer.num_initial = 3;
        offer.num_rows = 3;
        offer.my_row = 2;
        offer.num_subgroups = 2;
        offer.view_id = 9;
        offer.admission = (9ull << 16) + 1;
        const uint32_t ids[] = {0, 2, 4};
        for (uint32_t r = 0; r < 3; r++) {
            offer.member_ids[r] = ids[r];
            snprintf(offer.addresses[r].host, sizeof offer.addresses[r].host, "host%u", ids[r]);
            offer.addresses[r].port = (uint16_t)(7000 + ids[r]);
            offer.identities[r] = sample_identity(ids[r]);
        }
        layouts[0] = sample_layout(3, 2);
        layouts[1] = sample_layout(2, 1);
        layouts[1].mode = SPINDLE_MODE_UNORDERED;
        offer.layouts = layouts;
    }
    return view_wire_encode_join_offer(&offer, buf, cap);
}

static SAMPLE_UNUSED size_t sample_join_desc(uint8_t *buf, size_t cap)
{
    struct view_join_desc desc = {.view_id = 9, .id = 4, .admission = (9ull << 16) + 1};
    sample_desc_fill(&desc.desc, 4);
    return view_wire_encode_join_desc(&desc, buf, cap);
}

static SAMPLE_UNUSED size_t sample_join_announce(uint8_t *buf, size_t cap)
{
    struct view_join_announce a = {.view_id = 9, .id = 4};
    snprintf(a.address.host, sizeof a.address.host, "127.0.0.1");
    a.address.port = 7104;
    a.identity = sample_identity(4);
    sample_desc_fill(&a.desc, 5);
    return view_wire_encode_join_announce(&a, buf, cap);
}

static SAMPLE_UNUSED size_t sample_join_view(int dropped, uint8_t *buf, size_t cap)
{
    static struct view_join_view jv;
    memset(&jv, 0, sizeof jv);
    jv.view_id = 9;
    if (dropped) {
        jv.error = SPINDLE_EAGAIN;
        snprintf(jv.why, sizeof jv.why, "a member failed while the joiner was being admitted");
    } else {
        jv.state_length = 4096;
        jv.num_skips = 2;
        jv.num_rows = 3;
        for (uint32_t r = 0; r < 3; r++)
            sample_desc_fill(&jv.descs[r], (uint8_t)(10 + r));
    }
    return view_wire_encode_join_view(&jv, buf, cap);
}

/* The two skips sample_join_view announces. */
static SAMPLE_UNUSED size_t sample_join_skips(uint8_t *buf, size_t cap)
{
    static struct view_join_skips skips;
    memset(&skips, 0, sizeof skips);
    skips.view_id = 9;
    skips.num_skips = 2;
    skips.skips[0] = (struct view_join_skip){0, 1, 12};
    skips.skips[1] = (struct view_join_skip){3, 0, 70000};
    return view_wire_encode_join_skips(&skips, buf, cap);
}

#endif
