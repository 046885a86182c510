/* Control-channel encoding of members, view descriptors and trim reports.
 * Framing and the simple messages are in wire.c. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "view/wire_codec.h"

/* Smallest encodings, used to bound counts before looping or allocating. */
#define MEMBER_MIN_BYTES 13 /* fixed fields + a 1-byte host */
#define SHARD_MIN_BYTES  12 /* fixed fields + one member id */
#define TRIM_ENTRY_BYTES 16 /* fixed fields, without the trims */

/* Re-labels a view-builder failure (EINVAL) as a protocol error, keeping
 * its message: a peer sent a descriptor that breaks view invariants. */
static void fail_from_view(struct wire_reader *r, int rc, size_t at)
{
    char reason[200];
    snprintf(reason, sizeof reason, "%s", spindle_errmsg());
    if (rc == SPINDLE_ENOMEM)
        wire_fail(r, rc);
    else
        wire_fail(r, sp_error(SPINDLE_EPROTO, "bad view descriptor at offset %zu: %s", at, reason));
}

int wire_encode_member(struct wire_writer *w, const struct view_member *member)
{
    size_t host_len = strnlen(member->host, VIEW_HOST_MAX);
    if (host_len == 0 || host_len == VIEW_HOST_MAX)
        return sp_error(SPINDLE_EINVAL, "member %u: host must be 1..%d bytes", member->id,
                        VIEW_HOST_MAX - 1);
    if (member->address.len > TP_DESC_MAX)
        return sp_error(SPINDLE_EINVAL, "member %u: address length %u exceeds %d", member->id,
                        member->address.len, TP_DESC_MAX);
    wire_put(w, member->id, 4);
    wire_put(w, member->port, 2);
    wire_put(w, host_len, 2);
    wire_put(w, member->address.len, 2);
    wire_put(w, 0, 2);
    wire_put_bytes(w, member->host, host_len);
    wire_put_bytes(w, member->address.bytes, member->address.len);
    return 0;
}

void wire_decode_member(struct wire_reader *r, struct view_member *member)
{
    memset(member, 0, sizeof *member);
    member->id = wire_get_u32(r, "member id");
    member->port = wire_get_u16(r, "member port");
    size_t at = r->pos;
    uint16_t host_len = wire_get_u16(r, "member host length");
    uint16_t addr_len = wire_get_u16(r, "member address length");
    uint16_t reserved = wire_get_u16(r, "member reserved");
    if (r->rc < 0)
        return;
    if (host_len == 0 || host_len >= VIEW_HOST_MAX || addr_len > TP_DESC_MAX || reserved != 0) {
        wire_fail(r, sp_error(SPINDLE_EPROTO,
                              "member %u at offset %zu: host length %u (1..%d), address "
                              "length %u (<= %d), reserved %u (0)",
                              member->id, at, host_len, VIEW_HOST_MAX - 1, addr_len, TP_DESC_MAX,
                              reserved));
        return;
    }
    const uint8_t *host = wire_get_bytes(r, host_len, "member host");
    const uint8_t *addr = wire_get_bytes(r, addr_len, "member address");
    if (r->rc < 0)
        return;
    if (memchr(host, 0, host_len) != NULL) {
        wire_fail(r, sp_error(SPINDLE_EPROTO, "member %u: host contains a NUL byte", member->id));
        return;
    }
    memcpy(member->host, host, host_len);
    member->address.len = addr_len;
    memcpy(member->address.bytes, addr, addr_len);
}

int wire_encode_view(struct wire_writer *w, const struct view *view)
{
    int rc = view_validate(view);
    if (rc < 0)
        return rc;
    if (view->num_members == 0)
        return sp_error(SPINDLE_EINVAL, "view %llu has no members", (unsigned long long)view->id);
    wire_put(w, view->id, 8);
    wire_put(w, view->num_members, 4);
    wire_put(w, view->num_subgroups, 4);
    wire_put(w, view->num_shards, 4);
    wire_put(w, 0, 4);
    for (uint32_t i = 0; i < view->num_members; i++) {
        rc = wire_encode_member(w, &view->members[i]);
        if (rc < 0)
            return rc;
    }
    for (uint32_t i = 0; i < view->num_shards; i++) {
        const struct view_shard *shard = &view->shards[i];
        wire_put(w, shard->subgroup, 4);
        wire_put(w, shard->num_members, 2);
        wire_put(w, shard->num_senders, 2);
        for (uint32_t m = 0; m < shard->num_members; m++)
            wire_put(w, shard->members[m], 4);
        for (uint32_t s = 0; s < shard->num_senders; s++)
            wire_put(w, shard->senders[s], 4);
    }
    return 0;
}

