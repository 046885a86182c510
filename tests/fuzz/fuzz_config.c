/*
 * libFuzzer target: the INI loader behind spindle_config_load
 * (src/config/config.c, config_keys.c, through cfg_load_stream on an
 * fmemopen stream, so no file is written per input). An INI file has no
 * encoder to round-trip through, so the target checks instead that loading
 * the same bytes twice gives the same result (the same code and message, or
 * two equal configurations), that an accepted configuration keeps the
 * promises of include/spindle/config.h (the library's bounds, sorted unique ids,
 * subgroup members and senders defined), that a refusal is SPINDLE_ECONFIG
 * naming the file, and (LeakSanitizer) that nothing leaks either way.
 * SPINDLE_* environment variables, which override keys, are cleared first
 * (fuzz_init.c).
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <spindle/group.h>

#include "config/config_keys.h"
#include "fuzz_common.h"

#define FUZZ_INI_PATH "fuzz.ini"

static int load(const uint8_t *data, size_t size, struct spindle_config **out, char *message,
                size_t message_len)
{
    /* fmemopen wants a writable buffer and, in some libcs, a nonzero size. */
    char *copy = malloc(size + 1);
    FUZZ_CHECK(copy != NULL);
    if (size > 0)
        memcpy(copy, data, size);
    copy[size] = '\0';
    FILE *file = fmemopen(copy, size > 0 ? size : 1, "r");
    FUZZ_CHECK(file != NULL);
    *out = NULL;
    int rc = cfg_load_stream(file, FUZZ_INI_PATH, out);
    fclose(file);
    free(copy);
    snprintf(message, message_len, "%s", rc == 0 ? "" : spindle_errmsg());
    return rc;
}

static int same_text(const char *a, const char *b)
{
    return (a == NULL && b == NULL) || (a != NULL && b != NULL && strcmp(a, b) == 0);
}

static int has_id(const uint32_t *ids, uint32_t count, uint32_t id)
{
    for (uint32_t i = 0; i < count; i++)
        if (ids[i] == id)
            return 1;
    return 0;
}

/* What include/spindle/config.h promises of a loaded configuration. */
static void check_promises(const struct spindle_config *c)
{
    FUZZ_CHECK(c->group.name != NULL && c->group.name[0] != '\0');
    FUZZ_CHECK(strcmp(c->group.transport, "shm") == 0 ||
               strcmp(c->group.transport, "fabric") == 0 ||
               strcmp(c->group.transport, "verbs") == 0);
    FUZZ_CHECK(c->group.failure_timeout_ms >= 1 && c->group.failure_timeout_ms <= 3600000);
    for (uint32_t i = 0; i < c->num_members; i++) {
        FUZZ_CHECK(c->members[i].host != NULL && c->members[i].host[0] != '\0');
        FUZZ_CHECK(i == 0 || c->members[i - 1].id < c->members[i].id);
        FUZZ_CHECK(c->members[i].id < SPINDLE_MAX_MEMBERS);
        FUZZ_CHECK(spindle_config_member(c, c->members[i].id) == &c->members[i]);
    }
    for (uint32_t g = 0; g < c->num_subgroups; g++) {
        const struct spindle_config_subgroup *s = &c->subgroups[g];
        FUZZ_CHECK(g == 0 || c->subgroups[g - 1].index < s->index);
        FUZZ_CHECK(s->num_members >= 1 && s->num_senders >= 1);
        FUZZ_CHECK(s->index < SPINDLE_MAX_SUBGROUPS);
        FUZZ_CHECK(s->window_size >= 1 && s->window_size <= SPINDLE_MAX_WINDOW);
        FUZZ_CHECK(s->max_payload >= 1 && s->max_payload <= SPINDLE_MAX_PAYLOAD);
        FUZZ_CHECK(SPINDLE_SLOT_BYTES(s->max_payload) * s->window_size <= SPINDLE_MAX_RING_BYTES);
        FUZZ_CHECK(s->mode == SPINDLE_MODE_ATOMIC || s->mode == SPINDLE_MODE_UNORDERED);
        for (uint32_t i = 0; i < s->num_members; i++) {
            FUZZ_CHECK(spindle_config_member(c, s->members[i]) != NULL);
            FUZZ_CHECK(!has_id(s->members, i, s->members[i]));
        }
        for (uint32_t i = 0; i < s->num_senders; i++) {
            FUZZ_CHECK(has_id(s->members, s->num_members, s->senders[i]));
            FUZZ_CHECK(!has_id(s->senders, i, s->senders[i]));
        }
    }
    FUZZ_CHECK(c->bench.messages >= 1);
    FUZZ_CHECK(c->bench.message_size >= 1 && c->bench.message_size <= SPINDLE_MAX_PAYLOAD);
}

static void check_equal(const struct spindle_config *a, const struct spindle_config *b)
{
    FUZZ_CHECK(same_text(a->path, b->path) && same_text(a->group.name, b->group.name) &&
               same_text(a->group.transport, b->group.transport) &&
               same_text(a->group.provider, b->group.provider) &&
               same_text(a->group.device, b->group.device) &&
               same_text(a->group.log_level, b->group.log_level));
    FUZZ_CHECK(a->group.failure_timeout_ms == b->group.failure_timeout_ms);
    FUZZ_CHECK(a->num_members == b->num_members && a->num_subgroups == b->num_subgroups);
    for (uint32_t i = 0; i < a->num_members; i++) {
        FUZZ_CHECK(a->members[i].id == b->members[i].id);
        FUZZ_CHECK(a->members[i].port == b->members[i].port);
        FUZZ_CHECK(same_text(a->members[i].host, b->members[i].host));
    }
    for (uint32_t g = 0; g < a->num_subgroups; g++) {
        const struct spindle_config_subgroup *x = &a->subgroups[g], *y = &b->subgroups[g];
        FUZZ_CHECK(x->index == y->index && x->num_members == y->num_members &&
                   x->num_senders == y->num_senders && x->window_size == y->window_size &&
                   x->max_payload == y->max_payload && x->mode == y->mode);
        FUZZ_CHECK(memcmp(x->members, y->members, x->num_members * sizeof x->members[0]) == 0);
        FUZZ_CHECK(memcmp(x->senders, y->senders, x->num_senders * sizeof x->senders[0]) == 0);
    }
    FUZZ_CHECK(a->bench.messages == b->bench.messages &&
               a->bench.message_size == b->bench.message_size &&
               a->bench.duration_ms == b->bench.duration_ms);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    static char first_message[512], second_message[512];
    struct spindle_config *first = NULL, *second = NULL;
    int rc = load(data, size, &first, first_message, sizeof first_message);
    int rc_again = load(data, size, &second, second_message, sizeof second_message);
    FUZZ_CHECK(rc == rc_again);
    FUZZ_CHECK(strcmp(first_message, second_message) == 0);
    if (rc != 0) {
        FUZZ_CHECK(rc == SPINDLE_ECONFIG || rc == SPINDLE_ENOMEM);
        if (rc == SPINDLE_ECONFIG) /* "file:line: key = value: what is wrong" */
            FUZZ_CHECK(strncmp(first_message, FUZZ_INI_PATH, strlen(FUZZ_INI_PATH)) == 0);
        FUZZ_CHECK(first == NULL && second == NULL);
        return 0;
    }
    FUZZ_CHECK(first != NULL && second != NULL && first != second);
    check_promises(first);
    check_equal(first, second);
    spindle_config_free(first);
    spindle_config_free(second);
    return 0;
}
