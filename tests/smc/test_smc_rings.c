/*
 * Where SMC rings live: in the table's side region, only for the subgroups
 * this member belongs to, registered non-pinned, freed with the table.
 *
 * The groups here are created but never connected, on a transport that is
 * shm with its registration calls recorded and with pinning accounted the
 * way verbs accounts it: a region is pinned unless it asks for
 * TP_MR_NONPINNED and the (simulated) device pages on demand.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <cmocka.h>

#include <spindle/spindle.h>

#include "group/group_impl.h"
#include "smc/smc_impl.h"
#include "sst/sst_impl.h"

extern const struct tp_ops tp_shm_ops;

/* ---- a recording transport -------------------------------------------- */

#define MAX_REGIONS 8

struct region {
    size_t length;
    unsigned flags;
    struct tp_mr *mr;
    bool pinned;
    bool freed;
};

static struct region regions[MAX_REGIONS];
static unsigned num_regions;
static bool on_demand; /* the simulated device supports ODP */
static uint64_t pinned_bytes;

static int recording_mr_alloc(struct tp_endpoint *ep, size_t length, unsigned flags, void **addr,
                              struct tp_mr **out)
{
    int rc = tp_shm_ops.mr_alloc(ep, length, flags, addr, out);
    if (rc != 0 || num_regions == MAX_REGIONS)
        return rc;
    bool pinned = !(on_demand && (flags & TP_MR_NONPINNED) != 0);
    regions[num_regions++] =
        (struct region){.length = length, .flags = flags, .mr = *out, .pinned = pinned};
    if (pinned)
        pinned_bytes += length;
    return 0;
}

static void recording_mr_free(struct tp_endpoint *ep, struct tp_mr *mr)
{
    for (unsigned i = 0; i < num_regions; i++) {
        if (regions[i].mr == mr && !regions[i].freed) {
            regions[i].freed = true;
            if (regions[i].pinned)
                pinned_bytes -= regions[i].length;
        }
    }
    tp_shm_ops.mr_free(ep, mr);
}

static void recording_stats(struct tp_endpoint *ep, struct tp_stats *out)
{
    tp_shm_ops.stats(ep, out);
    out->pinned_bytes = pinned_bytes;
}

static struct tp_ops recording_ops;
static struct tp_attr recording_attr;

/* shm with its slice alignment set to align: 0 lays rings out packed, as
 * on libfabric and verbs; 4096 (shm's own) in page-aligned slices. */
static struct sst_engine *recording_engine_aligned(bool odp, uint32_t align)
{
    memset(regions, 0, sizeof regions);
    num_regions = 0;
    pinned_bytes = 0;
    on_demand = odp;
    recording_ops = tp_shm_ops;
    recording_ops.mr_alloc = recording_mr_alloc;
    recording_ops.mr_free = recording_mr_free;
    recording_ops.stats = recording_stats;
    recording_attr = *tp_shm_ops.attr;
    recording_attr.slice_align = align;
    recording_ops.attr = &recording_attr;
    struct tp_config config = {.backend = "shm", .failure_timeout_ms = 1000};
    struct sst_engine *engine = NULL;
    assert_int_equal(sst_engine_create(&config, NULL, &engine), 0);
    engine->endpoint->ops = &recording_ops; /* no table or peer exists yet */
    return engine;
}

static struct sst_engine *recording_engine(bool odp)
{
    return recording_engine_aligned(odp, 0);
}

/* ---- layouts ----------------------------------------------------------- */

/*
 * Four members, four subgroups:
 *   0: members {0,1}, senders {0,1}, W 4, payload 100: slot 112, ring 448
 *   1: members {1,2}, senders {2,1}, W 8, payload 1000: slot 1008, ring 8064
 *   2: members {0,2}, senders {2},   W 2, payload 8: slot 16, ring 32 -> 64
 *   3: members {0,1,2,3}, no senders: no rings
 * Packed side region (libfabric, verbs) sizes before the point-to-point
 * rings: member 0: 2*448 + 64 = 960; member 1: 2*448 + 2*8064 = 17024;
 * member 2: 2*8064 + 64 = 16192; member 3: none.
 */
