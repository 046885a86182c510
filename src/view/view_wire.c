/* The membership protocol's messages in the wire codec (view/view_wire.h). */
#include "view/view_wire.h"

#include <inttypes.h>
#include <string.h>

#include "util/error.h"
#include "util/name.h"

#define HOST_WIDTH (CTL_HOST_MAX - 1)
#define WHY_WIDTH  (VIEW_WHY_MAX - 1)
#define NAME_WIDTH (VIEW_NAME_MAX - 1)

/* ---- shared pieces ----------------------------------------------------- */

static void put_address(struct wire_writer *w, const struct ctl_address *address)
{
    wire_put_string(w, address->host, HOST_WIDTH);
    wire_put_u16(w, address->port);
}

/* An address that must name a host and a port. */
static void get_address(struct wire_reader *r, struct ctl_address *out, const char *field)
{
    memset(out, 0, sizeof *out);
    wire_get_string(r, out->host, sizeof out->host, HOST_WIDTH, field);
    out->port = wire_get_u16(r, field);
    if (r->rc == 0 && (out->host[0] == '\0' || out->port == 0))
        wire_fail(r, "%s '%s:%u' needs a host and a port", field, out->host, out->port);
}

static void put_identity(struct wire_writer *w, const struct spindle_member_identity *identity)
{
    wire_put_string(w, identity->name, SPINDLE_MEMBER_NAME_MAX - 1);
    wire_put_u64(w, identity->incarnation);
}

/* An identity: a valid name (sp_check_name) and a non-zero incarnation. */
static void get_identity(struct wire_reader *r, struct spindle_member_identity *out,
                         const char *field)
{
    memset(out, 0, sizeof *out);
    wire_get_string(r, out->name, sizeof out->name, SPINDLE_MEMBER_NAME_MAX - 1, field);
    if (r->rc == 0 && sp_check_name(out->name, field) < 0) {
        r->pos -= 2u + (SPINDLE_MEMBER_NAME_MAX - 1);
        wire_fail(r, "%s", spindle_errmsg());
    }
    out->incarnation = wire_get_u64(r, "incarnation");
    if (r->rc == 0 && out->incarnation == 0) {
        r->pos -= 8;
        wire_fail(r, "%s '%s' has incarnation 0", field, out->name);
    }
}

/* A list of up to SST_MAX_ROWS ids in a fixed array; unused entries zero. */
static void put_rows(struct wire_writer *w, const uint32_t *rows, uint32_t count)
{
    wire_put_u32(w, count);
    for (uint32_t i = 0; i < SST_MAX_ROWS; i++)
        wire_put_u32(w, i < count ? rows[i] : 0);
}

static uint32_t get_rows(struct wire_reader *r, uint32_t *rows, const char *field)
{
    uint32_t count = wire_get_u32(r, field);
    if (r->rc == 0 && count > SST_MAX_ROWS) {
        wire_fail(r, "%s count %u exceeds %u", field, count, SST_MAX_ROWS);
        return 0;
    }
    for (uint32_t i = 0; i < SST_MAX_ROWS; i++) {
        uint32_t value = wire_get_u32(r, field);
        if (i < count)
            rows[i] = value;
        else if (r->rc == 0 && value != 0)
            wire_fail(r, "unused %s entry %u is %u, not 0", field, i, value);
    }
    return r->rc == 0 ? count : 0;
}

static void put_layout(struct wire_writer *w, const struct smc_layout *layout)
{
    put_rows(w, layout->members, layout->num_members);
    put_rows(w, layout->senders, layout->num_senders);
    wire_put_u32(w, layout->window_size);
    wire_put_u32(w, layout->max_payload);
    wire_put_u32(w, (uint32_t)layout->mode);
}

/* A layout, checked by smc_layout_validate against a view of num_rows. */
static void get_layout(struct wire_reader *r, struct smc_layout *out, uint32_t index,
                       uint32_t num_rows)
{
    memset(out, 0, sizeof *out);
    out->num_members = get_rows(r, out->members, "subgroup members");
    out->num_senders = get_rows(r, out->senders, "subgroup senders");
    out->window_size = wire_get_u32(r, "window_size");
    out->max_payload = wire_get_u32(r, "max_payload");
    uint32_t mode = wire_get_u32(r, "mode");
    out->mode = mode == SPINDLE_MODE_UNORDERED ? SPINDLE_MODE_UNORDERED : SPINDLE_MODE_ATOMIC;
    if (r->rc == 0 && mode > SPINDLE_MODE_UNORDERED)
        wire_fail(r, "subgroup %u: mode %u is unknown", index, mode);
    if (r->rc == 0 && smc_layout_validate(out, index, num_rows) < 0)
        wire_fail(r, "%s", spindle_errmsg());
}

/* An error code a peer may send: 0 (when allowed) or a SPINDLE_E* code. */
static int32_t get_error(struct wire_reader *r, bool zero_allowed)
{
    int32_t error = wire_get_i32(r, "error");
    if (r->rc == 0 && (error > 0 || error < SPINDLE_ERROR_MIN || (!zero_allowed && error == 0)))
        wire_fail(r, "error code %d is not a libspindle error", error);
    return error;
}

static size_t finish_encode(const struct wire_writer *w)
{
    return w->pos;
}

/* ---- start, ready, blob, commit ---------------------------------------- */

size_t view_wire_encode_desc(const struct view_start_desc *desc, uint8_t *buf, size_t cap)
{
    struct wire_writer w;
    wire_writer_init(&w, buf, cap);
    wire_put_header(&w, VIEW_WIRE_DESC);
    sst_desc_encode(&w, &desc->desc);
    put_identity(&w, &desc->identity);
    return finish_encode(&w);
}

