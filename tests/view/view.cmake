# Membership (src/view): the view model, the ragged-edge trim and the
# membership protocol's messages.
spindle_add_test(test_view SOURCES ${CMAKE_CURRENT_LIST_DIR}/test_view.c TIMEOUT 60 LABELS view)
spindle_add_test(test_view_trim SOURCES ${CMAKE_CURRENT_LIST_DIR}/test_trim.c TIMEOUT 60
                 LABELS view)
spindle_add_test(test_view_wire SOURCES ${CMAKE_CURRENT_LIST_DIR}/test_view_wire.c TIMEOUT 60
                 LABELS view wire)
# Total restart: the election's rules and its status message.
spindle_add_test(test_view_restart SOURCES ${CMAKE_CURRENT_LIST_DIR}/test_view_restart.c
                 TIMEOUT 60 LABELS view wire)
# Failure-driven view changes with forked members over shm (kill -9).
spindle_add_test(test_view_change SOURCES ${CMAKE_CURRENT_LIST_DIR}/test_view_change.c
                 TIMEOUT 180 LABELS view)
# A join meeting the group's shutdown (forked members, loopback bootstrap).
spindle_add_test(test_view_join SOURCES ${CMAKE_CURRENT_LIST_DIR}/test_view_join.c
                 TIMEOUT 120 LABELS view join)
# Persistent identities: names in views, a name held twice, a restart
# that replaces its earlier incarnation (forked members, loopback bootstrap).
spindle_add_test(test_view_identity SOURCES ${CMAKE_CURRENT_LIST_DIR}/test_view_identity.c
                 TIMEOUT 120 LABELS view join)
# A joiner of an unordered subgroup with an uneven ragged edge: it takes
# the resends its state holds without delivering them.
spindle_add_test(test_view_join_unordered
                 SOURCES ${CMAKE_CURRENT_LIST_DIR}/test_view_join_unordered.c TIMEOUT 120
                 LABELS view join unordered)
# State transfer: above 64 MiB, streamed to a slow reader, refused.
spindle_add_test(test_view_join_state SOURCES ${CMAKE_CURRENT_LIST_DIR}/test_view_join_state.c
                 TIMEOUT 240 LABELS view join)
spindle_add_test(test_view_join_keyed SOURCES ${CMAKE_CURRENT_LIST_DIR}/test_view_join_keyed.c
                 TIMEOUT 120 LABELS view join security)
# spindle_group_set_keys reaches the libfabric endpoint: after a rotation a
# joiner holding only the new key connects to the members over fabric.
if(SPINDLE_FABRIC_FOUND)
  spindle_add_test(test_view_join_keyed_fabric_tcp
                   SOURCES ${CMAKE_CURRENT_LIST_DIR}/test_view_join_keyed.c
                   ARGS fabric tcp TIMEOUT 120 LABELS view join security fabric)
endif()
