# The public handle (src/group): parameter checks that name the bad value,
# the send path in one process, statistics.
spindle_add_test(test_group_api SOURCES ${CMAKE_CURRENT_LIST_DIR}/test_group_api.c
                 TIMEOUT 60 LABELS group)
