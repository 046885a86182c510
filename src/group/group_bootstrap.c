/* Bootstrap option parsing for spindle_group_create (group/group_bootstrap.h). */
#include "group/group_bootstrap.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "util/error.h"

/* True when text looks like "host:port[,host:port...]" (no '/', every entry
 * ends in ":digits"). */
static bool looks_like_member_list(const char *text)
{
    if (strchr(text, '/') != NULL || strchr(text, ':') == NULL)
        return false;
    const char *entry = text;
    while (*entry != '\0') {
        const char *comma = strchr(entry, ',');
        size_t len = comma != NULL ? (size_t)(comma - entry) : strlen(entry);
        const char *colon = NULL;
        for (size_t i = 0; i < len; i++)
            if (entry[i] == ':')
                colon = entry + i;
        if (colon == NULL || colon + 1 == entry + len)
            return false;
        for (const char *p = colon + 1; p < entry + len; p++)
            if (*p < '0' || *p > '9')
                return false;
        entry += len + (comma != NULL ? 1 : 0);
    }
    return true;
}

int group_bootstrap_parse(const struct spindle_group_options *options, struct group_bootstrap *out)
{
    memset(out, 0, sizeof *out);
    const char *text = options->bootstrap;
    if (text == NULL || text[0] == '\0')
        return sp_error(SPINDLE_EINVAL, "bootstrap is empty: give a directory or host:port list");
    enum spindle_bootstrap_kind kind = options->bootstrap_kind;
    if (kind == SPINDLE_BOOTSTRAP_AUTO)
        kind = looks_like_member_list(text) ? SPINDLE_BOOTSTRAP_TCP : SPINDLE_BOOTSTRAP_DIR;
    out->kind = kind;
    if (kind == SPINDLE_BOOTSTRAP_DIR) {
        if (strlen(text) >= sizeof out->dir)
            return sp_error(SPINDLE_EINVAL, "bootstrap directory is %zu bytes long", strlen(text));
        memcpy(out->dir, text, strlen(text) + 1);
        return 0;
    }
    if (kind != SPINDLE_BOOTSTRAP_TCP)
        return sp_error(SPINDLE_EINVAL, "bootstrap_kind %d is unknown", (int)kind);
    uint32_t count = 0;
    const char *entry = text;
    for (;;) {
        const char *comma = strchr(entry, ',');
        size_t len = comma != NULL ? (size_t)(comma - entry) : strlen(entry);
        if (count >= options->num_members)
            return sp_error(SPINDLE_EINVAL, "bootstrap lists more than num_members %u members",
                            options->num_members);
        char what[32];
        snprintf(what, sizeof what, "bootstrap member %u", count);
        int rc = ctl_address_parse(entry, len, what, &out->hosts[count]);
        if (rc < 0)
            return rc;
        count++;
        if (comma == NULL)
            break;
        entry = comma + 1;
    }
    if (count != options->num_members)
        return sp_error(SPINDLE_EINVAL, "bootstrap lists %u members but num_members is %u", count,
                        options->num_members);
    return 0;
}

int group_bootstrap_open(const struct group_bootstrap *boot, const char *group_name, uint32_t self,
                         uint32_t num_members, const struct ctl_versions *versions,
                         const struct ctl_keyring *keys, int timeout_ms, struct ctl **out)
{
    if (boot->kind == SPINDLE_BOOTSTRAP_DIR)
        return ctl_open_dir(boot->dir, self, num_members, versions, timeout_ms, out);
    struct ctl_member members[SPINDLE_MAX_MEMBERS];
    for (uint32_t i = 0; i < num_members; i++) {
        members[i].id = i;
        members[i].host = boot->hosts[i].host;
        members[i].port = boot->hosts[i].port;
    }
    return ctl_open_tcp(group_name, members, num_members, self, versions, keys, timeout_ms, out);
}