int view_wire_decode_desc(const uint8_t *buf, size_t len, struct view_start_desc *out)
{
    struct wire_reader r;
    wire_reader_init(&r, buf, len, "table descriptor");
    wire_get_header(&r, VIEW_WIRE_DESC);
    sst_desc_decode(&r, &out->desc);
    get_identity(&r, &out->identity, "member");
    return wire_finish(&r);
}

size_t view_wire_encode_ready(uint64_t view_id, uint8_t *buf, size_t cap)
{
    struct wire_writer w;
    wire_writer_init(&w, buf, cap);
    wire_put_header(&w, VIEW_WIRE_READY);
    wire_put_u64(&w, view_id);
    return finish_encode(&w);
}

int view_wire_decode_ready(const uint8_t *buf, size_t len, uint64_t *view_id)
{
    struct wire_reader r;
    wire_reader_init(&r, buf, len, "ready");
    wire_get_header(&r, VIEW_WIRE_READY);
    *view_id = wire_get_u64(&r, "view id");
    return wire_finish(&r);
}

size_t view_wire_blob_size(uint32_t num_subgroups)
{
    return WIRE_HEADER_SIZE + 24u + SST_DESC_WIRE_SIZE + (size_t)num_subgroups * SST_MAX_ROWS * 8u;
}

size_t view_wire_encode_blob(const struct view_blob *blob, uint8_t *buf, size_t cap)
{
    struct wire_writer w;
    wire_writer_init(&w, buf, cap);
    wire_put_header(&w, VIEW_WIRE_BLOB);
    wire_put_u64(&w, blob->view_id);
    wire_put_u64(&w, blob->suspected);
    wire_put_u32(&w, blob->joiner);
    wire_put_u32(&w, blob->num_subgroups);
    sst_desc_encode(&w, &blob->desc);
    for (size_t i = 0; i < (size_t)blob->num_subgroups * SST_MAX_ROWS; i++)
        wire_put_u64(&w, blob->counts[i]);
    return finish_encode(&w);
}

int view_wire_decode_blob(const uint8_t *buf, size_t len, uint32_t num_subgroups,
                          struct view_blob *out)
{
    struct wire_reader r;
    wire_reader_init(&r, buf, len, "view blob");
    wire_get_header(&r, VIEW_WIRE_BLOB);
    out->view_id = wire_get_u64(&r, "view id");
    out->suspected = wire_get_u64(&r, "suspected rows");
    out->joiner = wire_get_u32(&r, "joiner");
    out->num_subgroups = wire_get_u32(&r, "subgroup count");
    if (r.rc == 0 && out->num_subgroups != num_subgroups)
        wire_fail(&r, "subgroup count %u, the group has %u", out->num_subgroups, num_subgroups);
    if (r.rc == 0 && out->joiner != VIEW_NO_JOINER && out->joiner >= SST_MAX_ROWS)
        wire_fail(&r, "joiner id %u is not a member id", out->joiner);
    sst_desc_decode(&r, &out->desc);
    for (size_t i = 0; i < (size_t)num_subgroups * SST_MAX_ROWS && r.rc == 0; i++)
        out->counts[i] = wire_get_u64(&r, "received count");
    return wire_finish(&r);
}

size_t view_wire_encode_commit(const struct view_commit *commit, uint8_t *buf, size_t cap)
{
    struct wire_writer w;
    wire_writer_init(&w, buf, cap);
    wire_put_header(&w, VIEW_WIRE_COMMIT);
    wire_put_u64(&w, commit->view_id);
    wire_put_u64(&w, commit->suspected);
    wire_put_u32(&w, commit->joiner);
    wire_put_zero(&w, 4);
    return finish_encode(&w);
}

int view_wire_decode_commit(const uint8_t *buf, size_t len, struct view_commit *out)
{
    struct wire_reader r;
    wire_reader_init(&r, buf, len, "view commitment");
    wire_get_header(&r, VIEW_WIRE_COMMIT);
    out->view_id = wire_get_u64(&r, "view id");
    out->suspected = wire_get_u64(&r, "suspected rows");
    out->joiner = wire_get_u32(&r, "joiner");
    wire_get_zero(&r, 4, "reserved");
    return wire_finish(&r);
}

size_t view_wire_encode_suspect(const struct view_suspect *suspect, uint8_t *buf, size_t cap)
{
    struct wire_writer w;
    wire_writer_init(&w, buf, cap);
    wire_put_header(&w, VIEW_WIRE_SUSPECT);
    wire_put_u64(&w, suspect->view_id);
    wire_put_u64(&w, suspect->suspected);
    return finish_encode(&w);
}

int view_wire_decode_suspect(const uint8_t *buf, size_t len, struct view_suspect *out)
{
    struct wire_reader r;
    wire_reader_init(&r, buf, len, "suspicion");
    wire_get_header(&r, VIEW_WIRE_SUSPECT);
    out->view_id = wire_get_u64(&r, "view id");
    out->suspected = wire_get_u64(&r, "suspected rows");
    if (r.rc == 0 && out->suspected == 0) {
        r.pos -= 8;
        wire_fail(&r, "a suspicion of no rows");
    }
    return wire_finish(&r);
}

/* ---- joins --------------------------------------------------------------- */

