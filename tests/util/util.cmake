spindle_add_test(test_util SOURCES ${CMAKE_CURRENT_LIST_DIR}/test_util.c LABELS unit)
spindle_add_test(test_util_wire SOURCES ${CMAKE_CURRENT_LIST_DIR}/test_wire.c LABELS unit wire)
spindle_add_test(test_log SOURCES ${CMAKE_CURRENT_LIST_DIR}/test_log.c LABELS unit)
