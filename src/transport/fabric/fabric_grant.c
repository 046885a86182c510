/*
 * libfabric backend: write grants (tp_mr_grant). The owner of a region says
 * which byte ranges each member may write; the progress thread checks every
 * record against them before applying it (fabric_progress.c), so a member
 * reaches only its own slices of our memory whatever it posts. A region
 * never granted keeps taking writes anywhere from any connected member
 * (rings and point-to-point regions that one writer owns whole); a grant of
 * 0 bytes lets nobody write but makes the region granted, so that an owner
 * that lets no peer write there says so (smc_group.c, grant_side).
 *
 * Grants live in the region, under the endpoint's region lock, like the
 * region list the progress thread searches.
 */
#include <inttypes.h>
#include <stdlib.h>

#include "transport/fabric/fabric_impl.h"
#include "util/error.h"

int fab_mr_grant(struct tp_mr *tmr, uint32_t peer_id, uint64_t offset, uint64_t length)
{
    if (tmr == NULL)
        return sp_error(SPINDLE_EINVAL, "fabric mr_grant: null region");
    struct fab_mr *mr = fab_mr_of(tmr);
    struct fab_region *region = &mr->region;
    struct fab_ep *ep = mr->ep;
    if (length == 0) {
        if (offset > region->length)
            return sp_error(SPINDLE_EINVAL,
                            "fabric mr_grant: 0 bytes at offset %" PRIu64 " of a %zu-byte region",
                            offset, region->length);
        pthread_mutex_lock(&ep->region_lock);
        region->granted = true;
        pthread_mutex_unlock(&ep->region_lock);
        return 0;
    }
    int rc = tp_slice_check("fabric mr_grant", offset, length, region->length, 0);
    if (rc != 0)
        return rc;
    pthread_mutex_lock(&ep->region_lock);
    if (region->num_grants == region->cap_grants) {
        uint32_t cap = region->cap_grants ? region->cap_grants * 2 : 8;
        struct fab_grant *grown = realloc(region->grants, cap * sizeof *grown);
        if (grown == NULL) {
            pthread_mutex_unlock(&ep->region_lock);
            return sp_error(SPINDLE_ENOMEM, "fabric mr_grant: out of memory (%u grants)", cap);
        }
        region->grants = grown;
        region->cap_grants = cap;
    }
    region->grants[region->num_grants++] =
        (struct fab_grant){.member = peer_id, .offset = offset, .length = length};
    region->granted = true;
    pthread_mutex_unlock(&ep->region_lock);
    return 0;
}

int fab_rec_granted(const struct fab_rec_hdr *hdr, const struct fab_region *region, uint32_t member)
{
    if (!region->granted)
        return 0;
    for (uint32_t i = 0; i < region->num_grants; i++) {
        const struct fab_grant *g = &region->grants[i];
        if (g->member == member && hdr->offset >= g->offset &&
            hdr->offset - g->offset <= g->length &&
            hdr->length <= g->length - (hdr->offset - g->offset))
            return 0;
    }
    return sp_error(SPINDLE_EPERM,
                    "member %u wrote region %" PRIu64 " at %" PRIu64 "+%u, outside its grants",
                    member, hdr->region, hdr->offset, hdr->length);
}

void fab_region_grants_free(struct fab_region *region)
{
    free(region->grants);
    region->grants = NULL;
    region->num_grants = region->cap_grants = 0;
    region->granted = false;
}
