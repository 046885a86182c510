/*
 * The public handle's life (include/spindle/group.h): options, creation of
 * a member of a new group or of a joiner, shutdown, leave and destroy. The
 * membership layer (src/view) does the work; this file checks what the
 * application gave and translates it.
 */
#include <errno.h>
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "group/admin.h"
#include "group/group_impl.h"
#include "transport/transport.h"
#include "util/crc32c.h"
#include "util/error.h"
#include "util/log.h"
#include "util/name.h"

static int check_timeouts(const struct spindle_group_options *options)
{
    if (options->bootstrap_timeout_ms <= 0)
        return sp_error(SPINDLE_EINVAL, "bootstrap_timeout_ms %d must be > 0",
                        options->bootstrap_timeout_ms);
    if (options->failure_timeout_ms <= 0)
        return sp_error(SPINDLE_EINVAL, "failure_timeout_ms %d must be > 0",
                        options->failure_timeout_ms);
    if (options->slow_member_ms < 0)
        return sp_error(SPINDLE_EINVAL, "slow_member_ms %d must be >= 0 (0: never remove)",
                        options->slow_member_ms);
    if (options->slow_member_ms > 0 && !options->tolerate_failures)
        return sp_error(SPINDLE_EINVAL,
                        "slow_member_ms %d needs tolerate_failures (a removal is a view change)",
                        options->slow_member_ms);
    if (options->p2p_window > SPINDLE_P2P_MAX_WINDOW)
        return sp_error(SPINDLE_EINVAL, "p2p_window %u must be 0 (default %u) or 1..%u",
                        options->p2p_window, SPINDLE_P2P_DEFAULT_WINDOW, SPINDLE_P2P_MAX_WINDOW);
    return 0;
}

/* One way to hand the state over on each side; state_write runs on the
 * membership thread, which dispatch mode keeps application code off. */
static int check_state_transfer(const struct spindle_group_options *options)
{
    if (options->state_write != NULL && options->state_save != NULL)
        return sp_error(SPINDLE_EINVAL, "state_save and state_write are both set: give one");
    if (options->state_read != NULL && options->state_load != NULL)
        return sp_error(SPINDLE_EINVAL, "state_load and state_read are both set: give one");
    if (options->state_write != NULL && options->dispatch)
        return sp_error(SPINDLE_ENOTSUP,
                        "state_write cannot run in dispatch mode (it would run on the library's "
                        "thread): use state_save");
    return 0;
}

/* A dedicated polling CPU must be one this process may run on. */
static int check_poll_cpu(const struct spindle_group_options *options)
{
    if (!options->poll_dedicated)
        return 0;
    cpu_set_t set;
    if (sched_getaffinity(0, sizeof set, &set) != 0)
        return sp_error(SPINDLE_EIO, "poll_cpu %u: cannot read this process's CPUs: %s",
                        options->poll_cpu, strerror(errno));
    if (options->poll_cpu >= CPU_SETSIZE || !CPU_ISSET(options->poll_cpu, &set))
        return sp_error(SPINDLE_EINVAL,
                        "poll_cpu %u is not a CPU this process may run on (it may use %d CPUs)",
                        options->poll_cpu, CPU_COUNT(&set));
    return 0;
}

static int check_options(const struct spindle_group_options *options, uint32_t num_subgroups)
{
    if (options->join == NULL) { /* a joiner's self and num_members come from the group */
        if (options->num_members == 0 || options->num_members > SPINDLE_MAX_MEMBERS)
            return sp_error(SPINDLE_EINVAL, "num_members %u must be 1..%u", options->num_members,
                            SPINDLE_MAX_MEMBERS);
        if (options->self >= options->num_members)
            return sp_error(SPINDLE_EINVAL, "self %u must be below num_members %u", options->self,
                            options->num_members);
    }
    if (num_subgroups == 0)
        return sp_error(SPINDLE_EINVAL, "num_subgroups 0: a group needs at least one subgroup");
    if (num_subgroups > SPINDLE_MAX_SUBGROUPS)
        return sp_error(SPINDLE_EINVAL, "num_subgroups %u exceeds the limit of %u", num_subgroups,
                        SPINDLE_MAX_SUBGROUPS);
    int rc = check_timeouts(options);
    if (rc == 0)
        rc = check_state_transfer(options);
    if (rc == 0)
        rc = check_poll_cpu(options);
    if (rc == 0 && tp_backend_find(options->transport) == NULL)
        rc = SPINDLE_ENOTSUP; /* the message names the transport and the built ones */
    return rc;
}