static const uint64_t expected_side[4] = {960, 17024, 16192, 0};
/* After its multicast rings, every member of a group of four keeps the
 * point-to-point rings (smc_p2p.h): one incoming and one outgoing per
 * member, SPINDLE_P2P_DEFAULT_WINDOW slots of SPINDLE_P2P_MAX_PAYLOAD. */
static const uint64_t p2p_ring =
    (SPINDLE_P2P_DEFAULT_WINDOW * (16 + SPINDLE_P2P_MAX_PAYLOAD) + 63) / 64 * 64;
#define P2P_SIDE (2 * 4 * p2p_ring)

static void four_layouts(struct smc_layout layouts[4])
{
    memset(layouts, 0, 4 * sizeof layouts[0]);
    const struct {
        uint32_t members[4], num_members, senders[4], num_senders, window, payload;
    } spec[4] = {
        {{0, 1}, 2, {0, 1}, 2, 4, 100},
        {{1, 2}, 2, {2, 1}, 2, 8, 1000},
        {{0, 2}, 2, {2}, 1, 2, 8},
        {{0, 1, 2, 3}, 4, {0}, 0, 4, 8},
    };
    for (uint32_t g = 0; g < 4; g++) {
        layouts[g].num_members = spec[g].num_members;
        memcpy(layouts[g].members, spec[g].members, sizeof spec[g].members);
        layouts[g].num_senders = spec[g].num_senders;
        memcpy(layouts[g].senders, spec[g].senders, sizeof spec[g].senders);
        layouts[g].window_size = spec[g].window;
        layouts[g].max_payload = spec[g].payload;
        layouts[g].mode = SPINDLE_MODE_ATOMIC;
    }
}

static void no_delivery(void *ctx, const struct spindle_message *messages, size_t count)
{
    (void)ctx;
    (void)messages;
    (void)count;
}

/* ---- tests --------------------------------------------------------------- */

/* A receiver decides from a slot header whether the position it expects
 * holds a message, lies before a later one (nulls), or is not yet written;
 * positions wrap at 2^39 in the header and the decision must not change
 * there. Checked around 0, around the wrap and several laps on, and for a
 * slot never written at every position (a sender silent for months). */
static void test_slot_headers_name_positions_across_the_40_bit_wrap(void **state)
{
    (void)state;
    const uint64_t lap = 1ull << SMC_POSITION_BITS;
    const uint64_t expected[] = {
        0,   1,       5,       lap / 2 - 3, lap - 3,      lap - 2,         lap - 1,
        lap, lap + 1, lap + 6, 3 * lap - 1, 3 * lap + 17, (1ull << 62) + 5};
    for (size_t i = 0; i < sizeof expected / sizeof expected[0]; i++) {
        uint64_t next = expected[i];
        assert_int_equal(smc_header_distance(smc_header(next, 100), next), 0);
        assert_int_equal(smc_header_distance(smc_header(next + 1, 8), next), 1);
        assert_int_equal(smc_header_distance(smc_header(next + 4, 8), next), 4);
        assert_int_equal(smc_header_distance(smc_header(next + 1000000, 0), next), 1000000);
        if (next >= 1)
            assert_true(smc_header_distance(smc_header(next - 1, 8), next) == SMC_HEADER_OLDER);
        if (next >= 64)
            assert_true(smc_header_distance(smc_header(next - 64, 8), next) == SMC_HEADER_OLDER);
    }
    /* A slot never written names nothing: its positions are nulls. */
    for (size_t i = 0; i < sizeof expected / sizeof expected[0]; i++)
        assert_true(smc_header_distance(0, expected[i]) == SMC_HEADER_OLDER);
    /* The length bits never leak into the position. */
    assert_int_equal(smc_header_distance(smc_header(lap - 1, (1u << SMC_LENGTH_BITS) - 1), lap - 1),
                     0);
}

