/*
 * The spindle_dds configuration loader: a full file read back field by
 * field, defaults, every kind of refusal naming the line, key and value,
 * and the layout rule placing members in topics by name.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>

#include <cmocka.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "spindle_dds.h"

/* The layout rule lives in the library's internals. */
#include "../../examples/dds/dds_impl.h"

static const char full[] = "[dds]\n"
                           "group = sensors\n"
                           "founders = 0, 1\n"
                           "log_dir = /tmp/dds-logs\n"
                           "failure_timeout_ms = 1500\n"
                           "[participant.0]\nname = station\nport = 18000\n"
                           "[participant.1]\nname = display\nhost = 127.0.0.2\nport = 18001\n"
                           "client_port = 18101\nclient_bind = 0.0.0.0\n"
                           "[participant.2]\nport = 18002\n"
                           "[topic.0]\nname = temperature\nqos = logged\npublishers = 0\n"
                           "subscribers = 1,2\nmax_sample_size = 10240\nhistory_depth = 7\n"
                           "window = 16\n"
                           "[topic.1]\nname = alarms\nqos = unordered\npublishers = 0,1\n";

static struct spindle_dds_config *parse_ok(const char *text)
{
    struct spindle_dds_config *config = NULL;
    int rc = spindle_dds_config_parse(text, strlen(text), "t.ini", &config);
    if (rc != 0)
        fail_msg("refused: %s", spindle_dds_errmsg());
    return config;
}

static void test_full_file_reads_back(void **state)
{
    (void)state;
    struct spindle_dds_config *c = parse_ok(full);
    assert_string_equal(c->group_name, "sensors");
    assert_string_equal(c->log_dir, "/tmp/dds-logs");
    assert_int_equal(c->failure_timeout_ms, 1500);
    assert_int_equal(c->num_participants, 3);
    assert_string_equal(c->participants[1].name, "display");
    assert_string_equal(c->participants[1].host, "127.0.0.2");
    assert_string_equal(c->participants[2].name, "participant-2");
    assert_string_equal(c->participants[2].host, "127.0.0.1");
    /* The client listener: off unless client_port, on loopback unless
     * client_bind. */
    assert_int_equal(c->participants[0].client_port, 0);
    assert_int_equal(c->participants[1].client_port, 18101);
    assert_string_equal(c->participants[1].client_bind, "0.0.0.0");
    assert_string_equal(c->participants[2].client_bind, "127.0.0.1");
    assert_true(c->participants[0].founder);
    assert_true(c->participants[1].founder);
    assert_false(c->participants[2].founder);
    assert_int_equal(c->num_topics, 2);
    const struct spindle_dds_topic_config *t = spindle_dds_config_topic(c, "temperature");
    assert_non_null(t);
    assert_int_equal(t->qos, SPINDLE_DDS_LOGGED);
    assert_int_equal(t->publishers, 1);
    assert_int_equal(t->subscribers, 6);
    assert_int_equal(t->max_sample_size, 10240);
    assert_int_equal(t->history_depth, 7);
    assert_int_equal(t->window, 16);
    const struct spindle_dds_topic_config *a = spindle_dds_config_topic(c, "alarms");
    assert_int_equal(a->id, 1);
    assert_int_equal(a->qos, SPINDLE_DDS_UNORDERED);
    assert_int_equal(a->max_sample_size, 1024); /* the defaults */
    assert_int_equal(a->history_depth, 100);
    assert_int_equal(a->window, 64);
    assert_null(spindle_dds_config_topic(c, "pressure"));
    assert_ptr_equal(spindle_dds_config_participant(c, "display"), &c->participants[1]);
    free(c);
}

/* Each bad text is refused with SPINDLE_ECONFIG and a message holding
 * the given words. */
static void refused(const char *text, const char *words)
{
    struct spindle_dds_config *config = NULL;
    int rc = spindle_dds_config_parse(text, strlen(text), "bad.ini", &config);
    if (rc != SPINDLE_ECONFIG)
        fail_msg("accepted or wrong code %d: %s", rc, text);
    assert_null(config);
    if (strstr(spindle_dds_errmsg(), words) == NULL)
        fail_msg("message \"%s\" lacks \"%s\"", spindle_dds_errmsg(), words);
}

#define ONE_PARTICIPANT "[participant.0]\nport = 1\n"
#define ONE_TOPIC       "[topic.0]\npublishers = 0\n"

