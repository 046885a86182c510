/*
 * Valid sample messages of every control-channel type, shared by the codec
 * unit tests and the fuzz harness (as its seed corpus). Test-only; header
 * with static functions so each test binary gets its own copy.
 */
#ifndef SP_TESTS_VIEW_WIRE_SAMPLES_H
#define SP_TESTS_VIEW_WIRE_SAMPLES_H

#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include "view/wire.h"

#define SAMPLE_GROUP "spindle-test-group"

static const uint8_t sample_state[] = "replicated state bytes";

/* A 4-member view with two subgroups (one of two shards). */
static int sample_view(struct view *view, uint64_t id)
{
    view_init(view, id);
    for (uint32_t i = 0; i < 4; i++) {
        char host[32];
        snprintf(host, sizeof host, "node-%u.example", i);
        struct tp_desc address = {.len = 16 + i};
        for (uint32_t b = 0; b < address.len; b++)
            address.bytes[b] = (uint8_t)(i * 31 + b);
        int rc = view_add_member(view, 100 + i, host, (uint16_t)(9000 + i), &address);
        if (rc < 0)
            return rc;
    }
    uint32_t all[] = {100, 101, 102, 103};
    if (view_add_subgroup(view) < 0 || view_add_shard(view, all, 4, all, 4) < 0 ||
        view_add_subgroup(view) < 0 ||
        view_add_shard(view, (uint32_t[]){100, 102}, 2, (uint32_t[]){102}, 1) < 0 ||
        view_add_shard(view, (uint32_t[]){101, 103}, 2, NULL, 0) < 0)
        return -1;
    return 0;
}

/* Fills msg with a valid message of type (proposal: caller view_clear's
 * msg->u.proposal.view; trim: entries point to the static array). */
static int sample_msg(enum wire_type type, struct wire_msg *msg)
{
    static struct wire_trim_entry entries[3];
    memset(msg, 0, sizeof *msg);
    msg->type = type;
    switch (type) {
    case WIRE_JOIN_REQUEST: {
        struct view_member *m = &msg->u.join_request.member;
        m->id = 77;
        m->port = 4242;
        strcpy(m->host, "joiner.example");
        m->address.len = 24;
        memset(m->address.bytes, 0xab, 24);
        return 0;
    }
    case WIRE_JOIN_REPLY:
        msg->u.join_reply.status = WIRE_JOIN_REDIRECT;
        msg->u.join_reply.view_id = 12;
        msg->u.join_reply.leader_id = 100;
        msg->u.join_reply.leader_port = 9000;
        strcpy(msg->u.join_reply.leader_host, "node-0.example");
        return 0;
    case WIRE_VIEW_PROPOSAL:
        msg->u.proposal.leader_id = 100;
        msg->u.proposal.prev_view_id = 12;
        return sample_view(&msg->u.proposal.view, 13);
    case WIRE_VIEW_ACK:
        msg->u.ack.view_id = 13;
        msg->u.ack.member_id = 102;
        return 0;
    case WIRE_VIEW_COMMIT:
        msg->u.commit.view_id = 13;
        msg->u.commit.leader_id = 100;
        return 0;
    case WIRE_TRIM_REPORT:
        memset(entries, 0, sizeof entries);
        entries[0] = (struct wire_trim_entry){.subgroup = 0, .shard = 0, .num_senders = 4};
        for (int s = 0; s < 4; s++)
            entries[0].trim[s] = 1000 + (uint64_t)s;
        entries[1] = (struct wire_trim_entry){.subgroup = 1, .shard = 0, .num_senders = 1};
        entries[1].trim[0] = 5;
        entries[2] = (struct wire_trim_entry){.subgroup = 1, .shard = 1, .num_senders = 0};
        msg->u.trim.view_id = 12;
        msg->u.trim.leader_id = 100;
        msg->u.trim.num_entries = 3;
        msg->u.trim.entries = entries;
        return 0;
    case WIRE_LEAVE:
        msg->u.leave.view_id = 13;
        msg->u.leave.member_id = 103;
        return 0;
    case WIRE_STATE_CHUNK:
        msg->u.chunk.view_id = 13;
        msg->u.chunk.subgroup = 1;
        msg->u.chunk.shard = 1;
        msg->u.chunk.offset = 100;
        msg->u.chunk.total = 100 + sizeof sample_state;
        msg->u.chunk.length = sizeof sample_state;
        msg->u.chunk.flags = WIRE_CHUNK_LAST;
        msg->u.chunk.data = sample_state;
        return 0;
    }
    return -1;
}

/* Encodes the sample of type into buf; returns the frame length or < 0. */
static long sample_frame(enum wire_type type, uint8_t *buf, size_t cap)
{
    struct wire_msg msg;
    if (sample_msg(type, &msg) < 0)
        return -1;
    size_t len;
    int rc = wire_encode(wire_group_hash(SAMPLE_GROUP), &msg, buf, cap, &len);
    if (type == WIRE_VIEW_PROPOSAL)
        view_clear(&msg.u.proposal.view);
    return rc < 0 ? rc : (long)len;
}

#endif
