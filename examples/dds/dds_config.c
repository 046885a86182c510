/*
 * The topic configuration (INI through inih): participants, topics, their
 * QoS and members. Its text comes from a file any process may have
 * written, so every value is checked and a refusal names the line, the
 * key and the value (tests/fuzz/fuzz_dds_config.c).
 */
#include <errno.h>
#include <ini.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "dds_impl.h"

struct parse_state {
    struct spindle_dds_config *config;
    uint64_t participants_seen; /* bit per [participant.N] */
    uint64_t topics_seen;       /* bit per [topic.N] */
    uint64_t founders;
    bool founders_set;
    int rc;
    char message[400];
};

static const char *const qos_names[] = {"unordered", "atomic", "volatile", "logged"};

const char *spindle_dds_qos_name(enum spindle_dds_qos qos)
{
    return (unsigned)qos < 4 ? qos_names[qos] : "unknown";
}

int spindle_dds_qos_parse(const char *text, enum spindle_dds_qos *out)
{
    for (unsigned i = 0; i < 4; i++)
        if (text != NULL && strcmp(text, qos_names[i]) == 0) {
            *out = (enum spindle_dds_qos)i;
            return 0;
        }
    return dds_error(SPINDLE_EINVAL, "QoS \"%s\" is not unordered, atomic, volatile or logged",
                     text != NULL ? text : "(null)");
}

static int refuse(struct parse_state *state, const char *section, const char *key,
                  const char *value, const char *what)
{
    snprintf(state->message, sizeof state->message, "[%s] %s = %s: %s", section, key, value, what);
    state->rc = SPINDLE_ECONFIG;
    return 0;
}

static bool parse_number(const char *value, unsigned long long max, unsigned long long *out)
{
    if (value[0] < '0' || value[0] > '9')
        return false;
    char *end;
    errno = 0;
    unsigned long long number = strtoull(value, &end, 10);
    if (errno != 0 || *end != '\0' || number > max)
        return false;
    *out = number;
    return true;
}

/* "0, 2,5" into a bit set of participant ids. */
static bool parse_ids(const char *value, uint64_t *out)
{
    uint64_t ids = 0;
    const char *at = value;
    while (*at != '\0') {
        while (*at == ' ' || *at == '\t')
            at++;
        char *end;
        if (*at < '0' || *at > '9')
            return false;
        errno = 0;
        unsigned long id = strtoul(at, &end, 10);
        if (errno != 0 || id >= SPINDLE_DDS_MAX_PARTICIPANTS)
            return false;
        ids |= 1ull << id;
        at = end;
        while (*at == ' ' || *at == '\t')
            at++;
        if (*at == ',')
            at++;
        else if (*at != '\0')
            return false;
    }
    *out = ids;
    return true;
}

static bool copy_name(char *out, size_t size, const char *value)
{
    size_t len = strlen(value);
    if (len == 0 || len >= size)
        return false;
    for (size_t i = 0; i < len; i++)
        if (value[i] <= ' ' || value[i] > '~')
            return false;
    memcpy(out, value, len + 1);
    return true;
}

static int dds_section(struct parse_state *state, const char *key, const char *value)
{
    struct spindle_dds_config *c = state->config;
    unsigned long long number;
    if (strcmp(key, "group") == 0) {
        if (!copy_name(c->group_name, sizeof c->group_name, value))
            return refuse(state, "dds", key, value, "must be 1..63 printable characters");
    } else if (strcmp(key, "founders") == 0) {
        if (!parse_ids(value, &state->founders) || state->founders == 0)
            return refuse(state, "dds", key, value, "must list participant ids 0..63");
        state->founders_set = true;
    } else if (strcmp(key, "log_dir") == 0) {
        if (strlen(value) == 0 || strlen(value) >= sizeof c->log_dir)
            return refuse(state, "dds", key, value, "must be 1..255 characters");
        memcpy(c->log_dir, value, strlen(value) + 1);
    } else if (strcmp(key, "key_file") == 0) {
        if (strlen(value) == 0 || strlen(value) >= sizeof c->key_file)
            return refuse(state, "dds", key, value, "must be 1..255 characters");
        memcpy(c->key_file, value, strlen(value) + 1);
    } else if (strcmp(key, "failure_timeout_ms") == 0) {
        if (!parse_number(value, 3600000, &number) || number == 0)
            return refuse(state, "dds", key, value, "must be 1..3600000");
        c->failure_timeout_ms = (int)number;
    } else {
        return refuse(state, "dds", key, value, "unknown key");
    }
    return 1;
}