static void test_refusals_name_what_is_wrong(void **state)
{
    (void)state;
    refused(ONE_PARTICIPANT ONE_TOPIC "[topic.0]\nqos = durable\n", "qos = durable");
    refused(ONE_PARTICIPANT ONE_TOPIC "[topic.0]\nmax_sample_size = 0\n", "max_sample_size = 0");
    refused(ONE_PARTICIPANT ONE_TOPIC "[topic.0]\nmax_sample_size = 2000000\n",
            "max_sample_size = 2000000");
    refused(ONE_PARTICIPANT ONE_TOPIC "[topic.0]\nwindow = 12x\n", "window = 12x");
    refused(ONE_PARTICIPANT ONE_TOPIC "[topic.0]\nsubscribers = 0,64\n", "subscribers = 0,64");
    refused(ONE_PARTICIPANT ONE_TOPIC "[topic.0]\ncolour = red\n", "unknown key");
    refused(ONE_PARTICIPANT ONE_TOPIC "[sensor]\nx = 1\n", "unknown section");
    refused(ONE_PARTICIPANT ONE_TOPIC "[participant.0]\nport = 70000\n", "port = 70000");
    refused(ONE_PARTICIPANT ONE_TOPIC "[participant.0]\nname = a b\n", "name = a b");
    refused(ONE_PARTICIPANT ONE_TOPIC "[participant.0]\nclient_port = 0\n", "client_port = 0");
    refused(ONE_PARTICIPANT ONE_TOPIC "[participant.0]\nclient_bind = \n", "client_bind");
    refused(ONE_PARTICIPANT ONE_TOPIC "[dds]\nfounders = \n", "founders");
    refused(ONE_PARTICIPANT ONE_TOPIC "[dds]\nfounders = 3\n", "founders");
    refused(ONE_PARTICIPANT ONE_TOPIC "this is not ini\n", "bad.ini:");
    refused(ONE_TOPIC, "no [participant.0]");
    refused(ONE_PARTICIPANT, "no [topic.0]");
    refused(ONE_PARTICIPANT ONE_TOPIC "[participant.2]\nport = 2\n", "[participant.1] is missing");
    refused(ONE_PARTICIPANT ONE_TOPIC "[topic.3]\npublishers = 0\n", "[topic.1] is missing");
    refused("[participant.0]\nname = x\n" ONE_TOPIC, "has no port");
    refused(ONE_PARTICIPANT "[topic.0]\nsubscribers = 0\n", "no publishers");
    refused(ONE_PARTICIPANT "[topic.0]\npublishers = 1\n", "not defined");
    refused(ONE_PARTICIPANT ONE_TOPIC "[topic.1]\nname = topic-0\npublishers = 0\n", "both named");
    refused(ONE_PARTICIPANT "[topic.0]\npublishers = 0\nqos = logged\n", "log_dir");
    refused(ONE_PARTICIPANT
            "[topic.0]\npublishers = 0\nwindow = 100000\nmax_sample_size = 100000\n",
            "ring limit");
    struct spindle_dds_config *config = NULL;
    assert_int_equal(spindle_dds_config_load("/nonexistent/dds.ini", &config), SPINDLE_ENOENT);
    assert_non_null(strstr(spindle_dds_errmsg(), "/nonexistent/dds.ini"));
}

static void test_qos_names_round_trip(void **state)
{
    (void)state;
    for (int q = SPINDLE_DDS_UNORDERED; q <= SPINDLE_DDS_LOGGED; q++) {
        enum spindle_dds_qos parsed;
        assert_int_equal(
            spindle_dds_qos_parse(spindle_dds_qos_name((enum spindle_dds_qos)q), &parsed), 0);
        assert_int_equal(parsed, q);
    }
    enum spindle_dds_qos parsed;
    assert_int_equal(spindle_dds_qos_parse("best-effort", &parsed), SPINDLE_EINVAL);
    assert_non_null(strstr(spindle_dds_errmsg(), "best-effort"));
}

static void test_layout_places_members_by_name(void **state)
{
    (void)state;
    struct spindle_dds_config *c = parse_ok(full);
    /* The view: participant 2 (rank 0, the leader), then station, display. */
    const char *names[] = {"participant-2", "station", "display"};
    struct spindle_subgroup_layout layouts[2];
    assert_int_equal(dds_layout_topics(c, names, 3, layouts), 0);
    /* temperature (logged): everyone; senders: station (rank 1). */
    assert_int_equal(layouts[0].num_members, 3);
    assert_int_equal(layouts[0].num_senders, 1);
    assert_int_equal(layouts[0].senders[0], 1);
    /* alarms (unordered, no subscribers): station and display send. */
    assert_int_equal(layouts[1].num_members, 2);
    assert_int_equal(layouts[1].members[0], 1);
    assert_int_equal(layouts[1].members[1], 2);
    assert_int_equal(layouts[1].num_senders, 2);
    /* A view holding only display: the leader keeps the logged topic,
     * and alarms' subgroup still has display. */
    const char *alone[] = {"display"};
    assert_int_equal(dds_layout_topics(c, alone, 1, layouts), 0);
    assert_int_equal(layouts[0].num_members, 1);
    assert_int_equal(layouts[0].num_senders, 0);
    assert_int_equal(layouts[1].num_members, 1);
    assert_int_equal(layouts[1].num_senders, 1);
    /* Only participant-2, which uses no unordered topic: alarms' subgroup
     * holds it all the same (a subgroup is never empty). */
    const char *other[] = {"participant-2"};
    assert_int_equal(dds_layout_topics(c, other, 1, layouts), 0);
    assert_int_equal(layouts[1].num_members, 1);
    assert_int_equal(layouts[1].num_senders, 0);
    /* A member the file does not name takes part in no topic (refusing
     * would stop every member); a view of no member is refused. */
    const char *stranger[] = {"station", "intruder"};
    assert_int_equal(dds_layout_topics(c, stranger, 2, layouts), 0);
    assert_int_equal(layouts[0].num_members, 1);
    assert_int_equal(layouts[0].members[0], 0);
    assert_int_equal(layouts[1].num_members, 1);
    assert_int_equal(layouts[1].members[0], 0);
    assert_int_equal(dds_layout_topics(c, stranger, 0, layouts), SPINDLE_EINVAL);
    free(c);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_full_file_reads_back),
        cmocka_unit_test(test_refusals_name_what_is_wrong),
        cmocka_unit_test(test_qos_names_round_trip),
        cmocka_unit_test(test_layout_places_members_by_name),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
