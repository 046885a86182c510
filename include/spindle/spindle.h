/*
 * libspindle: atomic multicast and state machine replication over one-sided
 * writes (shared memory, libfabric, RDMA verbs). This umbrella header pulls in
 * the whole public API.
 */
#ifndef SPINDLE_SPINDLE_H
#define SPINDLE_SPINDLE_H

#include <spindle/config.h>
#include <spindle/error.h>
#include <spindle/export.h>
#include <spindle/group.h>
#include <spindle/log.h>
#include <spindle/p2p.h>
#include <spindle/setup.h>
#include <spindle/version.h>
#include <spindle/view.h>

#endif
