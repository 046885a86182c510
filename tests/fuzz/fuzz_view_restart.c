/*
 * libFuzzer target: view_wire_decode_restart (src/view/view_wire.c), the
 * status a restarting member (or a member of the restarted group) sends in
 * a total restart; the election decides on it (view_restart_decide). An
 * accepted status must have a member id and a vote below 64, known flags,
 * 1..64 distinct members, a latest view with a view after it, ends in
 * increasing subgroup order none after the latest view; it must re-encode
 * to the input and decode again to the same struct, and the election must
 * take it without going out of bounds, and as a restart point it must
 * hold every subgroup its own ends hold; its sources (only in a running
 * restart point) must name members of its latest view, in subgroup order,
 * at points not after the latest view. The same input is also decoded as
 * a fetch of a subgroup's history (VIEW_WIRE_RESTART_FETCH): an accepted
 * one must have an asker below 64, a subgroup below the limit, a next view
 * and a point not after the latest view (+ 1) and re-encode to the input.
 * And as a slice of a fetch's answer (VIEW_WIRE_RESTART_SLICE): an
 * accepted one must lie within its total, be marked last exactly at the
 * total and re-encode to the input; the asker's check
 * (view_restart_slices_take) must take it as a first slice only at offset
 * 0, then only when it is the whole stream with its checksum, and refuse
 * it again after (state unchanged). A refused one must be SPINDLE_EPROTO
 * naming the offset.
 */
#include "fuzz_common.h"
#include "util/crc32c.h"
#include "view/view_impl.h"

static struct view_restart_status status, again;
static struct view_restart_round round_;
static uint8_t bytes[VIEW_WIRE_RESTART_SIZE(SPINDLE_MAX_SUBGROUPS)];

static void fetch(const uint8_t *data, size_t size)
{
    struct view_restart_fetch f, back;
    int rc = view_wire_decode_restart_fetch(data, size, &f);
    if (rc != 0) {
        fuzz_check_wire_refusal(rc, "restart fetch");
        return;
    }
    FUZZ_CHECK(f.asker < SPINDLE_MAX_MEMBERS && f.subgroup < SPINDLE_MAX_SUBGROUPS);
    FUZZ_CHECK(f.latest_view < UINT64_MAX && f.next_view <= f.latest_view + 1);
    FUZZ_CHECK(f.view_id <= f.latest_view);
    uint8_t out[VIEW_WIRE_RESTART_FETCH_SIZE];
    size_t len = view_wire_encode_restart_fetch(&f, out, sizeof out);
    FUZZ_CHECK(len == VIEW_WIRE_RESTART_FETCH_SIZE);
    fuzz_check_same_bytes(data, size, out, len);
    FUZZ_CHECK(view_wire_decode_restart_fetch(out, len, &back) == 0);
    FUZZ_CHECK(memcmp(&back, &f, sizeof f) == 0);
}

