/*
 * The administration endpoint's socket and thread (group/admin.h): where
 * the socket lives, who may use it, and the exchange with one client at a
 * time, bounded in bytes and time.
 */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/eventfd.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <unistd.h>

#include "config/config_env.h"
#include "group/admin.h"
#include "group/group_impl.h"
#include "util/clock.h"
#include "util/error.h"
#include "util/log.h"
#include "util/private_dir.h"

struct group_admin {
    spindle_group_t *group;
    char dir[sizeof(((struct sockaddr_un *)0)->sun_path)];
    char name[128];
    char path[sizeof(((struct sockaddr_un *)0)->sun_path)];
    int dir_fd;
    int listen_fd;
    int stop_fd; /* eventfd: destroy wakes the thread */
    dev_t dev;   /* the socket file bound, removed at stop only if still it */
    ino_t ino;
    pthread_t thread;
    bool thread_started;
    bool leave; /* set by a "leave" request, run after its answer */
};

static admin_peer_uid_fn peer_uid_hook;

/* Test hook: tests set it; nothing in src/ or tools/ calls it. */
// cppcheck-suppress unusedFunction
void admin_test_peer_uid(admin_peer_uid_fn fn)
{
    __atomic_store_n(&peer_uid_hook, fn, __ATOMIC_RELEASE);
}

int admin_default_dir(char *out, size_t size)
{
    const char *runtime = cfg_env_get("XDG_RUNTIME_DIR");
    int length = runtime != NULL && runtime[0] == '/'
                     ? snprintf(out, size, "%s/spindle", runtime)
                     : snprintf(out, size, "/tmp/spindle-%u", (unsigned)geteuid());
    if (length < 0 || (size_t)length >= size)
        return sp_error(SPINDLE_EINVAL, "admin: the default directory under %s is too long",
                        runtime != NULL ? runtime : "/tmp");
    return 0;
}

int admin_socket_name(const char *group_name, uint32_t id, char *out, size_t size)
{
    size_t used = 0;
    for (const char *p = group_name; *p != '\0' && used + 1 < size; p++) {
        char c = *p;
        bool plain = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
                     (c == '.' && used > 0) || c == '_' || c == '+' || c == '@' || c == '-';
        out[used] = c;
        if (!plain)
            out[used] = '_';
        used++;
    }
    int length = snprintf(out + used, size - used, "-%u%s", id, ADMIN_SOCKET_SUFFIX);
    if (length < 0 || (size_t)length >= size - used || group_name[used] != '\0')
        return sp_error(SPINDLE_EINVAL, "admin: the socket name of group '%s' is too long",
                        group_name);
    return 0;
}

/* ---- the exchange with one client ------------------------------------ */

/* Milliseconds left before deadline (ns), 0 when past. */
static int left_ms(uint64_t deadline)
{
    uint64_t now = sp_now_ns();
    return now >= deadline ? 0 : (int)((deadline - now + 999999) / 1000000);
}

/* Waits for events on fd, or the stop eventfd, until deadline: 1 ready,
 * 0 timed out or stopping. */
static int wait_for(const struct group_admin *admin, int fd, short events, uint64_t deadline)
{
    for (;;) {
        int ms = left_ms(deadline);
        if (ms == 0)
            return 0;
        struct pollfd fds[2] = {{fd, events, 0}, {admin->stop_fd, POLLIN, 0}};
        int n = poll(fds, 2, ms);
        if (n < 0 && errno == EINTR)
            continue;
        if (n < 0 || fds[1].revents != 0)
            return 0;
        if (fds[0].revents != 0)
            return 1;
    }
}

/* Reads one request line into line (terminator cut): its length, or
 * SPINDLE_EINVAL naming an oversized line or one not complete in time
 * (the message is the answer). */
