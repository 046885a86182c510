/* The control channel: dispatch to the dir or TCP variant; addresses. */
#include "control/ctl_impl.h"

#include <stdlib.h>
#include <string.h>

#include "util/error.h"

int ctl_address_parse(const char *text, size_t len, const char *what, struct ctl_address *out)
{
    memset(out, 0, sizeof *out);
    if (text == NULL || len == 0)
        return sp_error(SPINDLE_EINVAL, "%s is empty: give host:port", what);
    const char *colon = NULL;
    for (size_t i = 0; i < len; i++)
        if (text[i] == ':')
            colon = text + i;
    if (colon == NULL || colon == text || (size_t)(colon - text) >= CTL_HOST_MAX)
        return sp_error(SPINDLE_EINVAL, "%s '%.*s' is not host:port", what, (int)len, text);
    char digits[8];
    size_t ndigits = (size_t)(text + len - colon - 1);
    if (ndigits == 0 || ndigits >= sizeof digits)
        return sp_error(SPINDLE_EINVAL, "%s '%.*s' has no valid port", what, (int)len, text);
    memcpy(digits, colon + 1, ndigits);
    digits[ndigits] = '\0';
    char *end;
    unsigned long port = strtoul(digits, &end, 10);
    if (*end != '\0' || port == 0 || port > 65535)
        return sp_error(SPINDLE_EINVAL, "%s port '%s' must be 1..65535", what, digits);
    memcpy(out->host, text, (size_t)(colon - text));
    out->host[colon - text] = '\0';
    out->port = (uint16_t)port;
    return 0;
}

int ctl_allgather(struct ctl *ctl, uint32_t tag, const void *mine, size_t length, void *all,
                  int timeout_ms)
{
    if (ctl == NULL || mine == NULL || all == NULL || length == 0)
        return sp_error(SPINDLE_EINVAL, "ctl allgather: null argument or zero length");
    return ctl->vt->allgather(ctl, tag, mine, length, all, timeout_ms);
}

int ctl_publish(struct ctl *ctl, uint32_t tag, const void *blob, size_t length, uint64_t to)
{
    if (ctl == NULL || (blob == NULL && length > 0))
        return sp_error(SPINDLE_EINVAL, "ctl publish: null argument");
    return ctl->vt->publish(ctl, tag, blob, length, to);
}

int ctl_collect(struct ctl *ctl, uint32_t tag, uint64_t from, void *all, size_t length,
                int timeout_ms, uint64_t *have)
{
    if (ctl == NULL || all == NULL || length == 0)
        return sp_error(SPINDLE_EINVAL, "ctl collect: null argument or zero length");
    return ctl->vt->collect(ctl, tag, from, all, length, timeout_ms, have);
}

void ctl_close(struct ctl *ctl)
{
    if (ctl != NULL)
        ctl->vt->close(ctl);
}

int ctl_join_poll(struct ctl *ctl, int timeout_ms, void *request, size_t capacity, size_t *length)
{
    if (ctl == NULL || ctl->vt->join_poll == NULL)
        return 0;
    return ctl->vt->join_poll(ctl, timeout_ms, request, capacity, length);
}

int ctl_join_answer(struct ctl *ctl, const void *reply, size_t length)
{
    if (ctl == NULL || ctl->vt->join_answer == NULL)
        return sp_error(SPINDLE_ENOTSUP, "control: this bootstrap channel takes no joins");
    return ctl->vt->join_answer(ctl, reply, length);
}

void ctl_add_member(struct ctl *ctl, uint32_t id, const char *host, uint16_t port)
{
    if (ctl != NULL && ctl->vt->add_member != NULL)
        ctl->vt->add_member(ctl, id, host, port);
}

void ctl_remove_member(struct ctl *ctl, uint32_t id)
{
    if (ctl != NULL && ctl->vt->remove_member != NULL)
        ctl->vt->remove_member(ctl, id);
}

void ctl_expect_member(struct ctl *ctl, uint32_t id, uint64_t admission)
{
    if (ctl != NULL && ctl->vt->expect_member != NULL)
        ctl->vt->expect_member(ctl, id, admission);
}

int ctl_set_keys(struct ctl *ctl, const struct ctl_keyring *keys)
{
    if (ctl == NULL || keys == NULL || keys->count == 0 || keys->count > CTL_KEYS_MAX)
        return sp_error(SPINDLE_EINVAL, "control: a key rotation needs 1 to %u keys", CTL_KEYS_MAX);
    if (ctl->vt->set_keys == NULL)
        return sp_error(SPINDLE_ENOTSUP,
                        "control: a directory bootstrap has no key (its permissions protect it)");
    return ctl->vt->set_keys(ctl, keys);
}

int ctl_take_one(struct ctl *ctl, uint32_t tag, uint32_t from, void *out, size_t capacity,
                 size_t *length, int timeout_ms)
{
    if (ctl == NULL || out == NULL || capacity == 0 || length == NULL)
        return sp_error(SPINDLE_EINVAL, "ctl take: null argument or zero capacity");
    if (ctl->vt->take_one == NULL)
        return sp_error(SPINDLE_ENOTSUP, "control: this bootstrap channel takes no joins");
    return ctl->vt->take_one(ctl, tag, from, out, capacity, length, timeout_ms);
}

int ctl_collect_one(struct ctl *ctl, uint32_t tag, uint32_t from, void *out, size_t length,
                    int timeout_ms)
{
    if (ctl == NULL || out == NULL || length == 0)
        return sp_error(SPINDLE_EINVAL, "ctl collect: null argument or zero length");
    if (ctl->vt->collect_one == NULL)
        return sp_error(SPINDLE_ENOTSUP, "control: this bootstrap channel takes no joins");
    return ctl->vt->collect_one(ctl, tag, from, out, length, timeout_ms);
}
