spindle_add_test(test_util SOURCES ${CMAKE_CURRENT_LIST_DIR}/test_util.c LABELS unit)
spindle_add_test(test_util_wire SOURCES ${CMAKE_CURRENT_LIST_DIR}/test_wire.c LABELS unit wire)