static int convert_subgroup(const struct spindle_subgroup_config *config, uint32_t index,
                            uint32_t num_rows, struct smc_layout *layout)
{
    memset(layout, 0, sizeof *layout);
    if (config->num_members > num_rows || config->num_members == 0)
        return sp_error(SPINDLE_EINVAL, "subgroup %u: num_members %u must be 1..%u", index,
                        config->num_members, num_rows);
    if (config->num_senders > config->num_members)
        return sp_error(SPINDLE_EINVAL, "subgroup %u: num_senders %u exceeds num_members %u", index,
                        config->num_senders, config->num_members);
    if (config->members == NULL || (config->num_senders > 0 && config->senders == NULL))
        return sp_error(SPINDLE_EINVAL, "subgroup %u: members or senders array is NULL", index);
    layout->num_members = config->num_members;
    memcpy(layout->members, config->members, config->num_members * sizeof(uint32_t));
    layout->num_senders = config->num_senders;
    if (config->num_senders > 0)
        memcpy(layout->senders, config->senders, config->num_senders * sizeof(uint32_t));
    layout->window_size = config->window_size;
    layout->max_payload = config->max_payload;
    layout->mode = config->mode;
    return smc_layout_validate(layout, index, num_rows);
}

/* Logged delivery (docs/LOGS.md): the listed subgroups exist, are atomic,
 * and have a directory; they become config's bits. */
static int logged_of(const struct spindle_group_options *o,
                     const struct spindle_subgroup_config *subgroups, uint32_t num_subgroups,
                     struct view_config *config)
{
    if (o->num_logged_subgroups > 0 && o->logged_subgroups == NULL)
        return sp_error(SPINDLE_EINVAL, "num_logged_subgroups %u but logged_subgroups is NULL",
                        o->num_logged_subgroups);
    if (o->num_logged_subgroups > 0 && o->log_dir == NULL)
        return sp_error(SPINDLE_EINVAL,
                        "%u logged subgroups but no log_dir: each member needs a log directory "
                        "of its own",
                        o->num_logged_subgroups);
    for (uint32_t i = 0; i < o->num_logged_subgroups; i++) {
        uint32_t g = o->logged_subgroups[i];
        if (g >= num_subgroups)
            return sp_error(SPINDLE_EINVAL,
                            "logged_subgroups[%u] is %u, but the group has %u subgroups", i, g,
                            num_subgroups);
        if (subgroups[g].mode != SPINDLE_MODE_ATOMIC)
            return sp_error(SPINDLE_EINVAL,
                            "subgroup %u is unordered and cannot be logged: its members deliver "
                            "on receipt, in no order they share, so their logs could not agree; "
                            "make it atomic (SPINDLE_MODE_ATOMIC) or leave it unlogged",
                            g);
        config->logged[g / 64] |= UINT64_C(1) << (g % 64);
    }
    config->log_dir = o->log_dir;
    config->persisted = o->persisted;
    config->persisted_ctx = o->persisted_ctx;
    config->replay = o->replay;
    config->replay_ctx = o->replay_ctx;
    return 0;
}

/* The upcalls as the membership layer calls them: the application's,
 * marked (group_upcall.c), or, in dispatch mode, queued. */
