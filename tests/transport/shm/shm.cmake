spindle_add_test(test_shm SOURCES ${CMAKE_CURRENT_LIST_DIR}/test_shm.c TIMEOUT 120
  LABELS transport shm)