static void test_ring_layout_is_the_same_function_everywhere(void **state)
{
    (void)state;
    struct smc_layout layouts[4];
    four_layouts(layouts);
    assert_int_equal(smc_ring_stride(&layouts[0]), 448);
    assert_int_equal(smc_ring_stride(&layouts[1]), 8064);
    assert_int_equal(smc_ring_stride(&layouts[2]), 64);
    for (uint32_t row = 0; row < 4; row++)
        assert_int_equal(smc_ring_base(layouts, 4, row), expected_side[row]);
    /* Subgroup 2's rings: after subgroup 0's in member 0, after subgroup
     * 1's in member 2. */
    assert_int_equal(smc_ring_base(layouts, 2, 0), 896);
    assert_int_equal(smc_ring_base(layouts, 2, 2), 16128);

    /* Member 2 sends in subgroup 2: its ring is at 16128 locally and it
     * pushes to 896 in member 0's region. */
    struct sst_engine *engine = recording_engine(false);
    struct smc_options options = {
        .batching = true, .null_sends = true, .deliver = no_delivery, .deliver_ctx = NULL};
    struct smc_group *group = NULL;
    assert_int_equal(smc_group_create(engine, layouts, 4, 4, 2, &options, &group), 0);
    const struct smc_subgroup *sub = &group->subgroups[2];
    assert_int_equal(sub->ring_at[0], 16128);
    assert_int_equal(sub->num_peers, 1);
    assert_int_equal(sub->peers[0], 0);
    assert_int_equal(sub->ring_at_peer[0], 896);
    assert_ptr_equal(smc_ring(group, sub, 0), sst_side(group->table) + 16128);
    /* Subgroup 1: member 2 is sender rank 0, member 1 (its peer) rank 1;
     * subgroup 1's rings start at 896 in member 1. */
    assert_int_equal(group->subgroups[1].ring_at[0], 0);
    assert_int_equal(group->subgroups[1].ring_at[1], 8064);
    assert_int_equal(group->subgroups[1].ring_at_peer[0], 896);
    smc_group_destroy(group);
    sst_engine_destroy(engine);
}

/* On shm (4 KiB slices), a member's side region holds one page-aligned
 * slice per writer: a stagger of writer x 1088 bytes (SMC_RING_STAGGER),
 * the writer's rings in the subgroups both share, then its point-to-point
 * ring to the member. Worked by hand for the four layouts (point-to-point
 * rings of 65792 bytes):
 *   member 0: writer 0: 0 + 448 + 65792, writer 1: 1088 + 448 + 65792,
 *             writer 2: 2176 + 64 + 65792, writer 3: 3264 + 65792; each
 *             17 pages (69632).
 *   member 2: writer 0: 69632; writer 1: 1088 + 8064 + 65792 -> 77824;
 *             writer 2: 2176 + 8064 + 64 + 65792 -> 77824; writer 3: 69632.
 * Then the member's own four outgoing staging rings. */
