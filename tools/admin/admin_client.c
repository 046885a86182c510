/* Finding and asking members' administration sockets (admin_client.h). */
#include "admin_client.h"

#include <dirent.h>
#include <errno.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <time.h>
#include <unistd.h>

#include "group/admin.h"

int admin_client_dir(const char *dir, char *out, size_t size)
{
    if (dir != NULL) {
        int length = snprintf(out, size, "%s", dir);
        if (length < 0 || (size_t)length >= size) {
            fprintf(stderr, "directory %s is too long\n", dir);
            return -1;
        }
        return 0;
    }
    if (admin_default_dir(out, size) < 0) {
        fprintf(stderr, "%s\n", spindle_errmsg());
        return -1;
    }
    return 0;
}

static bool parse_id(const char *text, uint32_t *id)
{
    if (text[0] == '\0' || strlen(text) > 2 || (text[0] == '0' && text[1] != '\0'))
        return false;
    uint32_t value = 0;
    for (const char *p = text; *p != '\0'; p++) {
        if (*p < '0' || *p > '9')
            return false;
        value = value * 10 + (uint32_t)(*p - '0');
    }
    if (value >= SPINDLE_MAX_MEMBERS)
        return false;
    *id = value;
    return true;
}

int admin_client_target(const char *text, bool id_optional, char *group, size_t size, uint32_t *id,
                        bool *has_id)
{
    const char *slash = strrchr(text, '/');
    *has_id = slash != NULL;
    size_t length = slash != NULL ? (size_t)(slash - text) : strlen(text);
    if (length == 0 || length >= size) {
        fprintf(stderr, "'%s' does not name a group (GROUP/ID)\n", text);
        return -1;
    }
    memcpy(group, text, length);
    group[length] = '\0';
    if (slash == NULL && !id_optional) {
        fprintf(stderr, "'%s' names no member: give GROUP/ID\n", text);
        return -1;
    }
    if (slash != NULL && !parse_id(slash + 1, id)) {
        fprintf(stderr, "'%s' is not a member id (0 .. %u) in '%s'\n", slash + 1,
                SPINDLE_MAX_MEMBERS - 1, text);
        return -1;
    }
    return 0;
}

/* Splits a socket's file name "<group>-<id>.sock"; false for others. */
static bool split_name(const char *name, struct admin_member *out)
{
    size_t length = strlen(name), suffix = strlen(ADMIN_SOCKET_SUFFIX);
    if (length <= suffix || strcmp(name + length - suffix, ADMIN_SOCKET_SUFFIX) != 0)
        return false;
    char stem[256];
    if (length - suffix >= sizeof stem)
        return false;
    memcpy(stem, name, length - suffix);
    stem[length - suffix] = '\0';
    char *dash = strrchr(stem, '-');
    if (dash == NULL || dash == stem || (size_t)(dash - stem) >= sizeof out->group ||
        !parse_id(dash + 1, &out->id))
        return false;
    memcpy(out->group, stem, (size_t)(dash - stem));
    out->group[dash - stem] = '\0';
    return true;
}

static int by_group_then_id(const void *a, const void *b)
{
    const struct admin_member *x = a, *y = b;
    int order = strcmp(x->group, y->group);
    return order != 0 ? order : (x->id > y->id) - (x->id < y->id);
}

int admin_client_list(const char *dir, const char *group, bool has_id, uint32_t id,
                      struct admin_member **out)
{
    *out = NULL;
    char wanted[160] = "";
    if (group != NULL) {
        /* The library's file name of the group, without "-<id>.sock". */
        if (admin_socket_name(group, 0, wanted, sizeof wanted) < 0) {
            fprintf(stderr, "%s\n", spindle_errmsg());
            return -1;
        }
        wanted[strlen(wanted) - strlen("-0" ADMIN_SOCKET_SUFFIX)] = '\0';
    }
    DIR *listing = opendir(dir);
    if (listing == NULL) {
        int e = errno;
        fprintf(stderr, "%scannot read %s: %s%s\n",
                e == EACCES   ? "permission denied: "
                : e == ENOENT ? "no running members: "
                              : "",
                dir, strerror(e),
                e == EACCES ? " (only its owner and root may list the members in it)" : "");
        return -1;
    }
    size_t count = 0, capacity = 0;
    struct admin_member *members = NULL;
    struct dirent *entry;
    while ((entry = readdir(listing)) != NULL) {
        struct admin_member member;
        memset(&member, 0, sizeof member);
        if (!split_name(entry->d_name, &member) ||
            (group != NULL && strcmp(member.group, wanted) != 0) || (has_id && member.id != id))
            continue;
        int length = snprintf(member.path, sizeof member.path, "%s/%s", dir, entry->d_name);
        if (length < 0 || (size_t)length >= sizeof member.path)
            continue;
        if (count == capacity) {
            capacity = capacity == 0 ? 16 : capacity * 2;
            struct admin_member *grown = realloc(members, capacity * sizeof *members);
            if (grown == NULL) {
                free(members);
                closedir(listing);
                fprintf(stderr, "out of memory\n");
                return -1;
            }
            members = grown;
        }
        members[count++] = member;
    }
    closedir(listing);
    if (count > 1)
        qsort(members, count, sizeof *members, by_group_then_id);
    *out = members;
    return (int)count;
}