static int participant_key(struct parse_state *state, const char *section, uint32_t id,
                           const char *key, const char *value)
{
    struct spindle_dds_participant_config *p = &state->config->participants[id];
    unsigned long long number;
    if (strcmp(key, "name") == 0) {
        if (!copy_name(p->name, sizeof p->name, value))
            return refuse(state, section, key, value,
                          "must be 1..63 printable characters without spaces");
    } else if (strcmp(key, "host") == 0) {
        if (!copy_name(p->host, sizeof p->host, value))
            return refuse(state, section, key, value, "must be 1..63 printable characters");
    } else if (strcmp(key, "port") == 0) {
        if (!parse_number(value, 65535, &number) || number == 0)
            return refuse(state, section, key, value, "must be 1..65535");
        p->port = (uint16_t)number;
    } else if (strcmp(key, "client_port") == 0) {
        if (!parse_number(value, 65535, &number) || number == 0)
            return refuse(state, section, key, value, "must be 1..65535");
        p->client_port = (uint16_t)number;
    } else if (strcmp(key, "client_bind") == 0) {
        if (!copy_name(p->client_bind, sizeof p->client_bind, value))
            return refuse(state, section, key, value, "must be a numeric address");
    } else {
        return refuse(state, section, key, value, "unknown key");
    }
    return 1;
}

static int topic_key(struct parse_state *state, const char *section, uint32_t id, const char *key,
                     const char *value)
{
    struct spindle_dds_topic_config *t = &state->config->topics[id];
    unsigned long long number;
    if (strcmp(key, "name") == 0) {
        if (!copy_name(t->name, sizeof t->name, value))
            return refuse(state, section, key, value,
                          "must be 1..63 printable characters without spaces");
    } else if (strcmp(key, "qos") == 0) {
        if (spindle_dds_qos_parse(value, &t->qos) != 0)
            return refuse(state, section, key, value,
                          "must be unordered, atomic, volatile or logged");
    } else if (strcmp(key, "publishers") == 0 || strcmp(key, "subscribers") == 0) {
        uint64_t *ids = key[0] == 'p' ? &t->publishers : &t->subscribers;
        if (!parse_ids(value, ids))
            return refuse(state, section, key, value, "must list participant ids 0..63");
    } else if (strcmp(key, "max_sample_size") == 0) {
        if (!parse_number(value, SPINDLE_DDS_MAX_SAMPLE, &number) || number == 0)
            return refuse(state, section, key, value, "must be 1..1048544");
        t->max_sample_size = (uint32_t)number;
    } else if (strcmp(key, "history_depth") == 0) {
        if (!parse_number(value, SPINDLE_DDS_MAX_HISTORY, &number) || number == 0)
            return refuse(state, section, key, value, "must be 1..100000");
        t->history_depth = (uint32_t)number;
    } else if (strcmp(key, "window") == 0) {
        if (!parse_number(value, SPINDLE_MAX_WINDOW, &number) || number == 0)
            return refuse(state, section, key, value, "must be 1..100000");
        t->window = (uint32_t)number;
    } else {
        return refuse(state, section, key, value, "unknown key");
    }
    return 1;
}

/* "participant.12" -> 12 when prefix matches. */
static bool section_id(const char *section, const char *prefix, uint32_t limit, uint32_t *out)
{
    size_t len = strlen(prefix);
    unsigned long long number;
    if (strncmp(section, prefix, len) != 0 || !parse_number(section + len, limit - 1, &number))
        return false;
    *out = (uint32_t)number;
    return true;
}