static void test_sliced_layout_gives_each_writer_its_own_pages(void **state)
{
    (void)state;
    struct smc_layout layouts[4];
    four_layouts(layouts);
    struct smc_side_shape shape = {layouts, 4, 4, 4096, p2p_ring};
    assert_int_equal(p2p_ring, 65792);
    assert_int_equal(SMC_RING_STAGGER, 1088);
    assert_int_equal(smc_side_ring(&shape, 0, 0, 0), 0);
    assert_int_equal(smc_side_ring(&shape, 0, 1, 0), 69632 + 1088);
    assert_int_equal(smc_side_ring(&shape, 2, 0, 0), 2 * 69632 + 2176);
    assert_int_equal(smc_side_p2p_in(&shape, 2, 0), 2 * 69632 + 2176 + 64);
    assert_int_equal(smc_side_p2p_out(&shape, 0, 0), 4 * 69632);
    assert_int_equal(smc_side_size(&shape, 0), 4 * 69632 + 4 * p2p_ring);
    assert_int_equal(smc_side_ring(&shape, 1, 1, 2), 69632 + 1088);
    assert_int_equal(smc_side_ring(&shape, 1, 0, 2), 69632 + 77824 + 2176);
    assert_int_equal(smc_side_ring(&shape, 2, 0, 2), 69632 + 77824 + 2176 + 8064);
    assert_int_equal(smc_side_size(&shape, 2), 2 * 69632 + 2 * 77824 + 4 * p2p_ring);
    uint64_t offset, length;
    smc_side_slice(&shape, 2, 2, &offset, &length);
    assert_int_equal(offset, 69632 + 77824);
    assert_int_equal(length, 77824);

    /* Everywhere: slices are page-aligned, do not overlap, and hold every
     * ring their writer writes to that member, and no one else's. */
    for (uint32_t row = 0; row < 4; row++) {
        uint64_t end = 0;
        for (uint32_t writer = 0; writer < 4; writer++) {
            smc_side_slice(&shape, writer, row, &offset, &length);
            assert_int_equal(offset % 4096, 0);
            assert_int_equal(length % 4096, 0);
            assert_int_equal(offset, end);
            end = offset + length;
            uint64_t in = smc_side_p2p_in(&shape, writer, row);
            assert_true(in >= offset && in + p2p_ring <= end);
            for (uint32_t g = 0; g < 4; g++)
                for (uint32_t s = 0; s < layouts[g].num_senders; s++) {
                    bool member = layouts[g].members[0] == row || layouts[g].members[1] == row ||
                                  layouts[g].num_members == 4;
                    if (!member)
                        continue;
                    uint64_t ring = smc_side_ring(&shape, g, s, row);
                    bool inside = ring >= offset && ring < end;
                    assert_true(inside == (layouts[g].senders[s] == writer));
                    if (inside)
                        assert_true(ring + smc_ring_stride(&layouts[g]) <= end);
                }
        }
        assert_int_equal(smc_side_p2p_out(&shape, 0, row), end);
    }

    /* A group built on shm's alignment places its rings so. */
    struct sst_engine *engine = recording_engine_aligned(false, 4096);
    struct smc_options options = {
        .batching = true, .null_sends = true, .deliver = no_delivery, .deliver_ctx = NULL};
    struct smc_group *group = NULL;
    assert_int_equal(smc_group_create(engine, layouts, 4, 4, 2, &options, &group), 0);
    assert_int_equal(smc_group_table(group)->side_size, smc_side_size(&shape, 2));
    assert_int_equal(group->subgroups[2].ring_at[0], 69632 + 77824 + 2176 + 8064);
    assert_int_equal(group->subgroups[2].ring_at_peer[0], 2 * 69632 + 2176);
    assert_int_equal(group->subgroups[1].ring_at[1], 69632 + 1088);
    assert_int_equal(group->p2p.at_peer[0], 2 * 69632 + 2176 + 64);
    assert_int_equal(group->p2p.in_at[3], 69632 + 2 * 77824 + 3264);
    smc_group_destroy(group);
    sst_engine_destroy(engine);
}

/* Slices start on pages, so without the stagger slot k of every sender
 * would lie at one page offset, on the same cache sets. Three members all
 * sending 1 KB messages, window 100 (the throughput benchmark's shape):
 * in every member's side region, slot k of two senders are at least one
 * slot apart modulo the page. */
static void test_sliced_rings_of_different_writers_do_not_alias(void **state)
{
    (void)state;
    struct smc_layout layout = {.num_members = 3,
                                .members = {0, 1, 2},
                                .num_senders = 3,
                                .senders = {0, 1, 2},
                                .window_size = 100,
                                .max_payload = 1024,
                                .mode = SPINDLE_MODE_ATOMIC};
    struct smc_side_shape shape = {&layout, 1, 3, 4096, p2p_ring};
    const uint64_t slot = SMC_HEADER_SIZE + 1024;
    for (uint32_t row = 0; row < 3; row++)
        for (uint32_t a = 0; a < 3; a++)
            for (uint32_t b = a + 1; b < 3; b++) {
                uint64_t apart =
                    (smc_side_ring(&shape, 0, b, row) - smc_side_ring(&shape, 0, a, row)) % 4096;
                assert_true(apart >= slot && 4096 - apart >= slot);
            }
}

/* Each member allocates exactly the rings of its own subgroups, then the
 * point-to-point rings, in one non-pinned side region. */
