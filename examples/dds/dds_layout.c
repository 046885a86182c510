/*
 * Discovery: which members of a view are in which topic's subgroup. A
 * pure function of the configuration and the members' names, as
 * libspindle's layout function must be (include/spindle/view.h), so every
 * member computes the same subgroups, and a participant that joins late or
 * restarts lands in the topics the configuration gives it.
 */
#include <string.h>

#include "dds_impl.h"

int dds_layout_topics(const struct spindle_dds_config *config, const char *const *names,
                      uint32_t num_members, struct spindle_subgroup_layout *layouts)
{
    uint64_t roles[SPINDLE_MAX_MEMBERS]; /* bit of the participant id, 0: unknown */
    if (num_members == 0 || num_members > SPINDLE_MAX_MEMBERS)
        return dds_error(SPINDLE_EINVAL, "a view of %u members", num_members);
    for (uint32_t rank = 0; rank < num_members; rank++) {
        /* A member the file does not name (another application's joiner)
         * takes part in no topic: refusing here would stop every member. */
        const struct spindle_dds_participant_config *p =
            spindle_dds_config_participant(config, names[rank]);
        roles[rank] = p != NULL ? 1ull << p->id : 0;
    }
    for (uint32_t t = 0; t < config->num_topics; t++) {
        const struct spindle_dds_topic_config *topic = &config->topics[t];
        struct spindle_subgroup_layout *out = &layouts[t];
        /* A joiner's log catch-up comes from the leader's log; a volatile
         * topic's history comes from its own members (dds_history.c). */
        bool leader_needed = topic->qos == SPINDLE_DDS_LOGGED;
        out->num_members = 0;
        out->num_senders = 0;
        for (uint32_t rank = 0; rank < num_members; rank++) {
            uint64_t bit = roles[rank];
            bool publishes = (topic->publishers & bit) != 0;
            bool subscribes = (topic->subscribers & bit) != 0;
            if (publishes || subscribes || (rank == 0 && leader_needed))
                out->members[out->num_members++] = rank;
            if (publishes)
                out->senders[out->num_senders++] = rank;
        }
        if (out->num_members == 0)
            out->members[out->num_members++] = 0; /* a subgroup is never empty */
    }
    return 0;
}