static void upcalls_of(struct spindle_group *group, struct view_config *out)
{
    const struct spindle_group_options *o = &group->options;
    if (group->dispatch != NULL) {
        out->deliver = o->deliver != NULL ? group_dispatch_deliver : NULL;
        out->view_changed = o->view_changed != NULL ? group_dispatch_view : NULL;
        out->send_ready = o->send_ready != NULL ? group_dispatch_send_ready : NULL;
        out->p2p_deliver = o->p2p_deliver != NULL ? group_dispatch_p2p : NULL;
        out->queue_room = group_dispatch_room;
        out->queue_progress = group_dispatch_progress;
        out->queue_ctx = group;
        out->queue_overhead = SPINDLE_DISPATCH_OVERHEAD;
        out->report_at_install = true;
        out->stopped = group_dispatch_stopped;
        out->stopped_ctx = group;
    } else {
        out->deliver = o->deliver != NULL ? group_upcall_deliver : NULL;
        out->view_changed = o->view_changed != NULL ? group_upcall_view : NULL;
        out->send_ready = o->send_ready != NULL ? group_upcall_send_ready : NULL;
        out->p2p_deliver = o->p2p_deliver != NULL ? group_upcall_p2p : NULL;
    }
    out->p2p_ctx = group;
    out->deliver_ctx = group;
    out->view_ctx = group;
    out->send_ready_ctx = group;
    out->change_done = o->send_ready != NULL ? group_send_change_done : NULL;
    out->change_done_ctx = group;
}

/* Dispatch mode's queue, sized for the largest message of any subgroup. */
static int dispatch_of(struct spindle_group *group, const struct spindle_subgroup_config *subgroups,
                       uint32_t num_subgroups)
{
    if (!group->options.dispatch)
        return 0;
    uint32_t largest = 0;
    for (uint32_t g = 0; g < num_subgroups; g++)
        if (subgroups[g].max_payload > largest && subgroups[g].max_payload <= SPINDLE_MAX_PAYLOAD)
            largest = subgroups[g].max_payload;
    /* Point-to-point messages share the queue and its bound. */
    if (group->options.p2p_deliver != NULL && largest < SPINDLE_P2P_MAX_PAYLOAD)
        largest = SPINDLE_P2P_MAX_PAYLOAD;
    return group_dispatch_create(&group->options, largest, &group->dispatch);
}

/* What the membership layer needs of the options. */
static void view_config_of(struct spindle_group *group, struct view_config *out)
{
    const struct spindle_group_options *o = &group->options;
    memset(out, 0, sizeof *out);
    out->self = o->self;
    out->num_initial = o->num_members;
    out->failure_timeout_ms = o->failure_timeout_ms;
    out->slow_member_ms = o->slow_member_ms;
    out->tie_breaker = o->tie_breaker;
    out->bootstrap_timeout_ms = o->bootstrap_timeout_ms;
    out->keys = &group->keys;
    out->tolerate_failures = o->tolerate_failures;
    out->transport.backend = o->transport;
    out->transport.provider = o->provider;
    out->transport.device = o->device;
    if (group->boot.kind == SPINDLE_BOOTSTRAP_TCP && o->join == NULL)
        out->transport.host = group->boot.hosts[o->self].host;
    sst_engine_options_default(&out->engine);
    out->engine.early_unlock = o->early_unlock;
    out->engine.poll_dedicated = o->poll_dedicated;
    out->engine.poll_cpu = o->poll_cpu;
    out->batching = o->batching;
    out->null_sends = o->null_sends;
    out->own_inline = o->own_inline;
    out->p2p_window = o->p2p_window;
    upcalls_of(group, out);
    out->layout = o->layout;
    out->layout_ctx = o->layout_ctx;
    out->state_save = o->state_save;
    out->state_save_ctx = o->state_ctx;
    if (group->dispatch != NULL && o->state_save != NULL) {
        /* Taken in order with the upcalls, by the dispatching thread. */
        out->state_save = group_dispatch_state_save;
        out->state_save_ctx = group;
    }
    out->state_write = o->state_write;
    out->state_load = o->state_load;
    out->state_read = o->state_read;
    out->state_ctx = o->state_ctx;
}