size_t view_wire_encode_join_request(const struct view_join_request *request, uint8_t *buf,
                                     size_t cap)
{
    struct wire_writer w;
    wire_writer_init(&w, buf, cap);
    wire_put_header(&w, VIEW_WIRE_JOIN_REQUEST);
    put_address(&w, &request->address);
    put_identity(&w, &request->identity);
    wire_put_u32(&w, request->flags);
    uint32_t count = request->num_subgroups < VIEW_JOIN_MAX_SUBGROUPS ? request->num_subgroups
                                                                      : VIEW_JOIN_MAX_SUBGROUPS;
    wire_put_u32(&w, count);
    for (uint32_t g = 0; g < count; g++) {
        wire_put_u32(&w, request->subgroups[g].window_size);
        wire_put_u32(&w, request->subgroups[g].max_payload);
        wire_put_u32(&w, request->subgroups[g].mode);
    }
    if ((request->flags & VIEW_JOIN_RESTART) != 0)
        wire_put_u32(&w, request->restart_id);
    return finish_encode(&w);
}

int view_wire_decode_join_request(const uint8_t *buf, size_t len, struct view_join_request *out)
{
    struct wire_reader r;
    wire_reader_init(&r, buf, len, "join request");
    memset(out, 0, sizeof *out);
    wire_get_header(&r, VIEW_WIRE_JOIN_REQUEST);
    get_address(&r, &out->address, "joiner address");
    get_identity(&r, &out->identity, "joiner");
    out->flags = wire_get_u32(&r, "flags");
    if (r.rc == 0 &&
        (out->flags & ~(VIEW_JOIN_TIE_BREAKER | VIEW_JOIN_CATCHUP | VIEW_JOIN_RESTART)) != 0) {
        r.pos -= 4;
        wire_fail(&r, "flags 0x%x name unknown settings", out->flags);
    }
    uint32_t count = wire_get_u32(&r, "subgroup count");
    if (r.rc == 0 && (count == 0 || count > VIEW_JOIN_MAX_SUBGROUPS))
        wire_fail(&r, "subgroup count %u must be 1..%u", count, VIEW_JOIN_MAX_SUBGROUPS);
    if (r.rc == 0 && wire_left(&r) < (size_t)count * 12u)
        wire_fail(&r, "%u subgroups need %u bytes, %zu left", count, count * 12u, wire_left(&r));
    for (uint32_t g = 0; g < count && r.rc == 0; g++) {
        out->subgroups[g].window_size = wire_get_u32(&r, "window_size");
        out->subgroups[g].max_payload = wire_get_u32(&r, "max_payload");
        out->subgroups[g].mode = wire_get_u32(&r, "mode");
    }
    out->num_subgroups = r.rc == 0 ? count : 0;
    if (r.rc == 0 && (out->flags & VIEW_JOIN_RESTART) != 0) {
        out->restart_id = wire_get_u32(&r, "restart member id");
        if (r.rc == 0 && out->restart_id >= SPINDLE_MAX_MEMBERS) {
            r.pos -= 4;
            wire_fail(&r, "restart member id %u must be below %u", out->restart_id,
                      SPINDLE_MAX_MEMBERS);
        }
    }
    return wire_finish(&r);
}

size_t view_wire_encode_join_offer(const struct view_join_offer *offer, uint8_t *buf, size_t cap)
{
    struct wire_writer w;
    wire_writer_init(&w, buf, cap);
    wire_put_header(&w, VIEW_WIRE_JOIN_OFFER);
    wire_put_u32(&w, offer->kind);
    if (offer->kind == VIEW_OFFER_REFUSE) {
        wire_put_u32(&w, (uint32_t)offer->error);
        wire_put_string(&w, offer->why, WHY_WIDTH);
    } else if (offer->kind == VIEW_OFFER_REDIRECT) {
        put_address(&w, &offer->redirect);
    } else {
        wire_put_string(&w, offer->group_name, NAME_WIDTH);
        wire_put_u32(&w, offer->id);
        wire_put_u32(&w, offer->num_initial);
        wire_put_u32(&w, offer->num_rows);
        wire_put_u32(&w, offer->my_row);
        wire_put_u32(&w, offer->num_subgroups);
        wire_put_u64(&w, offer->view_id);
        wire_put_u64(&w, offer->admission);
        for (uint32_t row = 0; row < offer->num_rows && row < SST_MAX_ROWS; row++) {
            wire_put_u32(&w, offer->member_ids[row]);
            put_address(&w, &offer->addresses[row]);
            put_identity(&w, &offer->identities[row]);
        }
        for (uint32_t g = 0; g < offer->num_subgroups; g++)
            put_layout(&w, &offer->layouts[g]);
    }
    return finish_encode(&w);
}