static int read_request(const struct group_admin *admin, int fd, uint64_t deadline, char *line)
{
    size_t have = 0;
    for (;;) {
        ssize_t got = read(fd, line + have, ADMIN_REQUEST_MAX - have);
        if (got > 0) {
            char *end = memchr(line + have, '\n', (size_t)got);
            have += (size_t)got;
            if (end != NULL) {
                size_t length = (size_t)(end - line);
                if (length > 0 && line[length - 1] == '\r')
                    length--;
                return (int)length;
            }
            if (have == ADMIN_REQUEST_MAX)
                return sp_error(SPINDLE_EINVAL,
                                "admin request: no newline in the first %u bytes (a request is "
                                "one line of at most %u bytes)",
                                ADMIN_REQUEST_MAX, ADMIN_REQUEST_MAX - 1);
            continue;
        }
        if (got == 0) /* the client closed its side: what came is the line */
            return (int)have;
        if (errno == EINTR)
            continue;
        if (errno != EAGAIN && errno != EWOULDBLOCK)
            return sp_error(SPINDLE_EIO, "admin request: read failed: %s", strerror(errno));
        if (!wait_for(admin, fd, POLLIN, deadline))
            return sp_error(SPINDLE_ETIMEDOUT, "admin request: no complete line within %d ms",
                            ADMIN_CLIENT_MS);
    }
}

/* Writes the answer until deadline; a client that does not read loses it. */
static void write_answer(const struct group_admin *admin, int fd, const char *text, size_t length,
                         uint64_t deadline)
{
    size_t sent = 0;
    while (sent < length) {
        ssize_t put = send(fd, text + sent, length - sent, MSG_NOSIGNAL);
        if (put > 0) {
            sent += (size_t)put;
        } else if (put < 0 && errno == EINTR) {
            continue;
        } else if (put < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) {
            if (!wait_for(admin, fd, POLLOUT, deadline))
                return;
        } else {
            return;
        }
    }
}

static void error_json(struct sp_json *json, int code, const char *message)
{
    sp_json_object(json, NULL);
    sp_json_bool(json, "ok", false);
    sp_json_i64(json, "code", code);
    sp_json_string(json, "error", spindle_strerror(code));
    sp_json_string(json, "message", message);
    sp_json_end_object(json);
    sp_json_printf(json, "\n");
}

/* The opening of a successful answer to a command. */
static void done_json(struct sp_json *json, const struct group_admin *admin, const char *command)
{
    sp_json_object(json, NULL);
    sp_json_bool(json, "ok", true);
    sp_json_string(json, "group", admin->group->membership.group_name);
    sp_json_u64(json, "member", admin->group->options.self);
    sp_json_string(json, "command", command);
}

/* Carries out request; the answer goes to json. */
static void perform(struct group_admin *admin, const struct admin_request *request,
                    struct sp_json *json)
{
    spindle_group_t *group = admin->group;
    int rc = 0;
    switch (request->command) {
    case ADMIN_STATS:
    case ADMIN_STATS_TEXT:
        rc = admin_report(group, request->command == ADMIN_STATS_TEXT, json);
        break;
    case ADMIN_LEAVE:
        rc = group_can_leave(group);
        if (rc == 0) {
            admin->leave = true;
            done_json(json, admin, "leave");
            sp_json_string(json, "result",
                           "accepted: the member flushes its messages and leaves "
                           "the group");
            sp_json_end_object(json);
            sp_json_printf(json, "\n");
        }
        break;
    case ADMIN_REMOVE:
        rc = view_remove_member(&group->membership, request->member);
        if (rc == 0) {
            done_json(json, admin, "remove");
            sp_json_u64(json, "removed", request->member);
            sp_json_u64(json, "view", view_current_id(&group->membership));
            sp_json_string(json, "result", "suspected: the members install a view without it");
            sp_json_end_object(json);
            sp_json_printf(json, "\n");
        }
        break;
    }
    if (rc < 0) {
        char message[512];
        snprintf(message, sizeof message, "%s", spindle_errmsg());
        sp_json_free(json);
        sp_json_init(json, ADMIN_RESPONSE_MAX);
        error_json(json, rc, message);
    }
}

/* The peer's uid, or -1 when the kernel does not say. */
static int64_t peer_uid(int fd)
{
    struct ucred cred;
    socklen_t length = sizeof cred;
    if (getsockopt(fd, SOL_SOCKET, SO_PEERCRED, &cred, &length) != 0 || length != sizeof cred)
        return -1;
    admin_peer_uid_fn hook = __atomic_load_n(&peer_uid_hook, __ATOMIC_ACQUIRE);
    return hook != NULL ? hook(cred.uid) : cred.uid;
}

