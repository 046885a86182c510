/* A program built against an installed libspindle, as a user would build it:
 * one member multicasts ten messages to itself through the public API and
 * checks it delivered exactly those, in order. Exit 0 on success. */
#include <stdio.h>
#include <string.h>

#include <spindle/spindle.h>

#define MESSAGES 10

static unsigned delivered;
static int out_of_order;

static void deliver(void *ctx, const struct spindle_message *messages, size_t count)
{
    (void)ctx;
    for (size_t i = 0; i < count; i++) {
        unsigned value;
        if (messages[i].length != sizeof value) {
            out_of_order++;
            continue;
        }
        memcpy(&value, messages[i].data, sizeof value);
        if (value != delivered)
            out_of_order++;
        delivered++;
    }
}

int main(int argc, char **argv)
{
    if (argc != 2) {
        fprintf(stderr, "usage: %s BOOTSTRAP_DIR\n", argv[0]);
        return 2;
    }
    struct spindle_group_options options;
    spindle_group_options_init(&options);
    options.bootstrap = argv[1];
    options.bootstrap_kind = SPINDLE_BOOTSTRAP_DIR;
    options.deliver = deliver;
    uint32_t self = 0;
    struct spindle_subgroup_config subgroup = {.members = &self,
                                               .num_members = 1,
                                               .senders = &self,
                                               .num_senders = 1,
                                               .window_size = 4,
                                               .max_payload = 64,
                                               .mode = SPINDLE_MODE_ATOMIC};
    spindle_group_t *group = NULL;
    if (spindle_group_create(&options, &subgroup, 1, &group) != 0) {
        fprintf(stderr, "consumer: %s\n", spindle_errmsg());
        return 1;
    }
    int rc = 0;
    for (unsigned i = 0; i < MESSAGES && rc == 0; i++)
        rc = spindle_send(group, 0, &i, sizeof i, 0);
    if (rc == 0)
        rc = spindle_flush(group, 10000);
    if (rc == 0)
        rc = spindle_group_shutdown(group, 10000);
    if (rc != 0)
        fprintf(stderr, "consumer: %s\n", spindle_errmsg());
    spindle_group_destroy(group);
    printf("consumer (headers %s, library %s): delivered %u of %d, %d out of order\n",
           SPINDLE_VERSION_STRING, spindle_version(), delivered, MESSAGES, out_of_order);
    return rc == 0 && delivered == MESSAGES && out_of_order == 0 ? 0 : 1;
}