/* The admission part of an offer: a view the joiner can take on. */
static void get_admission(struct wire_reader *r, struct view_join_offer *out)
{
    wire_get_string(r, out->group_name, sizeof out->group_name, NAME_WIDTH, "group name");
    out->id = wire_get_u32(r, "member id");
    out->num_initial = wire_get_u32(r, "initial member count");
    out->num_rows = wire_get_u32(r, "row count");
    out->my_row = wire_get_u32(r, "joiner row");
    out->num_subgroups = wire_get_u32(r, "subgroup count");
    out->view_id = wire_get_u64(r, "view id");
    out->admission = wire_get_u64(r, "admission");
    if (r->rc < 0)
        return;
    if (out->num_rows == 0 || out->num_rows > SST_MAX_ROWS || out->my_row != out->num_rows - 1 ||
        out->num_initial == 0 || out->id >= SST_MAX_ROWS || out->admission == 0) {
        wire_fail(r,
                  "an offer of id %u (initial members %u, admission %llu) at row %u of %u rows "
                  "is not a joiner's place",
                  out->id, out->num_initial, (unsigned long long)out->admission, out->my_row,
                  out->num_rows);
        return;
    }
    if (out->num_subgroups == 0 || out->num_subgroups > VIEW_JOIN_MAX_SUBGROUPS) {
        wire_fail(r, "subgroup count %u must be 1..%u", out->num_subgroups,
                  VIEW_JOIN_MAX_SUBGROUPS);
        return;
    }
    size_t need = (size_t)out->num_rows * (4u + VIEW_WIRE_ADDRESS_SIZE + VIEW_WIRE_IDENTITY_SIZE) +
                  (size_t)out->num_subgroups * VIEW_WIRE_LAYOUT_SIZE;
    if (wire_left(r) < need) {
        wire_fail(r, "%u rows and %u subgroups need %zu bytes, %zu left", out->num_rows,
                  out->num_subgroups, need, wire_left(r));
        return;
    }
    uint64_t seen = 0;
    for (uint32_t row = 0; row < out->num_rows && r->rc == 0; row++) {
        uint32_t id = wire_get_u32(r, "member id");
        if (r->rc == 0 && (id >= SST_MAX_ROWS || ((seen >> id) & 1) != 0))
            wire_fail(r, "row %u: member id %u is out of range or listed twice", row, id);
        seen |= 1ull << (id & 63);
        out->member_ids[row] = id;
        get_address(r, &out->addresses[row], "member address");
        get_identity(r, &out->identities[row], "member");
        for (uint32_t other = 0; other < row && r->rc == 0; other++)
            if (strcmp(out->identities[other].name, out->identities[row].name) == 0)
                wire_fail(r, "rows %u and %u both have the name '%s'", other, row,
                          out->identities[row].name);
    }
    if (r->rc == 0 && out->member_ids[out->my_row] != out->id)
        wire_fail(r, "the joiner's row names member %u, not %u", out->member_ids[out->my_row],
                  out->id);
    for (uint32_t g = 0; g < out->num_subgroups && r->rc == 0; g++)
        get_layout(r, &out->layouts[g], g, out->num_rows);
}

int view_wire_decode_join_offer(const uint8_t *buf, size_t len, struct view_join_offer *out)
{
    struct wire_reader r;
    wire_reader_init(&r, buf, len, "join offer");
    struct smc_layout *layouts = out->layouts;
    memset(out, 0, sizeof *out);
    out->layouts = layouts;
    wire_get_header(&r, VIEW_WIRE_JOIN_OFFER);
    out->kind = wire_get_u32(&r, "kind");
    if (r.rc == 0 && out->kind == VIEW_OFFER_REFUSE) {
        out->error = get_error(&r, false);
        wire_get_string(&r, out->why, sizeof out->why, WHY_WIDTH, "reason");
    } else if (r.rc == 0 && out->kind == VIEW_OFFER_REDIRECT) {
        get_address(&r, &out->redirect, "leader address");
    } else if (r.rc == 0 && out->kind == VIEW_OFFER_ADMIT) {
        get_admission(&r, out);
    } else if (r.rc == 0) {
        wire_fail(&r, "offer kind %u is unknown", out->kind);
    }
    return wire_finish(&r);
}

size_t view_wire_encode_join_desc(const struct view_join_desc *desc, uint8_t *buf, size_t cap)
{
    struct wire_writer w;
    wire_writer_init(&w, buf, cap);
    wire_put_header(&w, VIEW_WIRE_JOIN_DESC);
    wire_put_u64(&w, desc->view_id);
    wire_put_u32(&w, desc->id);
    wire_put_u64(&w, desc->admission);
    sst_desc_encode(&w, &desc->desc);
    return finish_encode(&w);
}

int view_wire_decode_join_desc(const uint8_t *buf, size_t len, struct view_join_desc *out)
{
    struct wire_reader r;
    wire_reader_init(&r, buf, len, "joiner descriptor");
    wire_get_header(&r, VIEW_WIRE_JOIN_DESC);
    out->view_id = wire_get_u64(&r, "view id");
    out->id = wire_get_u32(&r, "member id");
    out->admission = wire_get_u64(&r, "admission");
    sst_desc_decode(&r, &out->desc);
    return wire_finish(&r);
}

size_t view_wire_encode_join_announce(const struct view_join_announce *announce, uint8_t *buf,
                                      size_t cap)
{
    struct wire_writer w;
    wire_writer_init(&w, buf, cap);
    wire_put_header(&w, VIEW_WIRE_JOIN_ANNOUNCE);
    wire_put_u64(&w, announce->view_id);
    wire_put_u32(&w, announce->id);
    put_address(&w, &announce->address);
    put_identity(&w, &announce->identity);
    sst_desc_encode(&w, &announce->desc);
    return finish_encode(&w);
}

int view_wire_decode_join_announce(const uint8_t *buf, size_t len, struct view_join_announce *out)
{
    struct wire_reader r;
    wire_reader_init(&r, buf, len, "join announcement");
    wire_get_header(&r, VIEW_WIRE_JOIN_ANNOUNCE);
    out->view_id = wire_get_u64(&r, "view id");
    out->id = wire_get_u32(&r, "member id");
    if (r.rc == 0 && out->id >= SST_MAX_ROWS)
        wire_fail(&r, "member id %u is out of range", out->id);
    get_address(&r, &out->address, "joiner address");
    get_identity(&r, &out->identity, "joiner");
    sst_desc_decode(&r, &out->desc);
    return wire_finish(&r);
}

size_t view_wire_encode_join_view(const struct view_join_view *view, uint8_t *buf, size_t cap)
{
    struct wire_writer w;
    wire_writer_init(&w, buf, cap);
    wire_put_header(&w, VIEW_WIRE_JOIN_VIEW);
    wire_put_u64(&w, view->view_id);
    wire_put_u32(&w, (uint32_t)view->error);
    wire_put_string(&w, view->why, WHY_WIDTH);
    wire_put_u64(&w, view->state_length);
    wire_put_u32(&w, view->num_skips);
    wire_put_u32(&w, view->num_rows);
    static const struct sst_member_desc none;
    for (uint32_t row = 0; row < SST_MAX_ROWS; row++)
        sst_desc_encode(&w, row < view->num_rows ? &view->descs[row] : &none);
    return finish_encode(&w);
}