static void serve(struct group_admin *admin, int fd)
{
    uint64_t deadline = sp_now_ns() + (uint64_t)ADMIN_CLIENT_MS * 1000000u;
    struct sp_json json;
    sp_json_init(&json, ADMIN_RESPONSE_MAX);
    int64_t uid = peer_uid(fd);
    char line[ADMIN_REQUEST_MAX];
    struct admin_request request;
    int rc = 0;
    if (uid != (int64_t)geteuid() && uid != 0) {
        char message[160];
        snprintf(message, sizeof message,
                 "admin: uid %lld may not use this endpoint (only uid %u, its owner, and root)",
                 (long long)uid, (unsigned)geteuid());
        sp_log(SP_LOG_WARN, "admin", "%s: %s", admin->path, message);
        rc = sp_error(SPINDLE_EPERM, "%s", message);
    }
    int length = rc == 0 ? read_request(admin, fd, deadline, line) : rc;
    if (length >= 0)
        rc = admin_request_parse(line, (size_t)length, &request);
    else
        rc = length;
    if (rc == 0) {
        perform(admin, &request, &json);
    } else {
        char message[512];
        snprintf(message, sizeof message, "%s", spindle_errmsg());
        error_json(&json, rc, message);
    }
    if (!json.failed)
        write_answer(admin, fd, json.text, json.length, deadline);
    sp_json_free(&json);
    /* Closing with bytes unread would reset the connection before the
     * client read the answer: take what is there (a bounded amount). */
    shutdown(fd, SHUT_WR);
    char sink[4096];
    for (int i = 0; i < 16 && read(fd, sink, sizeof sink) > 0; i++)
        ;
}

/* ---- the thread ------------------------------------------------------- */

static void run_leave(struct group_admin *admin)
{
    admin->leave = false;
    int rc = group_leave_by(admin->group, ADMIN_LEAVE_FLUSH_MS,
                            "it left the group at an administrator's request (spindle-ctl leave)");
    if (rc < 0)
        sp_log(SP_LOG_ERROR, "admin", "%s: leave failed, the member stays: %s", admin->path,
               spindle_errmsg());
    else
        sp_log(SP_LOG_INFO, "admin", "%s: left the group at an administrator's request",
               admin->path);
}

static void *admin_main(void *arg)
{
    struct group_admin *admin = arg;
    for (;;) {
        struct pollfd fds[2] = {{admin->listen_fd, POLLIN, 0}, {admin->stop_fd, POLLIN, 0}};
        int n = poll(fds, 2, -1);
        if (n < 0 && errno != EINTR)
            break;
        if (fds[1].revents != 0)
            break;
        if (n <= 0 || fds[0].revents == 0)
            continue;
        int fd = accept4(admin->listen_fd, NULL, NULL, SOCK_NONBLOCK | SOCK_CLOEXEC);
        if (fd < 0) {
            /* Out of descriptors or the like: do not spin on it. */
            if (errno != EAGAIN && errno != EINTR && errno != ECONNABORTED)
                (void)wait_for(admin, admin->stop_fd, POLLIN, sp_now_ns() + 100000000u);
            continue;
        }
        serve(admin, fd);
        close(fd);
        if (admin->leave)
            run_leave(admin);
    }
    return NULL;
}

/* ---- set-up ----------------------------------------------------------- */

/* An address in admin's directory; false when the path does not fit. */
static bool address_of(const struct group_admin *admin, const char *name,
                       struct sockaddr_un *address)
{
    memset(address, 0, sizeof *address);
    address->sun_family = AF_UNIX;
    int length = snprintf(address->sun_path, sizeof address->sun_path, "%s/%s", admin->dir, name);
    return length > 0 && (size_t)length < sizeof address->sun_path;
}

/* 1 when a process listens at address, 0 when nobody does (a stale
 * socket: connect is refused), -1 when it cannot tell. */
static int someone_listens(const struct sockaddr_un *address)
{
    int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
    if (fd < 0)
        return -1;
    int live = 1; /* a full backlog (EAGAIN) is a live endpoint too */
    if (connect(fd, (const struct sockaddr *)address, sizeof *address) != 0)
        live = errno == ECONNREFUSED ? 0 : errno == EAGAIN ? 1 : -1;
    close(fd);
    return live;
}

