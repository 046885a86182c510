/*
 * Shared by the join tests (test_view_join.c, test_view_join_keyed.c): an
 * application that counts its deliveries, remembers its last view, hands
 * its delivery count over as the state and loads a joiner's; and the
 * options those tests run with. Include after <spindle/spindle.h>.
 */
#ifndef SPINDLE_TESTS_VIEW_JOIN_APP_H
#define SPINDLE_TESTS_VIEW_JOIN_APP_H

#include <stdint.h>
#include <stdlib.h>
#include <string.h>

struct app {
    uint64_t delivered; /* atomic */
    uint64_t loaded;    /* the joiner's state, from state_load */
    uint64_t view_id;   /* atomic: last view */
};

static void on_deliver(void *ctx, const struct spindle_message *m, size_t count)
{
    (void)m;
    struct app *app = ctx;
    __atomic_add_fetch(&app->delivered, count, __ATOMIC_RELEASE);
}

static void on_view(void *ctx, const struct spindle_view_info *view)
{
    struct app *app = ctx;
    __atomic_store_n(&app->view_id, view->view_id, __ATOMIC_RELEASE);
}

static int save(void *ctx, void **data, size_t *length)
{
    struct app *app = ctx;
    uint64_t *copy = malloc(sizeof *copy);
    if (copy == NULL)
        return SPINDLE_ENOMEM;
    *copy = __atomic_load_n(&app->delivered, __ATOMIC_ACQUIRE);
    *data = copy;
    *length = sizeof *copy;
    return 0;
}

static int load(void *ctx, const void *data, size_t length)
{
    struct app *app = ctx;
    if (length != sizeof app->loaded)
        return SPINDLE_EINVAL;
    memcpy(&app->loaded, data, sizeof app->loaded);
    return 0;
}

static void join_app_options(struct spindle_group_options *o, struct app *app,
                             const char *bootstrap)
{
    spindle_group_options_init(o);
    o->bootstrap = bootstrap;
    o->failure_timeout_ms = 1500;
    o->bootstrap_timeout_ms = 20000;
    o->tolerate_failures = true;
    o->deliver = on_deliver;
    o->deliver_ctx = app;
    o->view_changed = on_view;
    o->view_ctx = app;
    o->state_save = save;
    o->state_load = load;
    o->state_ctx = app;
}

#endif