int view_wire_decode_join_view(const uint8_t *buf, size_t len, struct view_join_view *out)
{
    struct wire_reader r;
    wire_reader_init(&r, buf, len, "joiner's view");
    memset(out, 0, sizeof *out);
    wire_get_header(&r, VIEW_WIRE_JOIN_VIEW);
    out->view_id = wire_get_u64(&r, "view id");
    out->error = get_error(&r, true);
    wire_get_string(&r, out->why, sizeof out->why, WHY_WIDTH, "reason");
    out->state_length = wire_get_u64(&r, "state length");
    out->num_skips = wire_get_u32(&r, "skip count");
    out->num_rows = wire_get_u32(&r, "row count");
    if (r.rc == 0 && out->num_skips > VIEW_JOIN_MAX_SKIPS)
        wire_fail(&r, "%u skip entries exceed %u", out->num_skips, VIEW_JOIN_MAX_SKIPS);
    if (r.rc == 0 && out->error < 0 && (out->num_skips | out->state_length) != 0)
        wire_fail(&r, "a dropped join carries no state and no skips");
    if (r.rc == 0 && (out->num_rows > SST_MAX_ROWS || (out->error == 0 && out->num_rows == 0)))
        wire_fail(&r, "row count %u must be 1..%u", out->num_rows, SST_MAX_ROWS);
    for (uint32_t row = 0; row < SST_MAX_ROWS && r.rc == 0; row++) {
        struct sst_member_desc desc;
        sst_desc_decode(&r, &desc);
        if (row < out->num_rows)
            out->descs[row] = desc;
        else if (r.rc == 0 && (desc.address.len | desc.region.len | desc.side.len) != 0)
            wire_fail(&r, "unused descriptor %u is not empty", row);
    }
    return wire_finish(&r);
}

size_t view_wire_encode_join_skips(const struct view_join_skips *skips, uint8_t *buf, size_t cap)
{
    struct wire_writer w;
    wire_writer_init(&w, buf, cap);
    wire_put_header(&w, VIEW_WIRE_JOIN_SKIPS);
    wire_put_u64(&w, skips->view_id);
    wire_put_u32(&w, skips->num_skips);
    for (uint32_t i = 0; i < skips->num_skips && i < VIEW_JOIN_MAX_SKIPS; i++) {
        wire_put_u32(&w, skips->skips[i].subgroup);
        wire_put_u32(&w, skips->skips[i].sender);
        wire_put_u64(&w, skips->skips[i].count);
    }
    return finish_encode(&w);
}

int view_wire_decode_join_skips(const uint8_t *buf, size_t len, struct view_join_skips *out)
{
    struct wire_reader r;
    wire_reader_init(&r, buf, len, "joiner's skips");
    wire_get_header(&r, VIEW_WIRE_JOIN_SKIPS);
    out->view_id = wire_get_u64(&r, "view id");
    out->num_skips = wire_get_u32(&r, "skip count");
    if (r.rc == 0 && (out->num_skips == 0 || out->num_skips > VIEW_JOIN_MAX_SKIPS))
        wire_fail(&r, "skip count %u must be 1..%u", out->num_skips, VIEW_JOIN_MAX_SKIPS);
    for (uint32_t i = 0; i < out->num_skips && r.rc == 0; i++) {
        struct view_join_skip *skip = &out->skips[i];
        skip->subgroup = wire_get_u32(&r, "subgroup");
        skip->sender = wire_get_u32(&r, "sender");
        skip->count = wire_get_u64(&r, "skip");
        uint64_t key = ((uint64_t)skip->subgroup << 32) | skip->sender;
        uint64_t before =
            i == 0 ? 0 : ((uint64_t)out->skips[i - 1].subgroup << 32) | out->skips[i - 1].sender;
        if (r.rc == 0 && (skip->subgroup >= SPINDLE_MAX_SUBGROUPS || skip->sender >= SST_MAX_ROWS))
            wire_fail(&r, "skip %u names subgroup %u sender %u, beyond %u subgroups of %u senders",
                      i, skip->subgroup, skip->sender, SPINDLE_MAX_SUBGROUPS, SST_MAX_ROWS);
        else if (r.rc == 0 && i > 0 && key <= before)
            wire_fail(&r, "skip %u (subgroup %u sender %u) is out of order", i, skip->subgroup,
                      skip->sender);
        else if (r.rc == 0 && (skip->count == 0 || skip->count > VIEW_JOIN_SKIP_MAX))
            wire_fail(&r, "skip %u counts %llu resends, not 1..%llu", i,
                      (unsigned long long)skip->count, (unsigned long long)VIEW_JOIN_SKIP_MAX);
    }
    return wire_finish(&r);
}

/* ---- the joiner's state, in chunks ------------------------------------- */

size_t view_wire_encode_join_chunk(const struct view_join_chunk *chunk, uint8_t *buf, size_t cap)
{
    struct wire_writer w;
    wire_writer_init(&w, buf, cap);
    wire_put_header(&w, VIEW_WIRE_JOIN_STATE);
    wire_put_u64(&w, chunk->view_id);
    wire_put_u64(&w, chunk->offset);
    wire_put_u32(&w, chunk->length);
    wire_put_u32(&w, chunk->last ? 1u : 0u);
    wire_put_u32(&w, (uint32_t)chunk->error);
    wire_put_bytes(&w, chunk->data, chunk->length);
    return finish_encode(&w);
}

