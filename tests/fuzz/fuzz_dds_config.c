/*
 * libFuzzer target: spindle_dds_config_parse (examples/dds/dds_config.c),
 * the topic configuration. Loading the same bytes twice must give the same
 * result; an accepted configuration must keep the promises of
 * spindle_dds.h (ids without gaps, names unique and set, every topic with
 * a publisher, members defined, sizes within the limits, a log_dir when a
 * topic is logged); a refusal must be SPINDLE_ECONFIG naming the file.
 */
#include "../../examples/dds/dds_impl.h"
#include "fuzz_common.h"

static void check_accepted(const struct spindle_dds_config *c)
{
    FUZZ_CHECK(c->num_participants >= 1 && c->num_participants <= SPINDLE_DDS_MAX_PARTICIPANTS);
    FUZZ_CHECK(c->num_topics >= 1 && c->num_topics <= SPINDLE_DDS_MAX_TOPICS);
    uint64_t all = c->num_participants == 64 ? ~0ull : (1ull << c->num_participants) - 1;
    bool logged = false;
    for (uint32_t i = 0; i < c->num_participants; i++) {
        const struct spindle_dds_participant_config *p = &c->participants[i];
        FUZZ_CHECK(p->id == i && p->port != 0);
        FUZZ_CHECK(p->name[0] != '\0' && strlen(p->name) < SPINDLE_DDS_NAME_MAX);
        FUZZ_CHECK(spindle_dds_config_participant(c, p->name) == p);
    }
    for (uint32_t i = 0; i < c->num_topics; i++) {
        const struct spindle_dds_topic_config *t = &c->topics[i];
        FUZZ_CHECK(t->id == i && t->name[0] != '\0');
        FUZZ_CHECK(spindle_dds_config_topic(c, t->name) == t);
        FUZZ_CHECK(t->publishers != 0 && ((t->publishers | t->subscribers) & ~all) == 0);
        FUZZ_CHECK(t->max_sample_size >= 1 && t->max_sample_size <= SPINDLE_DDS_MAX_SAMPLE);
        FUZZ_CHECK(t->window >= 1 && t->window <= SPINDLE_MAX_WINDOW);
        FUZZ_CHECK(t->history_depth >= 1 && t->history_depth <= SPINDLE_DDS_MAX_HISTORY);
        FUZZ_CHECK((unsigned)t->qos <= SPINDLE_DDS_LOGGED);
        logged |= t->qos == SPINDLE_DDS_LOGGED;
    }
    FUZZ_CHECK(!logged || c->log_dir[0] != '\0');
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    struct spindle_dds_config *first = NULL, *second = NULL;
    int rc = spindle_dds_config_parse((const char *)data, size, "fuzz.ini", &first);
    char message[sizeof "fuzz.ini" + 600];
    snprintf(message, sizeof message, "%s", spindle_dds_errmsg());
    int again = spindle_dds_config_parse((const char *)data, size, "fuzz.ini", &second);
    FUZZ_CHECK(rc == again);
    if (rc != 0) {
        FUZZ_CHECK(rc == SPINDLE_ECONFIG || rc == SPINDLE_ENOMEM);
        FUZZ_CHECK(first == NULL && second == NULL);
        FUZZ_CHECK(strcmp(message, spindle_dds_errmsg()) == 0);
        FUZZ_CHECK(rc != SPINDLE_ECONFIG || strncmp(message, "fuzz.ini", 8) == 0);
        return 0;
    }
    FUZZ_CHECK(memcmp(first, second, sizeof *first) == 0);
    check_accepted(first);
    free(first);
    free(second);
    return 0;
}
