/* Member names (struct spindle_member_identity), checked wherever one
 * enters: options, configuration files, the wire. Thread-safe, pure. */
#ifndef SP_UTIL_NAME_H
#define SP_UTIL_NAME_H

/*
 * Checks a member name: 1 to SPINDLE_MEMBER_NAME_MAX - 1 printable ASCII
 * characters, no space. 0 or SPINDLE_EINVAL naming `whose` name and what
 * is wrong with it.
 */
int sp_check_name(const char *name, const char *whose);

#endif