/* Removes the sockets of the directory nobody serves: members killed
 * before they could remove theirs. Every socket is put in place only once
 * it listens (bind_socket), so a refused connection means its process is
 * gone. A live member is asked nothing: it sees a client that closes. */
static void sweep_stale(const struct group_admin *admin)
{
    int fd = dup(admin->dir_fd);
    DIR *listing = fd >= 0 ? fdopendir(fd) : NULL;
    if (listing == NULL) {
        if (fd >= 0)
            close(fd);
        return;
    }
    uint32_t removed = 0, seen = 0;
    struct dirent *entry;
    while ((entry = readdir(listing)) != NULL && seen++ < 4096) {
        size_t length = strlen(entry->d_name), suffix = strlen(ADMIN_SOCKET_SUFFIX);
        struct stat st;
        struct sockaddr_un address;
        if (length <= suffix || entry->d_name[0] == '.' ||
            strcmp(entry->d_name + length - suffix, ADMIN_SOCKET_SUFFIX) != 0 ||
            strcmp(entry->d_name, admin->name) == 0 ||
            fstatat(admin->dir_fd, entry->d_name, &st, AT_SYMLINK_NOFOLLOW) != 0 ||
            !S_ISSOCK(st.st_mode) || !address_of(admin, entry->d_name, &address))
            continue;
        if (someone_listens(&address) == 0 && unlinkat(admin->dir_fd, entry->d_name, 0) == 0)
            removed++;
    }
    closedir(listing);
    if (removed > 0)
        sp_log(SP_LOG_INFO, "admin", "removed %u stale sockets of members gone from %s", removed,
               admin->dir);
}

/* Binds and listens on a temporary name, then renames the socket into
 * place, replacing a stale one (nobody listens) but not a live one: a
 * socket at a member's name is always one that listens. Mode 0600. */