/*
 * This member's identity (spindle_group_options.member_name, incarnation):
 * the given name, checked, or a default that stays the same when the
 * process starts again with the same options: its control address, else
 * its index and host name. The incarnation defaults to the wall clock.
 */
static int identity_of(const struct spindle_group *group, struct spindle_member_identity *out)
{
    const struct spindle_group_options *o = &group->options;
    memset(out, 0, sizeof *out);
    int rc = 0;
    if (o->member_name != NULL) {
        rc = sp_check_name(o->member_name, "member_name: the");
        if (rc == 0)
            snprintf(out->name, sizeof out->name, "%s", o->member_name);
    } else {
        const char *address = o->join != NULL ? o->bootstrap : NULL;
        char text[CTL_HOST_MAX + 8];
        if (o->join == NULL && group->boot.kind == SPINDLE_BOOTSTRAP_TCP) {
            const struct ctl_address *own = &group->boot.hosts[o->self];
            snprintf(text, sizeof text, "%s:%u", own->host, own->port);
            address = text;
        }
        char host[SPINDLE_MEMBER_NAME_MAX] = "";
        size_t length = address != NULL ? strlen(address) : 0;
        if (address != NULL && length < sizeof out->name)
            memcpy(out->name, address, length + 1);
        else if (address != NULL) /* too long to be a name: a stable digest of it */
            snprintf(out->name, sizeof out->name, "member-%08x",
                     sp_crc32c(0, address, strlen(address)));
        else if (gethostname(host, sizeof host - 1) == 0 && sp_check_name(host, "host") == 0)
            snprintf(out->name, sizeof out->name, "member-%u@%.40s", o->self, host);
        else
            snprintf(out->name, sizeof out->name, "member-%u", o->self);
        if (sp_check_name(out->name, "the default member") < 0)
            snprintf(out->name, sizeof out->name, "member-%u", o->self);
    }
    out->incarnation = o->incarnation;
    if (out->incarnation == 0) {
        struct timespec now;
        clock_gettime(CLOCK_REALTIME, &now);
        out->incarnation = (uint64_t)now.tv_sec * 1000000000ull + (uint64_t)now.tv_nsec;
    }
    return rc;
}

/* Reads options.key_file (docs/SECURITY.md): it protects TCP control
 * channels, so a directory bootstrap (one host, guarded by the
 * directory's permissions) refuses it rather than ignore it. */
static int load_key(struct spindle_group *group)
{
    const char *path = group->options.key_file;
    if (path == NULL && group->options.accept_key_file != NULL)
        return sp_error(SPINDLE_EINVAL, "accept_key_file %s needs key_file (the key to dial with)",
                        group->options.accept_key_file);
    if (path == NULL)
        return 0;
    if (group->options.join == NULL && group->boot.kind != SPINDLE_BOOTSTRAP_TCP)
        return sp_error(SPINDLE_EINVAL,
                        "key_file %s needs a TCP bootstrap (host:port list); a directory "
                        "bootstrap is protected by the directory's permissions",
                        path);
    int rc = ctl_crypto_init();
    if (rc == 0)
        rc = ctl_key_load(path, &group->keys);
    /* Second in the ring: accepted from dialers, never dialed with. */
    if (rc == 0 && group->options.accept_key_file != NULL)
        rc = ctl_key_load(group->options.accept_key_file, &group->keys);
    return rc;
}