static int on_key(void *user, const char *section, const char *key, const char *value)
{
    struct parse_state *state = user;
    if (state->rc != 0)
        return 0;
    uint32_t id;
    if (strcmp(section, "dds") == 0)
        return dds_section(state, key, value);
    if (section_id(section, "participant.", SPINDLE_DDS_MAX_PARTICIPANTS, &id)) {
        state->participants_seen |= 1ull << id;
        return participant_key(state, section, id, key, value);
    }
    if (section_id(section, "topic.", SPINDLE_DDS_MAX_TOPICS, &id)) {
        state->topics_seen |= 1ull << id;
        return topic_key(state, section, id, key, value);
    }
    return refuse(state, section, key, value,
                  "unknown section (dds, participant.0..63, topic.0..63)");
}

static uint32_t count_prefix(uint64_t bits)
{
    uint32_t n = 0;
    while (n < 64 && (bits >> n) & 1u)
        n++;
    return n;
}

static int check_whole(struct parse_state *state, const char *path)
{
    struct spindle_dds_config *c = state->config;
    c->num_participants = count_prefix(state->participants_seen);
    c->num_topics = count_prefix(state->topics_seen);
    if (c->num_participants == 0)
        return dds_error(SPINDLE_ECONFIG, "%s: no [participant.0] section", path);
    if (c->num_participants < 64 && (state->participants_seen >> c->num_participants) != 0)
        return dds_error(SPINDLE_ECONFIG, "%s: [participant.%u] is missing (ids have no gaps)",
                         path, c->num_participants);
    if (c->num_topics == 0)
        return dds_error(SPINDLE_ECONFIG, "%s: no [topic.0] section", path);
    if (c->num_topics < 64 && (state->topics_seen >> c->num_topics) != 0)
        return dds_error(SPINDLE_ECONFIG, "%s: [topic.%u] is missing (numbers have no gaps)", path,
                         c->num_topics);
    uint64_t all = c->num_participants == 64 ? ~0ull : (1ull << c->num_participants) - 1;
    if (state->founders_set && (state->founders & ~all) != 0)
        return dds_error(SPINDLE_ECONFIG, "%s: [dds] founders names a participant not defined",
                         path);
    for (uint32_t i = 0; i < c->num_participants; i++) {
        struct spindle_dds_participant_config *p = &c->participants[i];
        p->id = i;
        p->founder = !state->founders_set || ((state->founders >> i) & 1u);
        if (p->port == 0)
            return dds_error(SPINDLE_ECONFIG, "%s: [participant.%u] has no port", path, i);
        if (p->name[0] == '\0')
            snprintf(p->name, sizeof p->name, "participant-%u", i);
        for (uint32_t j = 0; j < i; j++)
            if (strcmp(c->participants[j].name, p->name) == 0)
                return dds_error(SPINDLE_ECONFIG,
                                 "%s: participants %u and %u are both named \"%s\"", path, j, i,
                                 p->name);
    }
    bool logged = false;
    for (uint32_t i = 0; i < c->num_topics; i++) {
        struct spindle_dds_topic_config *t = &c->topics[i];
        t->id = i;
        if (t->name[0] == '\0')
            snprintf(t->name, sizeof t->name, "topic-%u", i);
        for (uint32_t j = 0; j < i; j++)
            if (strcmp(c->topics[j].name, t->name) == 0)
                return dds_error(SPINDLE_ECONFIG, "%s: topics %u and %u are both named \"%s\"",
                                 path, j, i, t->name);
        if (((t->publishers | t->subscribers) & ~all) != 0)
            return dds_error(SPINDLE_ECONFIG,
                             "%s: [topic.%u] names a participant that is not defined", path, i);
        if (t->publishers == 0)
            return dds_error(SPINDLE_ECONFIG, "%s: [topic.%u] has no publishers", path, i);
        uint64_t slot = SPINDLE_SLOT_BYTES(t->max_sample_size + SPINDLE_DDS_SAMPLE_HEADER);
        if (slot * t->window > SPINDLE_MAX_RING_BYTES)
            return dds_error(SPINDLE_ECONFIG,
                             "%s: [topic.%u] window %u of %u-byte samples exceeds the ring limit "
                             "of %u bytes",
                             path, i, t->window, t->max_sample_size, SPINDLE_MAX_RING_BYTES);
        logged |= t->qos == SPINDLE_DDS_LOGGED;
    }
    if (logged && c->log_dir[0] == '\0')
        return dds_error(SPINDLE_ECONFIG, "%s: a logged topic needs [dds] log_dir", path);
    return 0;
}