int admin_client_member(const char *dir, const char *group, uint32_t id, struct admin_member **out)
{
    *out = calloc(1, sizeof **out);
    if (*out == NULL) {
        fprintf(stderr, "out of memory\n");
        return -1;
    }
    char name[160];
    if (admin_socket_name(group, id, name, sizeof name) < 0) {
        fprintf(stderr, "%s\n", spindle_errmsg());
        return -1;
    }
    snprintf((*out)->group, sizeof(*out)->group, "%s", group);
    (*out)->id = id;
    int length = snprintf((*out)->path, sizeof(*out)->path, "%s/%s", dir, name);
    if (length < 0 || (size_t)length >= sizeof(*out)->path) {
        fprintf(stderr, "%s/%s: path too long\n", dir, name);
        return -1;
    }
    return 1;
}

static uint64_t now_ms(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000u + (uint64_t)ts.tv_nsec / 1000000u;
}

static int fail(char *error, size_t size, const char *fmt, const char *path, const char *why)
{
    snprintf(error, size, fmt, path, why);
    return -1;
}

static int connect_to(const char *path, char *error, size_t size)
{
    struct sockaddr_un address;
    memset(&address, 0, sizeof address);
    address.sun_family = AF_UNIX;
    if (strlen(path) >= sizeof address.sun_path)
        return fail(error, size, "%s: %s", path, "path too long for a socket");
    memcpy(address.sun_path, path, strlen(path) + 1);
    int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
    if (fd < 0)
        return fail(error, size, "%s: socket: %s", path, strerror(errno));
    if (connect(fd, (struct sockaddr *)&address, sizeof address) == 0)
        return fd;
    int e = errno;
    close(fd);
    if (e == ENOENT)
        return fail(error, size, "no such member: %s %s", path, "does not exist");
    if (e == EACCES || e == EPERM)
        return fail(error, size,
                    "permission denied: %s (%s: only the member's user and root may use it)", path,
                    strerror(e));
    if (e == ECONNREFUSED) {
        fail(error, size, "stale socket %s: %s", path,
             "no process serves it (its member exited without removing it)");
        return ADMIN_CLIENT_STALE;
    }
    return fail(error, size, "%s: connect: %s", path, strerror(e));
}

int admin_client_ask(const char *path, const char *request, char **answer, char *error,
                     size_t error_size)
{
    *answer = NULL;
    int fd = connect_to(path, error, error_size);
    if (fd < 0)
        return fd;
    uint64_t deadline = now_ms() + ADMIN_CLIENT_TIMEOUT_MS;
    char line[ADMIN_REQUEST_MAX + 1];
    int length = snprintf(line, sizeof line, "%s\n", request);
    if (length < 0 || (size_t)length >= sizeof line ||
        send(fd, line, (size_t)length, MSG_NOSIGNAL) != length) {
        close(fd);
        return fail(error, error_size, "%s: cannot send the request: %s", path, strerror(errno));
    }
    size_t have = 0, capacity = 0;
    char *text = NULL;
    for (;;) {
        if (capacity - have < 4096) {
            capacity = capacity == 0 ? 65536 : capacity * 2;
            char *grown = capacity <= ADMIN_RESPONSE_MAX + 1 ? realloc(text, capacity) : NULL;
            if (grown == NULL) {
                free(text);
                close(fd);
                return fail(error, error_size, "%s: %s", path, "answer too long");
            }
            text = grown;
        }
        uint64_t now = now_ms();
        struct pollfd pfd = {fd, POLLIN, 0};
        int ready = now >= deadline ? 0 : poll(&pfd, 1, (int)(deadline - now));
        if (ready < 0 && errno == EINTR)
            continue;
        if (ready <= 0) {
            free(text);
            close(fd);
            return fail(error, error_size, "%s: %s", path, "no answer within 5 s");
        }
        ssize_t got = read(fd, text + have, capacity - have - 1);
        if (got < 0 && errno == EINTR)
            continue;
        if (got < 0) {
            free(text);
            close(fd);
            return fail(error, error_size, "%s: read: %s", path, strerror(errno));
        }
        if (got == 0)
            break;
        have += (size_t)got;
    }
    close(fd);
    text[have] = '\0';
    if (have == 0 || strlen(text) != have) {
        free(text);
        return fail(error, error_size, "%s: %s", path,
                    have == 0 ? "the member closed without an answer"
                              : "the answer holds a NUL byte");
    }
    *answer = text;
    return 0;
}

bool admin_client_ok(const char *answer)
{
    return strncmp(answer, "{\"ok\":true", 10) == 0;
}

bool admin_client_field(const char *answer, const char *key, char *out, size_t size)
{
    char pattern[64];
    snprintf(pattern, sizeof pattern, "\"%s\":\"", key);
    const char *at = strstr(answer, pattern);
    if (at == NULL || size == 0)
        return false;
    at += strlen(pattern);
    size_t used = 0;
    for (; *at != '\0' && *at != '"' && used + 1 < size; at++) {
        if (*at == '\\' && at[1] != '\0')
            at++;
        out[used++] = *at;
    }
    out[used] = '\0';
    return true;
}

void admin_client_print(FILE *out, const char *text)
{
    for (const unsigned char *p = (const unsigned char *)text; *p != '\0'; p++)
        fputc((*p >= 0x20 && *p < 0x7f) || *p == '\n' || *p == '\t' ? *p : '?', out);
}
