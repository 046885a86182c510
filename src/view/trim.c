/* Ragged-edge trim computation. The argument is in trim.h. */
#include "view/trim.h"

#include <string.h>

#include "util/error.h"

/* d[s] and the end from a trim vector (trim.h: every position of s below
 * trim[s] is delivered or skipped as a null; the end is one past the last
 * such position of any sender). */
static void derive_end(struct trim_result *out)
{
    uint32_t senders = out->num_senders;
    uint64_t end = 0;
    for (uint32_t s = 0; s < senders; s++) {
        out->sender_delivered[s] = out->trim[s];
        uint64_t past_last = out->trim[s] > 0 ? (out->trim[s] - 1) * senders + s + 1 : 0;
        if (past_last > end)
            end = past_last;
    }
    out->delivered_total = end;
}

/* The first sequence number row lacks: min over s of received[s] * S + s. */
static uint64_t row_first_missing(const struct trim_input *in, uint32_t row)
{
    uint64_t first = UINT64_MAX;
    for (uint32_t s = 0; s < in->num_senders; s++) {
        uint64_t missing = in->received[(size_t)row * in->num_senders + s] * in->num_senders + s;
        if (missing < first)
            first = missing;
    }
    return first;
}

static int check_input(const struct trim_input *in)
{
    if (in->num_members == 0 || in->num_members > SST_MAX_ROWS)
        return sp_error(SPINDLE_EINVAL, "trim: subgroup of %u members (must be 1..%d)",
                        in->num_members, SST_MAX_ROWS);
    if (in->num_senders > in->num_members)
        return sp_error(SPINDLE_EINVAL, "trim: %u senders in a subgroup of %u", in->num_senders,
                        in->num_members);
    if (in->num_senders > 0 && (in->sender_row == NULL || in->received == NULL))
        return sp_error(SPINDLE_EINVAL, "trim: sender_row and received are required");
    for (uint32_t s = 0; s < in->num_senders; s++)
        if (in->sender_row[s] >= in->num_members)
            return sp_error(SPINDLE_EINVAL, "trim: sender %u is row %u of a %u-member subgroup", s,
                            in->sender_row[s], in->num_members);
    uint64_t rows = in->num_members >= 64 ? ~0ull : (1ull << in->num_members) - 1;
    if ((rows & ~in->failed_mask) == 0)
        return sp_error(SPINDLE_EINVAL, "trim: no surviving member among %u", in->num_members);
    return 0;
}

int trim_compute(const struct trim_input *in, struct trim_result *out)
{
    int rc = check_input(in);
    if (rc < 0)
        return rc;
    uint32_t senders = in->num_senders;
    memset(out, 0, sizeof *out);
    out->num_senders = senders;
    for (uint32_t s = 0; s < senders; s++) {
        out->trim[s] = UINT64_MAX;
        out->sender_failed[s] = (in->failed_mask >> in->sender_row[s]) & 1;
    }
    for (uint32_t row = 0; row < in->num_members; row++) {
        if ((in->failed_mask >> row) & 1)
            continue;
        out->num_survivors++;
        for (uint32_t s = 0; s < senders; s++) {
            uint64_t received = in->received[(size_t)row * senders + s];
            if (received > TRIM_MAX_COUNT)
                return sp_error(SPINDLE_EINVAL,
                                "trim: row %u holds %llu messages of sender %u "
                                "(limit %llu)",
                                row, (unsigned long long)received, s,
                                (unsigned long long)TRIM_MAX_COUNT);
            if (received < out->trim[s])
                out->trim[s] = received;
            if (received > out->sender_known[s])
                out->sender_known[s] = received;
        }
    }
    derive_end(out);
    if (in->delivered == NULL)
        return 0;
    for (uint32_t row = 0; row < in->num_members; row++) {
        if ((in->failed_mask >> row) & 1)
            continue;
        uint64_t first = row_first_missing(in, row);
        if (in->delivered[row] > first)
            return sp_error(SPINDLE_EPROTO,
                            "trim: row %u already passed %llu sequence numbers but lacks "
                            "number %llu",
                            row, (unsigned long long)in->delivered[row], (unsigned long long)first);
    }
    return 0;
}
