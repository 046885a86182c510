# spindle_dds (examples/dds): the configuration and sample codecs, and
# real participants forked on shm. Only when the examples are built.
if(TARGET spindle_dds)
  function(spindle_add_dds_test name)
    spindle_add_test(${name} ${ARGN})
    target_link_libraries(${name} PRIVATE spindle_dds)
  endfunction()
  # The INI loader's refusals name what is wrong; the layout rule.
  spindle_add_dds_test(test_dds_config SOURCES ${CMAKE_CURRENT_LIST_DIR}/test_dds_config.c
                       TIMEOUT 30 LABELS dds)
  # Sample header and history state: round trips, every refusal.
  spindle_add_dds_test(test_dds_sample SOURCES ${CMAKE_CURRENT_LIST_DIR}/test_dds_sample.c
                       TIMEOUT 30 LABELS dds wire)
  # Atomic, unordered, a late volatile and a late logged subscriber, a
  # late volatile subscriber when every participant has a log directory, a
  # writer and a subscriber killed mid-stream, a subscriber that leaves
  # (forked participants).
  foreach(scenario atomic unordered volatile logged log_dirs killed left)
    spindle_add_dds_test(test_dds_groups_${scenario}
                         SOURCES ${CMAKE_CURRENT_LIST_DIR}/test_dds_groups.c
                         TIMEOUT 120 LABELS dds ARGS "*${scenario}*" $<TARGET_FILE:spindle-log>)
  endforeach()
  # Sealed client frames with a key: both ways, and every way a frame
  # can be replayed, reordered or altered refused by name.
  spindle_add_dds_test(test_dds_client_seal SOURCES ${CMAKE_CURRENT_LIST_DIR}/test_dds_client_seal.c
                       TIMEOUT 30 LABELS dds wire)
  # A volatile topic's history reaches a late subscriber after the leader,
  # which took no part in the topic, was killed (forked participants).
  spindle_add_dds_test(test_dds_history SOURCES ${CMAKE_CURRENT_LIST_DIR}/test_dds_history.c
                       TIMEOUT 120 LABELS dds)
  # External clients (the test process): failover after a member's
  # SIGKILL, the group key, malformed client bytes, a slow client, sealed
  # frames altered, replayed or reordered, a slow client with a key (the
  # output's bound over sealed frames) (forked members).
  foreach(scenario fails_over key malformed slow sealed lags)
    spindle_add_dds_test(test_dds_clients_${scenario}
                         SOURCES ${CMAKE_CURRENT_LIST_DIR}/test_dds_clients.c
                         TIMEOUT 30 LABELS dds ARGS "*${scenario}*")
  endforeach()
endif()
if(TARGET spindle-dds-perf)
  # The benchmark's JSON line, tiny runs of every QoS (the figures are
  # scripts/dds-compare.sh's, not CI's).
  add_test(NAME dds_perf_smoke
           COMMAND sh ${CMAKE_CURRENT_LIST_DIR}/dds_perf_smoke.sh $<TARGET_FILE:spindle-dds-perf>)
  set_tests_properties(dds_perf_smoke PROPERTIES LABELS "dds;tools" TIMEOUT 60)
endif()
