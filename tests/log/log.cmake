# The logs (src/log): the on-disk format, opening and repair, the appender.
spindle_add_test(test_log_store SOURCES ${CMAKE_CURRENT_LIST_DIR}/test_log_store.c TIMEOUT 120
  LABELS log)
spindle_add_test(test_log_append SOURCES ${CMAKE_CURRENT_LIST_DIR}/test_log_append.c TIMEOUT 60
  LABELS log)
spindle_add_test(test_log_delivery SOURCES ${CMAKE_CURRENT_LIST_DIR}/test_log_delivery.c
  TIMEOUT 120 LABELS log group)
spindle_add_test(test_log_frontier SOURCES ${CMAKE_CURRENT_LIST_DIR}/test_log_frontier.c
  TIMEOUT 240 LABELS log group)
spindle_add_test(test_log_snapshot SOURCES ${CMAKE_CURRENT_LIST_DIR}/test_log_snapshot.c TIMEOUT 60
  LABELS log)
spindle_add_test(test_log_compaction SOURCES ${CMAKE_CURRENT_LIST_DIR}/test_log_compaction.c
  TIMEOUT 120 LABELS log group)