/* Reads one shard and adds it to view, opening subgroups up to its own. */
static void decode_shard(struct wire_reader *r, struct view *view, uint32_t num_subgroups)
{
    size_t at = r->pos;
    uint32_t subgroup = wire_get_u32(r, "shard subgroup");
    uint16_t num_members = wire_get_u16(r, "shard member count");
    uint16_t num_senders = wire_get_u16(r, "shard sender count");
    if (r->rc < 0)
        return;
    if (subgroup >= num_subgroups || subgroup + 1 < view->num_subgroups || num_members == 0 ||
        num_members > VIEW_MAX_MEMBERS || num_senders > num_members) {
        wire_fail(r, sp_error(SPINDLE_EPROTO,
                              "shard at offset %zu: subgroup %u (of %u, not before %u), %u "
                              "members (1..%d), %u senders",
                              at, subgroup, num_subgroups,
                              view->num_subgroups ? view->num_subgroups - 1 : 0, num_members,
                              VIEW_MAX_MEMBERS, num_senders));
        return;
    }
    if (!wire_need(r, (size_t)(num_members + num_senders) * 4, "shard member ids"))
        return;
    uint32_t members[VIEW_MAX_MEMBERS], senders[VIEW_MAX_MEMBERS];
    for (uint32_t m = 0; m < num_members; m++)
        members[m] = wire_get_u32(r, "shard member id");
    for (uint32_t s = 0; s < num_senders; s++)
        senders[s] = wire_get_u32(r, "shard sender id");
    while (view->num_subgroups <= subgroup)
        view_add_subgroup(view); /* cannot fail: subgroup < num_subgroups <= limit */
    int rc = view_add_shard(view, members, num_members, senders, num_senders);
    if (rc < 0)
        fail_from_view(r, rc, at);
}

void wire_decode_view(struct wire_reader *r, struct view *view)
{
    view_init(view, 0);
    view->id = wire_get_u64(r, "view id");
    size_t at = r->pos;
    uint32_t num_members = wire_get_u32(r, "view member count");
    uint32_t num_subgroups = wire_get_u32(r, "view subgroup count");
    uint32_t num_shards = wire_get_u32(r, "view shard count");
    wire_get_zero32(r, "view reserved");
    if (r->rc < 0)
        return;
    if (num_members == 0 || num_members > VIEW_MAX_MEMBERS || num_subgroups > VIEW_MAX_SUBGROUPS ||
        num_shards > VIEW_MAX_SHARDS || (num_shards > 0 && num_subgroups == 0) ||
        (uint64_t)num_members * MEMBER_MIN_BYTES + (uint64_t)num_shards * SHARD_MIN_BYTES >
            wire_left(r)) {
        wire_fail(r, sp_error(SPINDLE_EPROTO,
                              "view at offset %zu: %u members (1..%d), %u subgroups (<= %d), "
                              "%u shards (<= %d) do not fit the %zu bytes left",
                              at, num_members, VIEW_MAX_MEMBERS, num_subgroups, VIEW_MAX_SUBGROUPS,
                              num_shards, VIEW_MAX_SHARDS, wire_left(r)));
        return;
    }
    for (uint32_t i = 0; i < num_members && r->rc == 0; i++) {
        struct view_member member;
        size_t member_at = r->pos;
        wire_decode_member(r, &member);
        if (r->rc < 0)
            break;
        int rc = view_add_member(view, member.id, member.host, member.port, &member.address);
        if (rc < 0)
            fail_from_view(r, rc, member_at);
    }
    for (uint32_t i = 0; i < num_shards && r->rc == 0; i++)
        decode_shard(r, view, num_subgroups);
    while (r->rc == 0 && view->num_subgroups < num_subgroups)
        view_add_subgroup(view);
    if (r->rc < 0)
        view_clear(view);
}