static void set_defaults(struct spindle_dds_config *c)
{
    memset(c, 0, sizeof *c);
    snprintf(c->group_name, sizeof c->group_name, "dds");
    c->failure_timeout_ms = 2000;
    for (uint32_t i = 0; i < SPINDLE_DDS_MAX_PARTICIPANTS; i++) {
        snprintf(c->participants[i].host, sizeof c->participants[i].host, "127.0.0.1");
        snprintf(c->participants[i].client_bind, sizeof c->participants[i].client_bind,
                 "127.0.0.1");
    }
    for (uint32_t i = 0; i < SPINDLE_DDS_MAX_TOPICS; i++) {
        c->topics[i].qos = SPINDLE_DDS_ATOMIC;
        c->topics[i].max_sample_size = 1024;
        c->topics[i].history_depth = 100;
        c->topics[i].window = 64;
    }
}

int spindle_dds_config_parse(const char *text, size_t len, const char *path,
                             struct spindle_dds_config **out)
{
    if (path == NULL)
        path = "(text)";
    if (text == NULL || out == NULL)
        return dds_error(SPINDLE_EINVAL, "%s: NULL text or out", path);
    char *copy = malloc(len + 1);
    struct parse_state state = {.config = calloc(1, sizeof *state.config)};
    if (copy == NULL || state.config == NULL) {
        free(copy);
        free(state.config);
        return dds_error(SPINDLE_ENOMEM, "no memory for the configuration %s", path);
    }
    memcpy(copy, text, len);
    copy[len] = '\0';
    set_defaults(state.config);
    int line = ini_parse_string(copy, on_key, &state);
    free(copy);
    int rc;
    if (state.rc != 0)
        rc = dds_error(SPINDLE_ECONFIG, "%s:%d: %s", path, line, state.message);
    else if (line != 0)
        rc = dds_error(SPINDLE_ECONFIG, "%s:%d: not an INI line", path, line);
    else if (memchr(text, '\0', len) != NULL)
        rc = dds_error(SPINDLE_ECONFIG, "%s: a NUL byte in the text", path);
    else
        rc = check_whole(&state, path);
    if (rc != 0) {
        free(state.config);
        return rc;
    }
    *out = state.config;
    return 0;
}

int spindle_dds_config_load(const char *path, struct spindle_dds_config **out)
{
    if (path == NULL)
        return dds_error(SPINDLE_EINVAL, "NULL configuration path");
    FILE *file = fopen(path, "r");
    if (file == NULL)
        return dds_error(SPINDLE_ENOENT, "%s: %s", path, strerror(errno));
    char *text = NULL;
    size_t len = 0, capacity = 0;
    int rc = 0;
    for (;;) {
        if (len + 4096 > capacity) {
            capacity = capacity * 2 + 4096;
            char *grown = capacity <= (16u << 20) ? realloc(text, capacity) : NULL;
            if (grown == NULL) {
                rc = dds_error(SPINDLE_ENOMEM, "%s: too large or no memory", path);
                break;
            }
            text = grown;
        }
        size_t got = fread(text + len, 1, capacity - len, file);
        len += got;
        if (got == 0)
            break;
    }
    if (rc == 0 && ferror(file))
        rc = dds_error(SPINDLE_EIO, "%s: read error", path);
    fclose(file);
    if (rc == 0)
        rc = spindle_dds_config_parse(text, len, path, out);
    free(text);
    return rc;
}

const struct spindle_dds_participant_config *
spindle_dds_config_participant(const struct spindle_dds_config *config, const char *name)
{
    for (uint32_t i = 0; config != NULL && name != NULL && i < config->num_participants; i++)
        if (strcmp(config->participants[i].name, name) == 0)
            return &config->participants[i];
    return NULL;
}

const struct spindle_dds_topic_config *
spindle_dds_config_topic(const struct spindle_dds_config *config, const char *name)
{
    for (uint32_t i = 0; config != NULL && name != NULL && i < config->num_topics; i++)
        if (strcmp(config->topics[i].name, name) == 0)
            return &config->topics[i];
    return NULL;
}
