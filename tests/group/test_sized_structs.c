/*
 * Sized structs (include/spindle/group.h "Sized structs", docs/ABI.md):
 * a program built against a header whose structs end earlier passes its
 * smaller sizes and works, with the members it lacks at their defaults;
 * the library never writes a byte past the program's struct (canary bytes
 * after it stay intact; under AddressSanitizer the exact-size heap copies
 * also catch a read past it); a later header's members are refused when
 * set and zeroed when filled; the first release's unsized entry points
 * still serve programs built against it. One process, groups of one.
 *
 * "A program built against an older header" is the program's struct as a
 * prefix of today's, with its size: a C struct truncated before a member
 * lays out every earlier member at the same offset.
 */
#include <setjmp.h>
#include <stdalign.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <cmocka.h>

#include <spindle/spindle.h>

/* The program of an earlier release: its options ended before dispatch
 * (so dispatch, the send_ready upcall and admin_dir are not in its
 * header), its statistics before the dispatch queue's counters. */
#define OLD_OPTIONS_SIZE offsetof(struct spindle_group_options, dispatch)
#define OLD_STATS_SIZE   offsetof(struct spindle_stats, dispatch_queue_bytes)
/* The newest member of the options, for the smallest truncation. */
#define NEWEST_OPTIONS_SIZE offsetof(struct spindle_group_options, admin_dir)
#define CANARY              0xa5
#define CANARY_BYTES        64

/* The first release's unsized entry points, as a program built against
 * its headers calls them (today's headers make these names macros). */
#undef spindle_group_options_init
#undef spindle_group_create
#undef spindle_group_stats
void spindle_group_options_init(struct spindle_group_options *options);
int spindle_group_create(const struct spindle_group_options *options,
                         const struct spindle_subgroup_config *subgroups, uint32_t num_subgroups,
                         spindle_group_t **out);
int spindle_group_stats(spindle_group_t *group, struct spindle_stats *out);
/* The first release's struct sizes (abi/libspindle.so.0.abi). */
#define BASELINE_OPTIONS_SIZE offsetof(struct spindle_group_options, persisted)
#define BASELINE_STATS_SIZE   offsetof(struct spindle_stats, dispatch_queue_bytes)

/* A program's struct of size bytes followed by canary bytes. */
struct program_struct {
    alignas(16) unsigned char bytes[sizeof(struct spindle_group_options) +
                                    sizeof(struct spindle_stats) + CANARY_BYTES];
    size_t size;
};

static void program_struct_init(struct program_struct *p, size_t size, unsigned char fill)
{
    assert_true(size + CANARY_BYTES <= sizeof p->bytes);
    memset(p->bytes, fill, sizeof p->bytes);
    p->size = size;
}

static void assert_canary_intact(const struct program_struct *p, const char *what)
{
    for (size_t i = p->size; i < p->size + CANARY_BYTES; i++)
        if (p->bytes[i] != CANARY)
            fail_msg("%s of %zu bytes: byte %zu past it was written (0x%02x)", what, p->size,
                     i - p->size, p->bytes[i]);
}

static char dir[64];
static const uint32_t self_only[] = {0};
static uint64_t delivered;

static void on_deliver(void *ctx, const struct spindle_message *m, size_t n)
{
    (void)ctx;
    (void)m;
    __atomic_add_fetch(&delivered, n, __ATOMIC_RELEASE);
}

static void next_dir(void)
{
    static unsigned n;
    snprintf(dir, sizeof dir, "/tmp/spindle-sized-%d-%u", (int)getpid(), n++);
}

static void cleanup_dir(void)
{
    char cmd[128];
    snprintf(cmd, sizeof cmd, "rm -rf %s", dir);
    assert_int_equal(system(cmd), 0);
}

static const struct spindle_subgroup_config one_subgroup = {self_only, 1,  self_only,          1,
                                                            4,         16, SPINDLE_MODE_ATOMIC};

/* The program's options filled as that program would: init, then its own
 * values in the members its header has. */
static struct spindle_group_options *program_options(struct program_struct *p, size_t size)
{
    program_struct_init(p, size, CANARY);
    struct spindle_group_options *o = (struct spindle_group_options *)p->bytes;
    assert_int_equal(spindle_group_options_init_sized(o, size), 0);
    next_dir();
    o->bootstrap = dir;
    o->deliver = on_deliver;
    return o;
}