int wire_encode_trim(struct wire_writer *w, const struct wire_trim_report *trim)
{
    if (trim->num_entries > VIEW_MAX_SHARDS || (trim->num_entries > 0 && trim->entries == NULL))
        return sp_error(SPINDLE_EINVAL, "trim report: %u entries (limit %d)", trim->num_entries,
                        VIEW_MAX_SHARDS);
    wire_put(w, trim->view_id, 8);
    wire_put(w, trim->leader_id, 4);
    wire_put(w, trim->num_entries, 4);
    for (uint32_t i = 0; i < trim->num_entries; i++) {
        const struct wire_trim_entry *entry = &trim->entries[i];
        if (entry->num_senders > TRIM_MAX_SENDERS)
            return sp_error(SPINDLE_EINVAL, "trim entry %u: %u senders (limit %d)", i,
                            entry->num_senders, TRIM_MAX_SENDERS);
        if (i > 0 && (entry->subgroup < entry[-1].subgroup ||
                      (entry->subgroup == entry[-1].subgroup && entry->shard <= entry[-1].shard)))
            return sp_error(SPINDLE_EINVAL, "trim entries must be sorted by (subgroup, shard)");
        wire_put(w, entry->subgroup, 4);
        wire_put(w, entry->shard, 4);
        wire_put(w, entry->num_senders, 4);
        wire_put(w, 0, 4);
        for (uint32_t s = 0; s < entry->num_senders; s++) {
            if (entry->trim[s] > TRIM_MAX_COUNT)
                return sp_error(SPINDLE_EINVAL, "trim entry %u sender %u: count %llu too large", i,
                                s, (unsigned long long)entry->trim[s]);
            wire_put(w, entry->trim[s], 8);
        }
    }
    return 0;
}

/* Reads one trim entry; prev is the entry before it (NULL for the first). */
static void decode_trim_entry(struct wire_reader *r, struct wire_trim_entry *entry,
                              const struct wire_trim_entry *prev)
{
    size_t at = r->pos;
    entry->subgroup = wire_get_u32(r, "trim subgroup");
    entry->shard = wire_get_u32(r, "trim shard");
    entry->num_senders = wire_get_u32(r, "trim sender count");
    wire_get_zero32(r, "trim reserved");
    if (r->rc < 0)
        return;
    bool ordered = prev == NULL || entry->subgroup > prev->subgroup ||
                   (entry->subgroup == prev->subgroup && entry->shard > prev->shard);
    if (entry->num_senders > TRIM_MAX_SENDERS || entry->subgroup >= VIEW_MAX_SUBGROUPS ||
        entry->shard >= VIEW_MAX_SHARDS || !ordered) {
        wire_fail(r, sp_error(SPINDLE_EPROTO,
                              "trim entry at offset %zu: subgroup %u shard %u, %u senders "
                              "(<= %d), %s",
                              at, entry->subgroup, entry->shard, entry->num_senders,
                              TRIM_MAX_SENDERS, ordered ? "in order" : "out of order"));
        return;
    }
    for (uint32_t s = 0; s < entry->num_senders && r->rc == 0; s++) {
        size_t count_at = r->pos;
        entry->trim[s] = wire_get_u64(r, "trim count");
        if (r->rc == 0 && entry->trim[s] > TRIM_MAX_COUNT)
            wire_fail(r, sp_error(SPINDLE_EPROTO, "trim count %llu at offset %zu exceeds %llu",
                                  (unsigned long long)entry->trim[s], count_at,
                                  (unsigned long long)TRIM_MAX_COUNT));
    }
}

void wire_decode_trim(struct wire_reader *r, struct wire_trim_report *trim)
{
    memset(trim, 0, sizeof *trim);
    trim->view_id = wire_get_u64(r, "trim view id");
    trim->leader_id = wire_get_u32(r, "trim leader id");
    size_t at = r->pos;
    uint32_t num_entries = wire_get_u32(r, "trim entry count");
    if (r->rc < 0)
        return;
    if (num_entries > VIEW_MAX_SHARDS || (uint64_t)num_entries * TRIM_ENTRY_BYTES > wire_left(r)) {
        wire_fail(r, sp_error(SPINDLE_EPROTO,
                              "trim report at offset %zu: %u entries (limit %d) do not fit the "
                              "%zu bytes left",
                              at, num_entries, VIEW_MAX_SHARDS, wire_left(r)));
        return;
    }
    if (num_entries > 0) {
        trim->entries = calloc(num_entries, sizeof *trim->entries);
        if (trim->entries == NULL) {
            wire_fail(r, sp_error(SPINDLE_ENOMEM, "trim report: %u entries", num_entries));
            return;
        }
    }
    trim->num_entries = num_entries;
    for (uint32_t i = 0; i < num_entries && r->rc == 0; i++)
        decode_trim_entry(r, &trim->entries[i], i > 0 ? &trim->entries[i - 1] : NULL);
    if (r->rc < 0) {
        free(trim->entries);
        trim->entries = NULL;
        trim->num_entries = 0;
    }
}
