spindle_add_test(test_sst SOURCES ${CMAKE_CURRENT_LIST_DIR}/test_sst.c TIMEOUT 120 LABELS sst)
