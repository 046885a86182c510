# Views, ragged-edge trim and the control-channel codec (src/view).
spindle_add_test(test_view SOURCES ${CMAKE_CURRENT_LIST_DIR}/test_view.c TIMEOUT 60 LABELS view)
spindle_add_test(test_view_trim SOURCES ${CMAKE_CURRENT_LIST_DIR}/test_trim.c TIMEOUT 60
                 LABELS view)
spindle_add_test(test_view_wire SOURCES ${CMAKE_CURRENT_LIST_DIR}/test_wire.c TIMEOUT 60
                 LABELS view)
# Bounded mutation fuzzing of the decoder; also builds as a libFuzzer target
# (see the file's header).
spindle_add_test(test_view_fuzz_wire SOURCES ${CMAKE_CURRENT_LIST_DIR}/fuzz_wire.c TIMEOUT 120
                 LABELS view fuzz ARGS 50000)
# Failure-driven view changes with forked members over shm (kill -9).
spindle_add_test(test_view_change SOURCES ${CMAKE_CURRENT_LIST_DIR}/test_view_change.c
                 TIMEOUT 180 LABELS view)
# A join meeting the group's shutdown (forked members, loopback bootstrap).
spindle_add_test(test_view_join SOURCES ${CMAKE_CURRENT_LIST_DIR}/test_view_join.c
                 TIMEOUT 120 LABELS view join)