int view_wire_decode_join_chunk(const uint8_t *buf, size_t len, struct view_join_chunk *out)
{
    struct wire_reader r;
    wire_reader_init(&r, buf, len, "state chunk");
    memset(out, 0, sizeof *out);
    wire_get_header(&r, VIEW_WIRE_JOIN_STATE);
    out->view_id = wire_get_u64(&r, "view id");
    out->offset = wire_get_u64(&r, "offset");
    out->length = wire_get_u32(&r, "length");
    uint32_t flags = wire_get_u32(&r, "flags");
    out->error = get_error(&r, true);
    out->last = (flags & 1u) != 0;
    /* The offset only grows by what was sent before it: a chunk that would
     * end past 2^64 bytes is a lie. */
    if (r.rc == 0 && (flags & ~1u) != 0)
        wire_fail(&r, "unknown flags 0x%x", flags);
    else if (r.rc == 0 && out->length > VIEW_STATE_CHUNK)
        wire_fail(&r, "chunk of %u bytes exceeds %u", out->length, VIEW_STATE_CHUNK);
    else if (r.rc == 0 && out->offset > UINT64_MAX - out->length)
        wire_fail(&r, "chunk of %u bytes at offset %llu ends past 2^64", out->length,
                  (unsigned long long)out->offset);
    else if (r.rc == 0 && out->error < 0 && (out->length != 0 || !out->last))
        wire_fail(&r, "a failed stream's chunk carries no bytes and ends it");
    else if (r.rc == 0 && wire_left(&r) != out->length)
        wire_fail(&r, "%zu bytes follow a chunk of %u", wire_left(&r), out->length);
    if (r.rc == 0) {
        out->data = buf + r.pos;
        r.pos += out->length;
    }
    return wire_finish(&r);
}

size_t view_wire_encode_join_state_ack(const struct view_join_state_ack *ack, uint8_t *buf,
                                       size_t cap)
{
    struct wire_writer w;
    wire_writer_init(&w, buf, cap);
    wire_put_header(&w, VIEW_WIRE_JOIN_STATE_ACK);
    wire_put_u64(&w, ack->view_id);
    wire_put_u64(&w, ack->taken);
    wire_put_u32(&w, (uint32_t)ack->error);
    wire_put_zero(&w, 4);
    return finish_encode(&w);
}

int view_wire_decode_join_state_ack(const uint8_t *buf, size_t len, struct view_join_state_ack *out)
{
    struct wire_reader r;
    wire_reader_init(&r, buf, len, "state acknowledgement");
    memset(out, 0, sizeof *out);
    wire_get_header(&r, VIEW_WIRE_JOIN_STATE_ACK);
    out->view_id = wire_get_u64(&r, "view id");
    out->taken = wire_get_u64(&r, "taken");
    out->error = get_error(&r, true);
    wire_get_zero(&r, 4, "reserved");
    return wire_finish(&r);
}

/* The ends after their views: next view, count, then each subgroup's. */
static void put_ends(struct wire_writer *w, const struct view_join_log_ends *ends)
{
    wire_put_u64(w, ends->next_view);
    wire_put_u32(w, ends->count);
    wire_put_zero(w, 4);
    for (uint32_t i = 0; i < ends->count; i++) {
        wire_put_u32(w, ends->ends[i].subgroup);
        wire_put_zero(w, 4);
        wire_put_u64(w, ends->ends[i].view_id);
        wire_put_u64(w, ends->ends[i].seq);
    }
}

/* Reads what put_ends wrote, out->join_view already set; the ends fill
 * the rest of the message. */
static void get_ends(struct wire_reader *r, struct view_join_log_ends *out)
{
    out->next_view = wire_get_u64(r, "next view");
    if (r->rc == 0 && out->next_view > out->join_view)
        wire_fail(r, "next view %" PRIu64 " is after the view joined, %" PRIu64, out->next_view,
                  out->join_view);
    out->count = wire_get_u32(r, "subgroup count");
    if (r->rc == 0 && out->count > SPINDLE_MAX_SUBGROUPS)
        wire_fail(r, "subgroup count %u exceeds %u", out->count, SPINDLE_MAX_SUBGROUPS);
    wire_get_zero(r, 4, "reserved");
    if (r->rc == 0 && wire_left(r) != (size_t)out->count * 24u)
        wire_fail(r, "%zu bytes for %u subgroup ends", wire_left(r), out->count);
    for (uint32_t i = 0; i < out->count && r->rc == 0; i++) {
        struct view_join_log_end *end = &out->ends[i];
        end->subgroup = wire_get_u32(r, "subgroup");
        if (r->rc == 0 && (end->subgroup >= SPINDLE_MAX_SUBGROUPS ||
                           (i > 0 && end->subgroup <= out->ends[i - 1].subgroup)))
            wire_fail(r, "subgroup %u out of range or order", end->subgroup);
        wire_get_zero(r, 4, "reserved");
        end->view_id = wire_get_u64(r, "view id");
        end->seq = wire_get_u64(r, "seq");
        if (r->rc == 0 && end->view_id >= out->join_view)
            wire_fail(r, "subgroup %u ends in view %" PRIu64 ", not before the view joined",
                      end->subgroup, end->view_id);
    }
}

size_t view_wire_encode_join_log_ends(const struct view_join_log_ends *ends, uint8_t *buf,
                                      size_t cap)
{
    struct wire_writer w;
    wire_writer_init(&w, buf, cap);
    wire_put_header(&w, VIEW_WIRE_JOIN_LOG_ENDS);
    wire_put_u64(&w, ends->join_view);
    put_ends(&w, ends);
    return finish_encode(&w);
}

int view_wire_decode_join_log_ends(const uint8_t *buf, size_t len, struct view_join_log_ends *out)
{
    struct wire_reader r;
    wire_reader_init(&r, buf, len, "log ends");
    memset(out, 0, sizeof *out);
    wire_get_header(&r, VIEW_WIRE_JOIN_LOG_ENDS);
    out->join_view = wire_get_u64(&r, "join view");
    get_ends(&r, out);
    return wire_finish(&r);
}