static void slice(const uint8_t *data, size_t size)
{
    struct view_restart_slice sl, back;
    int rc = view_wire_decode_restart_slice(data, size, &sl);
    if (rc != 0) {
        fuzz_check_wire_refusal(rc, "restart slice");
        return;
    }
    FUZZ_CHECK(sl.total >= 1 && sl.offset < sl.total && sl.length >= 1 &&
               sl.length <= VIEW_RESTART_SLICE_MAX && sl.length <= sl.total - sl.offset);
    bool ends = sl.offset + sl.length == sl.total;
    FUZZ_CHECK(sl.flags == (ends ? VIEW_RESTART_SLICE_LAST : 0u));
    FUZZ_CHECK(sl.bytes == data + VIEW_WIRE_RESTART_SLICE_HEADER_SIZE);
    FUZZ_CHECK(size == VIEW_WIRE_RESTART_SLICE_HEADER_SIZE + sl.length);
    uint8_t *out = malloc(size);
    FUZZ_CHECK(out != NULL);
    size_t len = view_wire_encode_restart_slice(&sl, out, size);
    fuzz_check_same_bytes(data, size, out, len);
    FUZZ_CHECK(view_wire_decode_restart_slice(out, len, &back) == 0);
    FUZZ_CHECK(back.total == sl.total && back.offset == sl.offset && back.length == sl.length &&
               back.flags == sl.flags && back.checksum == sl.checksum);
    free(out);
    struct view_restart_slices taken = {0};
    rc = view_restart_slices_take(&taken, &sl, "fuzz");
    bool whole = sl.offset == 0 && ends && sp_crc32c(0, sl.bytes, sl.length) == sl.checksum;
    FUZZ_CHECK((rc == 0) == (sl.offset == 0 && (!ends || whole)));
    if (rc != 0) {
        FUZZ_CHECK(rc == SPINDLE_EPROTO && taken.have == 0 && taken.count == 0);
        return;
    }
    FUZZ_CHECK(taken.have == sl.length && taken.count == 1 && taken.done == ends);
    struct view_restart_slices before = taken;
    FUZZ_CHECK(view_restart_slices_take(&taken, &sl, "fuzz") == SPINDLE_EPROTO);
    FUZZ_CHECK(memcmp(&before, &taken, sizeof taken) == 0);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    fetch(data, size);
    slice(data, size);
    int rc = view_wire_decode_restart(data, size, &status);
    if (rc != 0) {
        fuzz_check_wire_refusal(rc, "restart status");
        return 0;
    }
    FUZZ_CHECK(status.id < SPINDLE_MAX_MEMBERS && status.vote < SPINDLE_MAX_MEMBERS);
    FUZZ_CHECK(status.num_members >= 1 && status.num_members <= SPINDLE_MAX_MEMBERS);
    uint64_t seen = 0;
    for (uint32_t i = 0; i < status.num_members; i++) {
        FUZZ_CHECK(status.members[i] < SPINDLE_MAX_MEMBERS &&
                   ((seen >> status.members[i]) & 1) == 0);
        seen |= 1ull << status.members[i];
    }
    FUZZ_CHECK(status.ends.count <= SPINDLE_MAX_SUBGROUPS);
    FUZZ_CHECK(status.ends.next_view <= status.latest_view + 1);
    for (uint32_t i = 0; i < status.ends.count; i++)
        FUZZ_CHECK(status.ends.ends[i].view_id <= status.latest_view);
    FUZZ_CHECK(status.num_sources <= SPINDLE_MAX_SUBGROUPS);
    FUZZ_CHECK(status.num_sources == 0 ||
               (status.flags & (VIEW_RESTART_RUNNING | VIEW_RESTART_ENDS)) ==
                   (VIEW_RESTART_RUNNING | VIEW_RESTART_ENDS));
    for (uint32_t i = 0; i < status.num_sources; i++) {
        const struct view_restart_source *source = &status.sources[i];
        FUZZ_CHECK(source->subgroup < SPINDLE_MAX_SUBGROUPS &&
                   (i == 0 || source->subgroup > status.sources[i - 1].subgroup));
        FUZZ_CHECK(source->id < SPINDLE_MAX_MEMBERS && ((seen >> source->id) & 1) != 0);
        FUZZ_CHECK(source->view_id <= status.latest_view);
    }
    size_t len = view_wire_encode_restart(&status, bytes, sizeof bytes);
    FUZZ_CHECK(len == VIEW_WIRE_RESTART_BYTES(status.ends.count, status.num_sources));
    fuzz_check_same_bytes(data, size, bytes, len);
    FUZZ_CHECK(view_wire_decode_restart(bytes, len, &again) == 0);
    FUZZ_CHECK(memcmp(&again, &status, sizeof status) == 0);
    /* The election over it, heard by a member other than it. */
    memset(&round_, 0, sizeof round_);
    round_.mine = status;
    round_.mine.id = round_.mine.vote = (status.id + 1) % SPINDLE_MAX_MEMBERS;
    round_.mine.flags = 0;
    round_.peers[status.id] = status;
    round_.heard = 1ull << status.id;
    struct view_restart_decision d;
    view_restart_decide(&round_, &d);
    FUZZ_CHECK(d.vote < SPINDLE_MAX_MEMBERS && d.voters <= d.num_latest);
    FUZZ_CHECK(d.action != VIEW_RESTART_FOLLOW || d.follow == status.id);
    /* As a restart point, its own log is not refused. */
    static struct view_restart r;
    memset(&r, 0, sizeof r);
    r.running = status;
    FUZZ_CHECK(view_restart_check_subgroups(&r, &status.ends, status.id, "its log") == 0);
    return 0;
}