static void test_options_init_writes_the_callers_size_only(void **state)
{
    (void)state;
    const size_t sizes[] = {BASELINE_OPTIONS_SIZE, OLD_OPTIONS_SIZE, NEWEST_OPTIONS_SIZE,
                            sizeof(struct spindle_group_options)};
    for (size_t i = 0; i < sizeof sizes / sizeof sizes[0]; i++) {
        struct program_struct p;
        program_struct_init(&p, sizes[i], CANARY);
        struct spindle_group_options *o = (struct spindle_group_options *)p.bytes;
        assert_int_equal(spindle_group_options_init_sized(o, sizes[i]), 0);
        assert_canary_intact(&p, "spindle_group_options");
        assert_string_equal(o->transport, "shm");
        assert_int_equal(o->failure_timeout_ms, 5000);
        assert_true(o->batching && o->null_sends && o->early_unlock);
        assert_null(o->logged_subgroups);
        /* An exact heap copy: AddressSanitizer reports any byte past it. */
        void *exact = malloc(sizes[i]);
        assert_non_null(exact);
        assert_int_equal(spindle_group_options_init_sized(exact, sizes[i]), 0);
        assert_memory_equal(exact, p.bytes, sizes[i]);
        free(exact);
    }
}

static void test_a_shorter_options_struct_creates_a_group_with_defaults_past_it(void **state)
{
    (void)state;
    struct program_struct p;
    struct spindle_group_options *o = program_options(&p, OLD_OPTIONS_SIZE);
    /* Had the library read past the program's struct, it would have taken
     * these bytes for dispatch (true), a queue bound, an upcall and an
     * admin_dir pointer. */
    memset(p.bytes + p.size, 0x01, CANARY_BYTES);
    __atomic_store_n(&delivered, 0, __ATOMIC_RELAXED);
    spindle_group_t *g = NULL;
    assert_int_equal(
        spindle_group_create_sized(o, OLD_OPTIONS_SIZE, &one_subgroup, sizeof one_subgroup, 1, &g),
        0);
    assert_int_equal(spindle_group_fd(g), SPINDLE_EINVAL); /* dispatch took its default */
    assert_int_equal(spindle_send(g, 0, "hello", 5, 0), 0);
    assert_int_equal(spindle_flush(g, 10000), 0);
    assert_int_equal(__atomic_load_n(&delivered, __ATOMIC_ACQUIRE), 1);

    struct program_struct s;
    program_struct_init(&s, OLD_STATS_SIZE, CANARY);
    struct spindle_stats *stats = (struct spindle_stats *)s.bytes;
    assert_int_equal(spindle_group_stats_sized(g, stats, OLD_STATS_SIZE), 0);
    assert_canary_intact(&s, "spindle_stats");
    assert_int_equal(stats->messages_sent, 1);
    assert_int_equal(stats->messages_delivered, 1);
    void *exact = malloc(OLD_STATS_SIZE);
    assert_non_null(exact);
    assert_int_equal(spindle_group_stats_sized(g, exact, OLD_STATS_SIZE), 0);
    free(exact);

    assert_int_equal(spindle_group_shutdown(g, 10000), 0);
    spindle_group_destroy(g);
    for (size_t i = OLD_OPTIONS_SIZE; i < OLD_OPTIONS_SIZE + CANARY_BYTES; i++)
        assert_int_equal(p.bytes[i], 0x01);
    cleanup_dir();
}

