# The public handle (src/group): parameter checks that name the bad value,
# the send path in one process, statistics.
spindle_add_test(test_group_api SOURCES ${CMAKE_CURRENT_LIST_DIR}/test_group_api.c
                 TIMEOUT 60 LABELS group)
# Reservations belong to their thread, also across a view change (real
# processes on shm, one of them killed).
spindle_add_test(test_reservations SOURCES ${CMAKE_CURRENT_LIST_DIR}/test_reservations.c
                 TIMEOUT 120 LABELS group)
# An idle group of three processes on shm sleeps on its doorbells and stays
# under a quarter of one core in total.
spindle_add_test(test_group_idle SOURCES ${CMAKE_CURRENT_LIST_DIR}/test_group_idle.c
                 TIMEOUT 60 LABELS group sst)
# Dedicated-CPU polling: two members' predicate threads pinned to their
# CPUs, never sleeping; a CPU the process may not use refused.
spindle_add_test(test_group_poll SOURCES ${CMAKE_CURRENT_LIST_DIR}/test_group_poll.c TIMEOUT 60
  LABELS group)
# Dispatch mode: an epoll loop on the group's descriptor, a slow
# dispatcher's bounded queue, a leave, a trim past a full queue and a
# joiner's state taken through dispatch in order (forked members on shm).
spindle_add_test(test_dispatch SOURCES ${CMAKE_CURRENT_LIST_DIR}/test_dispatch.c TIMEOUT 120
  LABELS group)
# Dispatch mode: a member that stops on its own (a minority) makes its
# descriptor readable at once, though nothing is queued.
spindle_add_test(test_dispatch_stop SOURCES ${CMAKE_CURRENT_LIST_DIR}/test_dispatch_stop.c
  TIMEOUT 90 LABELS group)
# Request/reply answered inside the delivery upcall through a full reply
# window, in the default mode and in dispatch mode (forked members on shm).
spindle_add_test(test_upcall_send SOURCES ${CMAKE_CURRENT_LIST_DIR}/test_upcall_send.c TIMEOUT 60
  LABELS group)
# Point-to-point messages: per-pair order, queries answered inside the
# p2p upcall (default and dispatch mode), refusals that name the value,
# and a target killed with SIGKILL while a query waits (forked members).
spindle_add_test(test_p2p SOURCES ${CMAKE_CURRENT_LIST_DIR}/test_p2p.c TIMEOUT 90 LABELS group)
# Sized structs: a program built against a shorter header's options,
# subgroups, statistics and setup works, with defaults past its structs,
# and nothing is written past them (canaries; exact heap copies under ASan).
spindle_add_test(test_sized_structs SOURCES ${CMAKE_CURRENT_LIST_DIR}/test_sized_structs.c
                 TIMEOUT 60 LABELS group)
# Own deliveries inline (own_inline): three members sending at once in an
# unordered subgroup each deliver their own messages inside the send call,
# once, in order, never two upcalls at a time (forked members on shm).
spindle_add_test(test_own_inline SOURCES ${CMAKE_CURRENT_LIST_DIR}/test_own_inline.c TIMEOUT 120
  LABELS group smc)
# A non-blocking reserve outside every upcall during a join held up by the
# leader's own dispatching thread: SPINDLE_EAGAIN at once, then send_ready
# through the descriptor once the view is in, and the retry goes out in it.
spindle_add_test(test_nonblock_view_change SOURCES
  ${CMAKE_CURRENT_LIST_DIR}/test_nonblock_view_change.c TIMEOUT 90 LABELS group)