SPINDLE_API int spindle_group_set_keys(spindle_group_t *group, const char *key_file,
                                       const char *accept_key_file)
{
    if (group == NULL || key_file == NULL)
        return sp_error(SPINDLE_EINVAL, "spindle_group_set_keys: %s is NULL",
                        group == NULL ? "group" : "key_file");
    if (group->keys.count == 0)
        return sp_error(SPINDLE_EINVAL, "spindle_group_set_keys: the group was created without "
                                        "a key; a key cannot be added to a running group");
    struct ctl_keyring keys = {0};
    int rc = ctl_key_load(key_file, &keys);
    if (rc == 0 && accept_key_file != NULL)
        rc = ctl_key_load(accept_key_file, &keys);
    /* The fabric endpoint authenticates its connection set-up with the
     * keys too (docs/SECURITY.md); the engine is open while the group is. */
    struct sst_engine *engine = __atomic_load_n(&group->membership.engine, __ATOMIC_ACQUIRE);
    if (rc == 0 && engine != NULL)
        rc = sst_engine_set_keys(engine, keys.key, keys.count);
    if (rc == 0) {
        rc = ctl_set_keys(group->membership.ctl, &keys);
        if (rc != 0 && engine != NULL) /* keep the two in step: back to the keys in use */
            (void)sst_engine_set_keys(engine, group->keys.key, group->keys.count);
    }
    if (rc == 0)
        group->keys = keys; /* the old key's bytes go with it */
    ctl_keyring_clear(&keys);
    return rc;
}

/* A member whose log holds an earlier run (docs/LOGS.md "Total restart"). */
static int create_restarted(struct spindle_group *group, const struct smc_layout *layouts,
                            const struct spindle_subgroup_config *subgroups, uint32_t num_subgroups)
{
    const struct spindle_group_options *options = &group->options;
    if (group->boot.kind != SPINDLE_BOOTSTRAP_TCP)
        return sp_error(SPINDLE_EINVAL,
                        "%s holds the log of an earlier run: restarting from it needs a TCP "
                        "bootstrap (host:port list), through which the members find each other; "
                        "remove the directory to start a new group",
                        options->log_dir);
    snprintf(group->membership.group_name, sizeof group->membership.group_name, "%s",
             group->group_name);
    int rc = view_restart(&group->membership, group->boot.hosts, options->num_members, layouts,
                          num_subgroups, subgroups);
    if (rc == 0)
        group->options.self = group->membership.config.self;
    return rc;
}

/* A member of a new group, from its member list. */
static int create_first(struct spindle_group *group,
                        const struct spindle_subgroup_config *subgroups, uint32_t num_subgroups)
{
    const struct spindle_group_options *options = &group->options;
    if (options->group_name != NULL)
        snprintf(group->group_name, sizeof group->group_name, "%s", options->group_name);
    else
        snprintf(group->group_name, sizeof group->group_name, "spindle-%08x",
                 sp_crc32c(0, options->bootstrap, strlen(options->bootstrap)));
    struct smc_layout *layouts = calloc(num_subgroups, sizeof *layouts);
    if (layouts == NULL)
        return sp_error(SPINDLE_ENOMEM, "no memory for %u subgroup layouts", num_subgroups);
    int rc = 0;
    for (uint32_t g = 0; g < num_subgroups && rc == 0; g++)
        rc = convert_subgroup(&subgroups[g], g, options->num_members, &layouts[g]);
    /* A log of an earlier run: the group restarts from the logs. */
    int restart = rc == 0 ? view_restart_wanted(&group->membership) : 0;
    if (restart != 0) {
        rc = restart < 0 ? restart : create_restarted(group, layouts, subgroups, num_subgroups);
        free(layouts);
        return rc;
    }
    /* The transport opens first: its errors (a missing provider, a device
     * that is not there) are the member's own and need no peers. */
    if (rc == 0)
        rc = view_prepare(&group->membership, group->group_name, layouts, num_subgroups,
                          options->num_members);
    free(layouts);
    struct ctl *ctl = NULL;
    struct ctl_versions versions = view_ctl_versions();
    if (rc == 0)
        rc = group_bootstrap_open(&group->boot, group->group_name, options->self,
                                  options->num_members, &versions, &group->keys,
                                  options->bootstrap_timeout_ms, &ctl);
    if (rc == 0)
        rc = view_start(&group->membership, ctl,
                        group->boot.kind == SPINDLE_BOOTSTRAP_TCP ? group->boot.hosts : NULL);
    return rc;
}