static void test_a_later_headers_members_are_zeroed_and_refused_when_set(void **state)
{
    (void)state;
    /* A program built against a later header: 16 more bytes of options. */
    const size_t later = sizeof(struct spindle_group_options) + 16;
    struct program_struct p;
    struct spindle_group_options *o = program_options(&p, later);
    for (size_t i = sizeof *o; i < later; i++)
        assert_int_equal(p.bytes[i], 0); /* init zeroed what it does not know */
    assert_canary_intact(&p, "spindle_group_options");
    p.bytes[sizeof *o + 3] = 1; /* the program asks for something this library lacks */
    spindle_group_t *g = NULL;
    assert_int_equal(
        spindle_group_create_sized(o, later, &one_subgroup, sizeof one_subgroup, 1, &g),
        SPINDLE_ENOTSUP);
    assert_null(g);
    char expected[96];
    snprintf(expected, sizeof expected, "struct spindle_group_options of %zu bytes sets byte %zu",
             later, sizeof *o + 3);
    if (strstr(spindle_errmsg(), expected) == NULL)
        fail_msg("message '%s' does not say '%s'", spindle_errmsg(), expected);

    /* Left at zero, the same program's group works. */
    p.bytes[sizeof *o + 3] = 0;
    assert_int_equal(
        spindle_group_create_sized(o, later, &one_subgroup, sizeof one_subgroup, 1, &g), 0);
    struct program_struct s;
    program_struct_init(&s, sizeof(struct spindle_stats) + 16, CANARY);
    assert_int_equal(spindle_group_stats_sized(g, (struct spindle_stats *)s.bytes, s.size), 0);
    for (size_t i = sizeof(struct spindle_stats); i < s.size; i++)
        assert_int_equal(s.bytes[i], 0);
    assert_canary_intact(&s, "spindle_stats");
    spindle_group_destroy(g);
    cleanup_dir();
}

static void test_subgroups_are_read_with_the_programs_stride(void **state)
{
    (void)state;
    /* A later header's subgroup config, 8 bytes longer, three of them. */
    const size_t stride = sizeof(struct spindle_subgroup_config) + 8;
    alignas(8) unsigned char array[3 * (sizeof(struct spindle_subgroup_config) + 8)];
    memset(array, 0, sizeof array);
    for (size_t i = 0; i < 3; i++) {
        struct spindle_subgroup_config sg = one_subgroup;
        sg.max_payload = 16 + (uint32_t)i;
        memcpy(array + i * stride, &sg, sizeof sg);
    }
    struct program_struct p;
    struct spindle_group_options *o = program_options(&p, sizeof(struct spindle_group_options));
    spindle_group_t *g = NULL;
    assert_int_equal(spindle_group_create_sized(o, p.size, (const void *)array, stride, 3, &g), 0);
    /* Subgroup 2's max_payload is 18: a 17-byte message fits, 19 does not. */
    assert_int_equal(spindle_send(g, 2, "seventeen bytes..", 17, 0), 0);
    assert_int_equal(spindle_send(g, 2, "nineteen bytes.....", 19, 0), SPINDLE_EMSGSIZE);
    spindle_group_destroy(g);
    cleanup_dir();

    array[2 * stride + sizeof(struct spindle_subgroup_config)] = 7;
    o = program_options(&p, sizeof(struct spindle_group_options));
    assert_int_equal(spindle_group_create_sized(o, p.size, (const void *)array, stride, 3, &g),
                     SPINDLE_ENOTSUP);
    assert_non_null(strstr(spindle_errmsg(), "struct spindle_subgroup_config"));
    cleanup_dir();
}

static void test_sizes_below_the_first_release_are_refused(void **state)
{
    (void)state;
    struct program_struct p;
    program_struct_init(&p, 8, CANARY);
    struct spindle_group_options *o = (struct spindle_group_options *)p.bytes;
    assert_int_equal(spindle_group_options_init_sized(o, 8), SPINDLE_EINVAL);
    assert_non_null(strstr(spindle_errmsg(), "struct spindle_group_options of 8 bytes"));
    for (size_t i = 0; i < sizeof p.bytes; i++)
        assert_int_equal(p.bytes[i], CANARY);
    spindle_group_t *g = NULL;
    assert_int_equal(spindle_group_create_sized(o, 8, &one_subgroup, sizeof one_subgroup, 1, &g),
                     SPINDLE_EINVAL);
    o = program_options(&p, sizeof(struct spindle_group_options));
    assert_int_equal(spindle_group_create_sized(o, p.size, &one_subgroup, 8, 1, &g),
                     SPINDLE_EINVAL);
    assert_non_null(strstr(spindle_errmsg(), "struct spindle_subgroup_config of 8 bytes"));
    assert_null(g);
    assert_int_equal(
        spindle_group_create_sized(o, p.size, &one_subgroup, sizeof one_subgroup, 1, &g), 0);
    struct program_struct s;
    program_struct_init(&s, 8, CANARY);
    assert_int_equal(spindle_group_stats_sized(g, (struct spindle_stats *)s.bytes, 8),
                     SPINDLE_EINVAL);
    assert_non_null(strstr(spindle_errmsg(), "struct spindle_stats of 8 bytes"));
    assert_int_equal(s.bytes[0], CANARY);
    spindle_group_destroy(g);
    cleanup_dir();
}

