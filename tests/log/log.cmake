# The logs (src/log): the on-disk format, opening and repair, the appender.
spindle_add_test(test_log_store SOURCES ${CMAKE_CURRENT_LIST_DIR}/test_log_store.c TIMEOUT 120
  LABELS log)
spindle_add_test(test_log_append SOURCES ${CMAKE_CURRENT_LIST_DIR}/test_log_append.c TIMEOUT 60
  LABELS log)
spindle_add_test(test_log_direct SOURCES ${CMAKE_CURRENT_LIST_DIR}/test_log_direct.c TIMEOUT 60
  LABELS log)
spindle_add_test(test_log_delivery SOURCES ${CMAKE_CURRENT_LIST_DIR}/test_log_delivery.c
  TIMEOUT 120 LABELS log group)
spindle_add_test(test_log_frontier SOURCES ${CMAKE_CURRENT_LIST_DIR}/test_log_frontier.c
  TIMEOUT 240 LABELS log group)
spindle_add_test(test_log_snapshot SOURCES ${CMAKE_CURRENT_LIST_DIR}/test_log_snapshot.c TIMEOUT 60
  LABELS log)
spindle_add_test(test_log_compaction SOURCES ${CMAKE_CURRENT_LIST_DIR}/test_log_compaction.c
  TIMEOUT 120 LABELS log group)
spindle_add_test(test_log_catchup SOURCES ${CMAKE_CURRENT_LIST_DIR}/test_log_catchup.c TIMEOUT 60
  LABELS log)
spindle_add_test(test_log_restart SOURCES ${CMAKE_CURRENT_LIST_DIR}/test_log_restart.c
  TIMEOUT 240 LABELS log group)
spindle_add_test(test_log_total_restart
  SOURCES ${CMAKE_CURRENT_LIST_DIR}/test_log_total_restart.c TIMEOUT 240 LABELS log group faults)
# A total restart whose elected log holds nothing of a logged subgroup
# (disjoint subgroups): that subgroup's member keeps its log and refuses.
spindle_add_test(test_log_restart_disjoint
  SOURCES ${CMAKE_CURRENT_LIST_DIR}/test_log_restart_disjoint.c TIMEOUT 120 LABELS log group faults)
# Restart of one member from its log (restart.sh): kill -9 mid-stream,
# restarted with its log directory, it is sent exactly what its log lacks
# and the three logs agree (about 8 s a run).
if(TARGET spindle-log)
  add_test(NAME log_restart_member
           COMMAND bash ${CMAKE_CURRENT_LIST_DIR}/restart.sh $<TARGET_FILE:spindle-bench>
                   $<TARGET_FILE:spindle-log> 2)
  set_tests_properties(log_restart_member PROPERTIES LABELS "log;view;faults" TIMEOUT 300)
endif()
# Total restart with the benchmark (total_restart.sh): every member killed
# with -9 mid-stream, the same command again; the streams finish exactly
# once and the three logs agree (about 10 s a run).
if(TARGET spindle-log)
  add_test(NAME log_total_restart
           COMMAND bash ${CMAKE_CURRENT_LIST_DIR}/total_restart.sh $<TARGET_FILE:spindle-bench>
                   $<TARGET_FILE:spindle-log> 2)
  set_tests_properties(log_total_restart PROPERTIES LABELS "log;view;faults" TIMEOUT 300)
endif()