/* A joiner (options.join): its own address is options.bootstrap. */
static int create_joiner(struct spindle_group *group,
                         const struct spindle_subgroup_config *subgroups, uint32_t num_subgroups)
{
    const struct spindle_group_options *options = &group->options;
    if (!options->tolerate_failures)
        return sp_error(SPINDLE_EINVAL, "joining a group (options.join) needs tolerate_failures");
    struct ctl_address self, contact;
    const char *own = options->bootstrap, *join = options->join;
    int rc = ctl_address_parse(own, own != NULL ? strlen(own) : 0, "the joiner's bootstrap address",
                               &self);
    if (rc == 0)
        rc = ctl_address_parse(join, strlen(join), "the join address", &contact);
    if (rc < 0)
        return rc;
    if (options->group_name != NULL)
        snprintf(group->membership.group_name, sizeof group->membership.group_name, "%s",
                 options->group_name);
    rc = view_join(&group->membership, &self, &contact, subgroups, num_subgroups);
    if (rc == 0)
        group->options.self = group->membership.config.self;
    return rc;
}

int group_create_with(const struct spindle_group_options *options,
                      const struct spindle_subgroup_config *subgroups, uint32_t num_subgroups,
                      const struct group_test_options *test, spindle_group_t **out)
{
    if (options == NULL || out == NULL || (subgroups == NULL && num_subgroups > 0))
        return sp_error(SPINDLE_EINVAL, "spindle_group_create: null argument");
    int rc = check_options(options, num_subgroups);
    if (rc < 0)
        return rc;
    struct spindle_group *group = calloc(1, sizeof *group);
    if (group == NULL)
        return sp_error(SPINDLE_ENOMEM, "no memory for the group handle");
    group->options = *options;
    pthread_mutex_init(&group->end_lock, NULL);
    if (options->join == NULL)
        rc = group_bootstrap_parse(options, &group->boot);
    if (rc == 0)
        rc = load_key(group);
    if (rc == 0)
        rc = dispatch_of(group, subgroups, num_subgroups);
    struct view_config config;
    view_config_of(group, &config);
    if (rc == 0)
        rc = identity_of(group, &config.identity);
    if (rc == 0)
        rc = logged_of(options, subgroups, num_subgroups, &config);
    if (test != NULL)
        config.smc_first_position = test->smc_first_position;
    view_membership_init(&group->membership, &config);
    if (test != NULL) {
        group->membership.log_queue_bytes = test->log_queue_bytes;
        group->membership.log_segment_bytes = test->log_segment_bytes;
        group->membership.fetch_slice_bytes = test->fetch_slice_bytes;
    }
    if (rc == 0)
        rc = options->join != NULL ? create_joiner(group, subgroups, num_subgroups)
                                   : create_first(group, subgroups, num_subgroups);
    /* Once the member id is known (a joiner learns it from the group). */
    if (rc == 0)
        rc = admin_start(group, &group->admin);
    if (rc < 0) {
        spindle_group_destroy(group);
        return rc;
    }
    *out = group;
    return 0;
}

SPINDLE_API int spindle_group_identity(spindle_group_t *group, uint32_t member_id,
                                       struct spindle_member_identity *out)
{
    if (group == NULL || out == NULL)
        return sp_error(SPINDLE_EINVAL, "spindle_group_identity: null argument");
    const struct group_upcall *u = group_upcall_of(group);
    return view_identity(&group->membership, member_id, out, u != NULL && u->lockless);
}

static int shutdown_locked(spindle_group_t *group, int timeout_ms);