/* ---- total restart ------------------------------------------------------ */

uint16_t view_wire_type(const uint8_t *buf, size_t len)
{
    return len >= WIRE_HEADER_SIZE ? (uint16_t)(buf[0] | (buf[1] << 8)) : 0;
}

size_t view_wire_encode_restart(const struct view_restart_status *status, uint8_t *buf, size_t cap)
{
    struct wire_writer w;
    wire_writer_init(&w, buf, cap);
    wire_put_header(&w, VIEW_WIRE_RESTART);
    wire_put_u32(&w, status->id);
    wire_put_u32(&w, status->vote);
    wire_put_u32(&w, status->flags);
    wire_put_u32(&w, status->num_members);
    put_identity(&w, &status->identity);
    wire_put_u64(&w, status->latest_view);
    wire_put_u64(&w, status->messages);
    for (uint32_t i = 0; i < SPINDLE_MAX_MEMBERS; i++)
        wire_put_u32(&w, i < status->num_members ? status->members[i] : 0);
    wire_put_u32(&w, status->num_sources);
    wire_put_zero(&w, 4);
    for (uint32_t i = 0; i < status->num_sources; i++) {
        wire_put_u32(&w, status->sources[i].subgroup);
        wire_put_u32(&w, status->sources[i].id);
        wire_put_u64(&w, status->sources[i].view_id);
        wire_put_u64(&w, status->sources[i].seq);
    }
    put_ends(&w, &status->ends);
    return finish_encode(&w);
}

/* Reads the sources of a restart status (its members already read). */
static void get_sources(struct wire_reader *r, struct view_restart_status *out, uint64_t members)
{
    out->num_sources = wire_get_u32(r, "source count");
    if (r->rc == 0 && out->num_sources > SPINDLE_MAX_SUBGROUPS)
        wire_fail(r, "source count %u exceeds %u", out->num_sources, SPINDLE_MAX_SUBGROUPS);
    uint32_t point = VIEW_RESTART_RUNNING | VIEW_RESTART_ENDS;
    if (r->rc == 0 && out->num_sources > 0 && (out->flags & point) != point)
        wire_fail(r, "%u sources in a status that is not a running restart point",
                  out->num_sources);
    wire_get_zero(r, 4, "reserved");
    for (uint32_t i = 0; i < out->num_sources && r->rc == 0; i++) {
        struct view_restart_source *source = &out->sources[i];
        source->subgroup = wire_get_u32(r, "source subgroup");
        if (r->rc == 0 && (source->subgroup >= SPINDLE_MAX_SUBGROUPS ||
                           (i > 0 && source->subgroup <= out->sources[i - 1].subgroup)))
            wire_fail(r, "source subgroup %u out of range or order", source->subgroup);
        source->id = wire_get_u32(r, "source member");
        if (r->rc == 0 && (source->id >= SPINDLE_MAX_MEMBERS || ((members >> source->id) & 1) == 0))
            wire_fail(r, "source member %u is not a member of the latest view", source->id);
        source->view_id = wire_get_u64(r, "source view id");
        source->seq = wire_get_u64(r, "source seq");
        if (r->rc == 0 && source->view_id > out->latest_view)
            wire_fail(r, "subgroup %u's source ends in view %" PRIu64 ", after the latest view",
                      source->subgroup, source->view_id);
    }
}

int view_wire_decode_restart(const uint8_t *buf, size_t len, struct view_restart_status *out)
{
    struct wire_reader r;
    wire_reader_init(&r, buf, len, "restart status");
    memset(out, 0, sizeof *out);
    wire_get_header(&r, VIEW_WIRE_RESTART);
    out->id = wire_get_u32(&r, "member id");
    if (r.rc == 0 && out->id >= SPINDLE_MAX_MEMBERS)
        wire_fail(&r, "member id %u is not below %u", out->id, SPINDLE_MAX_MEMBERS);
    out->vote = wire_get_u32(&r, "vote");
    if (r.rc == 0 && out->vote >= SPINDLE_MAX_MEMBERS)
        wire_fail(&r, "vote for member %u, not below %u", out->vote, SPINDLE_MAX_MEMBERS);
    out->flags = wire_get_u32(&r, "flags");
    if (r.rc == 0 && (out->flags & ~(VIEW_RESTART_RUNNING | VIEW_RESTART_ENDS)) != 0)
        wire_fail(&r, "unknown flags 0x%x", out->flags);
    out->num_members = wire_get_u32(&r, "member count");
    if (r.rc == 0 && (out->num_members == 0 || out->num_members > SPINDLE_MAX_MEMBERS))
        wire_fail(&r, "member count %u is not 1..%u", out->num_members, SPINDLE_MAX_MEMBERS);
    get_identity(&r, &out->identity, "member");
    out->latest_view = wire_get_u64(&r, "latest view");
    if (r.rc == 0 && out->latest_view == UINT64_MAX)
        wire_fail(&r, "latest view %" PRIu64 " leaves no view after it", out->latest_view);
    out->messages = wire_get_u64(&r, "messages");
    uint64_t seen = 0;
    for (uint32_t i = 0; i < SPINDLE_MAX_MEMBERS && r.rc == 0; i++) {
        uint32_t id = wire_get_u32(&r, "members");
        if (r.rc == 0 && i >= out->num_members && id != 0)
            wire_fail(&r, "unused member entry %u is %u, not 0", i, id);
        else if (r.rc == 0 && i < out->num_members &&
                 (id >= SPINDLE_MAX_MEMBERS || ((seen >> id) & 1) != 0))
            wire_fail(&r, "member %u is out of range or listed twice", id);
        else if (i < out->num_members) {
            seen |= 1ull << id;
            out->members[i] = id;
        }
    }
    get_sources(&r, out, seen);
    out->ends.join_view = out->latest_view + 1;
    get_ends(&r, &out->ends);
    return wire_finish(&r);
}

