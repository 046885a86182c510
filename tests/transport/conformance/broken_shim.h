/*
 * Deliberately broken transports, to show that the conformance suite can
 * fail: each wraps the shared-memory backend and breaks one promise of the
 * contract on every post.
 *   BROKEN_TEARS     each aligned 8-byte word is written as two 4-byte
 *                    halves, the high half first, with a pause between
 *                    them (T1 broken: readers see torn words).
 *   BROKEN_REORDERS  the writes of a batch are posted last to first, with
 *                    a pause after each (T2 broken: a guard lands before
 *                    the data it guards).
 * Everything else is shm's. The returned table is complete and passes
 * tp_backend_check; its objects carry it, so the tp_* wrappers reach it.
 */
#ifndef SPINDLE_TESTS_BROKEN_SHIM_H
#define SPINDLE_TESTS_BROKEN_SHIM_H

#include "transport/transport.h"

enum broken_kind { BROKEN_TEARS = 1, BROKEN_REORDERS = 2 };

const struct tp_ops *broken_shim(enum broken_kind kind);

#endif