static void test_rings_are_allocated_only_for_own_subgroups(void **state)
{
    (void)state;
    struct smc_layout layouts[4];
    four_layouts(layouts);
    struct smc_options options = {
        .batching = true, .null_sends = true, .deliver = no_delivery, .deliver_ctx = NULL};
    for (uint32_t row = 0; row < 4; row++) {
        struct sst_engine *engine = recording_engine(false);
        struct smc_group *group = NULL;
        assert_int_equal(smc_group_create(engine, layouts, 4, 4, row, &options, &group), 0);
        struct sst_table *table = smc_group_table(group);
        assert_int_equal(table->side_size, expected_side[row] + P2P_SIDE);
        assert_int_equal(group->p2p.in_at[0], expected_side[row]);
        assert_int_equal(group->p2p.out_base, expected_side[row] + P2P_SIDE / 2);
        struct sst_member_desc desc;
        assert_int_equal(smc_group_export(group, &desc), 0);
        /* The table: pinned, remotely writable, only counters per row (a
         * row a slice-aligned stride from the next). */
        assert_true(num_regions >= 1);
        assert_int_equal(regions[0].flags, TP_MR_REMOTE_WRITE);
        assert_true(table->schema->row_size < 1024);
        assert_int_equal(regions[0].length, 4 * (size_t)table->row_stride);
        assert_int_equal(num_regions, 2);
        assert_int_equal(regions[1].length, expected_side[row] + P2P_SIDE);
        assert_int_equal(regions[1].flags, TP_MR_REMOTE_WRITE | TP_MR_NONPINNED);
        assert_non_null(sst_side(table));
        assert_true(desc.side.len > 0);
        smc_group_destroy(group);
        /* Retiring the table deregisters and frees both regions. */
        for (unsigned i = 0; i < num_regions; i++)
            assert_true(regions[i].freed);
        sst_engine_destroy(engine);
    }
}

/* The engine reports the transport's pinned figure: the table alone when
 * the rings can be paged on demand, table and rings otherwise. */
static void test_pinned_bytes_follow_the_transport(void **state)
{
    (void)state;
    struct smc_layout layouts[4];
    four_layouts(layouts);
    struct smc_options options = {
        .batching = true, .null_sends = true, .deliver = no_delivery, .deliver_ctx = NULL};
    for (int odp = 0; odp <= 1; odp++) {
        struct sst_engine *engine = recording_engine(odp != 0);
        struct smc_group *group = NULL;
        assert_int_equal(smc_group_create(engine, layouts, 4, 4, 1, &options, &group), 0);
        assert_int_equal(num_regions, 2);
        uint64_t table_bytes = regions[0].length;
        uint64_t expected = odp ? table_bytes : table_bytes + expected_side[1] + P2P_SIDE;
        struct sst_engine_stats stats;
        sst_engine_stats(engine, &stats);
        assert_int_equal(stats.pinned_bytes, expected);
        assert_int_equal(pinned_bytes, expected);
        smc_group_destroy(group);
        sst_engine_stats(engine, &stats);
        assert_int_equal(stats.pinned_bytes, 0);
        sst_engine_destroy(engine);
    }
}

/* Through the public API on shm: memfd pages are never pinned, so the
 * figure is 0, and it is the transport's own. */
static void test_group_stats_report_the_transports_pinned_bytes(void **state)
{
    (void)state;
    char dir[] = "/tmp/spindle-rings-XXXXXX";
    assert_non_null(mkdtemp(dir));
    struct spindle_group_options options;
    spindle_group_options_init(&options);
    options.bootstrap = dir;
    uint32_t self = 0;
    struct spindle_subgroup_config sg = {&self, 1, &self, 1, 16, 64, SPINDLE_MODE_ATOMIC};
    spindle_group_t *group = NULL;
    assert_int_equal(spindle_group_create(&options, &sg, 1, &group), 0);
    struct spindle_stats stats;
    memset(&stats, 0xff, sizeof stats);
    assert_int_equal(spindle_group_stats(group, &stats), 0);
    struct tp_stats transport;
    memset(&transport, 0, sizeof transport);
    struct sst_engine *engine = group->membership.engine;
    tp_stats(engine->endpoint, &transport);
    assert_int_equal(stats.pinned_bytes, transport.pinned_bytes);
    assert_int_equal(stats.pinned_bytes, 0);
    assert_int_equal(spindle_group_shutdown(group, 5000), 0);
    spindle_group_destroy(group);
    char cleanup[64];
    snprintf(cleanup, sizeof cleanup, "rm -rf %s", dir);
    assert_int_equal(system(cleanup), 0);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_slot_headers_name_positions_across_the_40_bit_wrap),
        cmocka_unit_test(test_ring_layout_is_the_same_function_everywhere),
        cmocka_unit_test(test_sliced_layout_gives_each_writer_its_own_pages),
        cmocka_unit_test(test_sliced_rings_of_different_writers_do_not_alias),
        cmocka_unit_test(test_rings_are_allocated_only_for_own_subgroups),
        cmocka_unit_test(test_pinned_bytes_follow_the_transport),
        cmocka_unit_test(test_group_stats_report_the_transports_pinned_bytes),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