size_t view_wire_encode_restart_fetch(const struct view_restart_fetch *fetch, uint8_t *buf,
                                      size_t cap)
{
    struct wire_writer w;
    wire_writer_init(&w, buf, cap);
    wire_put_header(&w, VIEW_WIRE_RESTART_FETCH);
    wire_put_u32(&w, fetch->asker);
    wire_put_u32(&w, fetch->subgroup);
    wire_put_u64(&w, fetch->latest_view);
    wire_put_u64(&w, fetch->next_view);
    wire_put_u64(&w, fetch->view_id);
    wire_put_u64(&w, fetch->seq);
    wire_put_u64(&w, fetch->offset);
    return finish_encode(&w);
}

size_t view_wire_encode_restart_slice(const struct view_restart_slice *slice, uint8_t *buf,
                                      size_t cap)
{
    struct wire_writer w;
    wire_writer_init(&w, buf, cap);
    wire_put_header(&w, VIEW_WIRE_RESTART_SLICE);
    wire_put_u64(&w, slice->total);
    wire_put_u64(&w, slice->offset);
    wire_put_u32(&w, slice->length);
    wire_put_u32(&w, slice->flags);
    wire_put_u32(&w, slice->checksum);
    wire_put_zero(&w, 4);
    wire_put_bytes(&w, slice->bytes, slice->length);
    return finish_encode(&w);
}

int view_wire_decode_restart_fetch(const uint8_t *buf, size_t len, struct view_restart_fetch *out)
{
    struct wire_reader r;
    wire_reader_init(&r, buf, len, "restart fetch");
    memset(out, 0, sizeof *out);
    wire_get_header(&r, VIEW_WIRE_RESTART_FETCH);
    out->asker = wire_get_u32(&r, "asker");
    if (r.rc == 0 && out->asker >= SPINDLE_MAX_MEMBERS)
        wire_fail(&r, "asker %u is not below %u", out->asker, SPINDLE_MAX_MEMBERS);
    out->subgroup = wire_get_u32(&r, "subgroup");
    if (r.rc == 0 && out->subgroup >= SPINDLE_MAX_SUBGROUPS)
        wire_fail(&r, "subgroup %u is not below %u", out->subgroup, SPINDLE_MAX_SUBGROUPS);
    out->latest_view = wire_get_u64(&r, "latest view");
    if (r.rc == 0 && out->latest_view == UINT64_MAX)
        wire_fail(&r, "latest view %" PRIu64 " leaves no view after it", out->latest_view);
    out->next_view = wire_get_u64(&r, "next view");
    if (r.rc == 0 && out->next_view > out->latest_view + 1)
        wire_fail(&r, "next view %" PRIu64 " is after latest view %" PRIu64 " + 1", out->next_view,
                  out->latest_view);
    out->view_id = wire_get_u64(&r, "view id");
    if (r.rc == 0 && out->view_id > out->latest_view)
        wire_fail(&r, "view id %" PRIu64 " is after latest view %" PRIu64, out->view_id,
                  out->latest_view);
    out->seq = wire_get_u64(&r, "seq");
    out->offset = wire_get_u64(&r, "offset");
    return wire_finish(&r);
}

int view_wire_decode_restart_slice(const uint8_t *buf, size_t len, struct view_restart_slice *out)
{
    struct wire_reader r;
    wire_reader_init(&r, buf, len, "restart slice");
    memset(out, 0, sizeof *out);
    wire_get_header(&r, VIEW_WIRE_RESTART_SLICE);
    out->total = wire_get_u64(&r, "total");
    if (r.rc == 0 && out->total == 0)
        wire_fail(&r, "total 0: a stream holds at least its header");
    out->offset = wire_get_u64(&r, "offset");
    if (r.rc == 0 && out->offset >= out->total)
        wire_fail(&r, "offset %" PRIu64 " is not below total %" PRIu64, out->offset, out->total);
    out->length = wire_get_u32(&r, "length");
    if (r.rc == 0 && (out->length == 0 || out->length > VIEW_RESTART_SLICE_MAX))
        wire_fail(&r, "length %u is not 1 .. %u", out->length, VIEW_RESTART_SLICE_MAX);
    else if (r.rc == 0 && out->length > out->total - out->offset)
        wire_fail(&r, "a slice of %u bytes at offset %" PRIu64 " ends past total %" PRIu64,
                  out->length, out->offset, out->total);
    out->flags = wire_get_u32(&r, "flags");
    bool ends = r.rc == 0 && out->offset + out->length == out->total;
    if (r.rc == 0 && (out->flags & ~VIEW_RESTART_SLICE_LAST) != 0)
        wire_fail(&r, "unknown flags 0x%x", out->flags);
    else if (r.rc == 0 && ends != ((out->flags & VIEW_RESTART_SLICE_LAST) != 0))
        wire_fail(&r, "the last flag is %s but the slice ends at %" PRIu64 " of %" PRIu64,
                  ends ? "clear" : "set", out->offset + out->length, out->total);
    out->checksum = wire_get_u32(&r, "checksum");
    wire_get_zero(&r, 4, "reserved");
    if (r.rc == 0 && wire_left(&r) != out->length)
        wire_fail(&r, "%zu bytes follow a slice of %u", wire_left(&r), out->length);
    if (r.rc == 0) {
        out->bytes = buf + r.pos;
        r.pos += out->length;
    }
    return wire_finish(&r);
}