SPINDLE_API int spindle_group_shutdown(spindle_group_t *group, int timeout_ms)
{
    if (group == NULL)
        return sp_error(SPINDLE_EINVAL, "group is NULL");
    int refused = group_upcall_refuse(group, "spindle_group_shutdown");
    if (refused < 0)
        return refused;
    pthread_mutex_lock(&group->end_lock);
    int rc = shutdown_locked(group, timeout_ms);
    pthread_mutex_unlock(&group->end_lock);
    return rc;
}

static int shutdown_locked(spindle_group_t *group, int timeout_ms)
{
    if (group->shut_down)
        return 0;
    int rc = spindle_flush(group, timeout_ms);
    /* From here on departures are the others finishing too: after this
     * member's barrier completes, every member has flushed and may exit at
     * once, which must not start a view change. */
    view_closing(&group->membership);
    /* A member that stopped on its own (e.g. cut off in a minority) has
     * nobody to meet: skip the barrier. */
    int stopped = view_status(&group->membership);
    int barrier = stopped < 0 ? stopped : spindle_barrier(group, timeout_ms);
    if (rc == 0)
        rc = barrier;
    group->shut_down = true;
    view_stop(&group->membership);
    group_dispatch_close(group->dispatch); /* what is queued may still be dispatched */
    return rc;
}

/* Why a leave cannot start (end_lock held). */
static int leave_refused(spindle_group_t *group)
{
    if (!group->options.tolerate_failures)
        return sp_error(SPINDLE_ENOTSUP, "leave needs tolerate_failures (without it the "
                                         "departure of a member fails the group)");
    if (group->shut_down)
        return sp_error(SPINDLE_ESHUTDOWN, "leave: the member already left or shut down");
    return view_status(&group->membership);
}

int group_can_leave(spindle_group_t *group)
{
    /* Not waiting: the lock may be held by a shutdown's barrier. */
    if (pthread_mutex_trylock(&group->end_lock) != 0)
        return sp_error(SPINDLE_ESHUTDOWN, "leave: the member is shutting down or leaving");
    int rc = leave_refused(group);
    pthread_mutex_unlock(&group->end_lock);
    return rc;
}

int group_leave_by(spindle_group_t *group, int timeout_ms, const char *why)
{
    pthread_mutex_lock(&group->end_lock);
    int rc = leave_refused(group);
    /* Once flushed, every own message is stable, i.e. received by every
     * member, so the survivors' trim delivers all of them. */
    if (rc == 0)
        rc = spindle_flush(group, timeout_ms);
    if (rc == 0) {
        view_leave(&group->membership);
        group->shut_down = true;
        group_dispatch_close(group->dispatch);
        /* After the multicast stopped: once the status says so, sends
         * fail (and say why). */
        if (why != NULL)
            view_set_terminal(&group->membership, SPINDLE_ESHUTDOWN, why);
    }
    pthread_mutex_unlock(&group->end_lock);
    return rc;
}

SPINDLE_API int spindle_group_leave(spindle_group_t *group, int timeout_ms)
{
    if (group == NULL)
        return sp_error(SPINDLE_EINVAL, "group is NULL");
    int refused = group_upcall_refuse(group, "spindle_group_leave");
    if (refused < 0)
        return refused;
    return group_leave_by(group, timeout_ms, NULL);
}

SPINDLE_API void spindle_group_destroy(spindle_group_t *group)
{
    if (group == NULL)
        return;
    if (group_upcall_refuse(group, "spindle_group_destroy") < 0) {
        SP_LOG_ERR("group", "%s: the group is not destroyed", spindle_errmsg());
        return;
    }
    admin_stop(group->admin); /* first: it may be running a leave */
    view_membership_destroy(&group->membership);
    group_dispatch_destroy(group->dispatch);
    ctl_keyring_clear(&group->keys);
    pthread_mutex_destroy(&group->end_lock);
    free(group);
}