static int bind_socket(struct group_admin *admin)
{
    struct sockaddr_un address, final;
    char temporary[sizeof admin->name + 8];
    snprintf(temporary, sizeof temporary, ".%s.new", admin->name);
    if (!address_of(admin, temporary, &address) || !address_of(admin, admin->name, &final))
        return sp_error(SPINDLE_EINVAL,
                        "admin: socket path %s/.%s.new is longer than the %zu bytes a socket "
                        "may have",
                        admin->dir, admin->name, sizeof address.sun_path - 1);
    admin->listen_fd = socket(AF_UNIX, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
    if (admin->listen_fd < 0)
        return sp_error(SPINDLE_EIO, "admin: socket: %s", strerror(errno));
    (void)unlinkat(admin->dir_fd, temporary, 0); /* left by a member of this name that died */
    if (bind(admin->listen_fd, (struct sockaddr *)&address, sizeof address) != 0)
        return sp_error(SPINDLE_EIO, "admin: cannot bind %s/%s: %s", admin->dir, temporary,
                        strerror(errno));
    int rc = 0;
    struct stat st;
    if (fchmodat(admin->dir_fd, temporary, 0600, 0) != 0 || listen(admin->listen_fd, 8) != 0)
        rc = sp_error(SPINDLE_EIO, "admin: cannot set up %s/%s: %s", admin->dir, temporary,
                      strerror(errno));
    if (rc == 0 && fstatat(admin->dir_fd, admin->name, &st, AT_SYMLINK_NOFOLLOW) == 0) {
        if (!S_ISSOCK(st.st_mode))
            rc = sp_error(SPINDLE_EADDRINUSE, "admin: %s exists and is not a socket", admin->path);
        else if (someone_listens(&final) != 0)
            rc = sp_error(SPINDLE_EADDRINUSE,
                          "admin: %s is served by another process (a member of another group "
                          "of the same name and member id?)",
                          admin->path);
    }
    if (rc == 0 && renameat(admin->dir_fd, temporary, admin->dir_fd, admin->name) != 0)
        rc = sp_error(SPINDLE_EIO, "admin: cannot put %s in place: %s", admin->path,
                      strerror(errno));
    if (rc < 0) {
        (void)unlinkat(admin->dir_fd, temporary, 0);
        return rc;
    }
    if (fstatat(admin->dir_fd, admin->name, &st, AT_SYMLINK_NOFOLLOW) == 0) {
        admin->dev = st.st_dev;
        admin->ino = st.st_ino;
    }
    return 0;
}

static int open_endpoint(struct group_admin *admin, const char *dir)
{
    int length = snprintf(admin->dir, sizeof admin->dir, "%s", dir);
    if (length < 0 || (size_t)length >= sizeof admin->dir)
        return sp_error(SPINDLE_EINVAL, "admin_dir %s is too long for a socket path", dir);
    int rc = admin_socket_name(admin->group->membership.group_name, admin->group->options.self,
                               admin->name, sizeof admin->name);
    if (rc < 0)
        return rc;
    length = snprintf(admin->path, sizeof admin->path, "%s/%s", dir, admin->name);
    if (length < 0 || (size_t)length >= sizeof admin->path)
        return sp_error(SPINDLE_EINVAL,
                        "admin: socket path %s/%s is longer than the %zu bytes a socket may have",
                        dir, admin->name, sizeof admin->path - 1);
    rc = sp_private_dir_open(dir, true, "admin: directory",
                             "use a directory of your own (admin_dir)", &admin->dir_fd);
    if (rc == 0)
        rc = bind_socket(admin);
    if (rc == 0)
        sweep_stale(admin);
    if (rc == 0) {
        admin->stop_fd = eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
        if (admin->stop_fd < 0)
            rc = sp_error(SPINDLE_EIO, "admin: eventfd: %s", strerror(errno));
    }
    if (rc == 0 && pthread_create(&admin->thread, NULL, admin_main, admin) != 0)
        rc = sp_error(SPINDLE_ENOMEM, "admin: cannot start the endpoint's thread");
    admin->thread_started = rc == 0;
    return rc;
}

int admin_start(spindle_group_t *group, struct group_admin **out)
{
    *out = NULL;
    const char *dir = group->options.admin_dir;
    if (dir != NULL && strcmp(dir, "off") == 0)
        return 0;
    if (dir != NULL && dir[0] == '\0')
        return sp_error(SPINDLE_EINVAL, "admin_dir is empty: name a directory, or \"off\"");
    char fallback[sizeof(((struct sockaddr_un *)0)->sun_path)];
    int rc = 0;
    if (dir == NULL) {
        rc = admin_default_dir(fallback, sizeof fallback);
        dir = fallback;
    }
    struct group_admin *admin = calloc(1, sizeof *admin);
    if (admin == NULL)
        return sp_error(SPINDLE_ENOMEM, "admin: no memory for the endpoint");
    admin->group = group;
    admin->dir_fd = admin->listen_fd = admin->stop_fd = -1;
    if (rc == 0)
        rc = open_endpoint(admin, dir);
    if (rc < 0) {
        char why[512];
        snprintf(why, sizeof why, "%s", spindle_errmsg());
        admin_stop(admin);
        if (group->options.admin_dir != NULL)
            return sp_error(rc, "%s", why);
        sp_log(SP_LOG_WARN, "admin", "member %u runs without an administration endpoint: %s",
               group->options.self, why);
        return 0;
    }
    sp_log(SP_LOG_DEBUG, "admin", "member %u serves %s", group->options.self, admin->path);
    *out = admin;
    return 0;
}

void admin_stop(struct group_admin *admin)
{
    if (admin == NULL)
        return;
    if (admin->thread_started) {
        uint64_t one = 1;
        ssize_t put = write(admin->stop_fd, &one, sizeof one);
        (void)put;
        pthread_join(admin->thread, NULL);
    }
    struct stat st;
    if (admin->listen_fd >= 0 && admin->dir_fd >= 0 && admin->ino != 0 &&
        fstatat(admin->dir_fd, admin->name, &st, AT_SYMLINK_NOFOLLOW) == 0 &&
        st.st_dev == admin->dev && st.st_ino == admin->ino)
        (void)unlinkat(admin->dir_fd, admin->name, 0);
    if (admin->listen_fd >= 0)
        close(admin->listen_fd);
    if (admin->stop_fd >= 0)
        close(admin->stop_fd);
    if (admin->dir_fd >= 0)
        close(admin->dir_fd);
    free(admin);
}