static void test_the_first_releases_entry_points_use_its_sizes(void **state)
{
    (void)state;
    struct program_struct p;
    program_struct_init(&p, BASELINE_OPTIONS_SIZE, CANARY);
    struct spindle_group_options *o = (struct spindle_group_options *)p.bytes;
    spindle_group_options_init(o);
    assert_canary_intact(&p, "spindle_group_options (unsized init)");
    assert_string_equal(o->transport, "shm");
    next_dir();
    o->bootstrap = dir;
    spindle_group_t *g = NULL;
    assert_int_equal(spindle_group_create(o, &one_subgroup, 1, &g), 0);
    struct program_struct s;
    program_struct_init(&s, BASELINE_STATS_SIZE, CANARY);
    assert_int_equal(spindle_group_stats(g, (struct spindle_stats *)s.bytes), 0);
    assert_canary_intact(&s, "spindle_stats (unsized)");
    assert_int_equal(((struct spindle_stats *)s.bytes)->window_holder, -1);
    spindle_group_destroy(g);
    cleanup_dir();
}

/* A setup lays out its members after the program's options and hands out
 * its subgroups in the program's stride. */
static void test_a_setup_takes_the_programs_layout(void **state)
{
    (void)state;
    setenv("SPINDLE_RANK", "0", 1);
    setenv("SPINDLE_SIZE", "2", 1);
    const size_t options_size = OLD_OPTIONS_SIZE;
    const size_t stride = sizeof(struct spindle_subgroup_config) + 8;
    struct tail { /* struct spindle_group_setup after its options */
        struct spindle_subgroup_config *subgroups;
        uint32_t num_subgroups;
        uint32_t local_rank;
        void *storage;
    };
    struct program_struct p;
    program_struct_init(&p, options_size + sizeof(struct tail), CANARY);
    struct spindle_group_setup *setup = (struct spindle_group_setup *)p.bytes;
    assert_int_equal(spindle_group_setup_from_env_sized(NULL, setup, options_size, stride), 0);
    assert_canary_intact(&p, "spindle_group_setup");
    struct tail tail;
    memcpy(&tail, p.bytes + options_size, sizeof tail);
    assert_int_equal(tail.num_subgroups, 1);
    assert_non_null(tail.storage);
    assert_int_equal(setup->options.num_members, 2);
    assert_string_equal(setup->options.bootstrap, "127.0.0.1:17400,127.0.0.1:17401");
    const unsigned char *sub = (const unsigned char *)tail.subgroups;
    struct spindle_subgroup_config first;
    memcpy(&first, sub, sizeof first);
    assert_int_equal(first.num_members, 2);
    assert_int_equal(first.window_size, SPINDLE_SETUP_DEFAULT_WINDOW);
    for (size_t i = sizeof first; i < stride; i++)
        assert_int_equal(sub[i], 0);
    spindle_group_setup_free_sized(setup, options_size);
    for (size_t i = 0; i < p.size; i++)
        assert_int_equal(p.bytes[i], 0);
    assert_canary_intact(&p, "spindle_group_setup (free)");
    unsetenv("SPINDLE_RANK");
    unsetenv("SPINDLE_SIZE");
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_options_init_writes_the_callers_size_only),
        cmocka_unit_test(test_a_shorter_options_struct_creates_a_group_with_defaults_past_it),
        cmocka_unit_test(test_a_later_headers_members_are_zeroed_and_refused_when_set),
        cmocka_unit_test(test_subgroups_are_read_with_the_programs_stride),
        cmocka_unit_test(test_sizes_below_the_first_release_are_refused),
        cmocka_unit_test(test_the_first_releases_entry_points_use_its_sizes),
        cmocka_unit_test(test_a_setup_takes_the_programs_layout),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
