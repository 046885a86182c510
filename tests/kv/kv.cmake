# spindle-kv (examples/kv, docs/KV.md): its RESP2 codec and state machine,
# built from the example's own sources, and the service end to end with
# redis-cli and python3-redis when spindle-kv is built.
set(KV_DIR ${CMAKE_SOURCE_DIR}/examples/kv)
set(KV_SM_SOURCES ${KV_DIR}/kv_resp.c ${KV_DIR}/kv_store.c ${KV_DIR}/kv_commands.c ${KV_DIR}/kv_exec.c
                  ${KV_DIR}/kv_slot.c ${KV_DIR}/kv_transfer.c)
spindle_add_test(test_kv_resp SOURCES ${CMAKE_CURRENT_LIST_DIR}/test_kv_resp.c ${KV_SM_SOURCES}
  TIMEOUT 30 LABELS kv)
target_include_directories(test_kv_resp PRIVATE ${KV_DIR})
spindle_add_test(test_kv_store SOURCES ${CMAKE_CURRENT_LIST_DIR}/test_kv_store.c ${KV_SM_SOURCES}
  TIMEOUT 30 LABELS kv)
target_include_directories(test_kv_store PRIVATE ${KV_DIR})
spindle_add_test(test_kv_slot SOURCES ${CMAKE_CURRENT_LIST_DIR}/test_kv_slot.c ${KV_SM_SOURCES}
  TIMEOUT 30 LABELS kv)
target_include_directories(test_kv_slot PRIVATE ${KV_DIR})
spindle_add_test(test_kv_transfer SOURCES ${CMAKE_CURRENT_LIST_DIR}/test_kv_transfer.c
  ${KV_SM_SOURCES} TIMEOUT 30 LABELS kv)
target_include_directories(test_kv_transfer PRIVATE ${KV_DIR})
if(TARGET spindle-kv)
  add_test(NAME kv_service_redis_clients_and_failover
           COMMAND sh ${CMAKE_CURRENT_LIST_DIR}/kv_service.sh $<TARGET_FILE:spindle-kv>
                   ${CMAKE_CURRENT_LIST_DIR}/kv_redis_client.py)
  set_tests_properties(kv_service_redis_clients_and_failover PROPERTIES LABELS "kv" TIMEOUT 120)
  # More pipelined input than a connection's limit, before any reply is
  # read: the edge-triggered client socket is re-armed (kv_client.c).
  add_test(NAME kv_pipeline_past_the_input_limit_is_answered_whole
           COMMAND sh ${CMAKE_CURRENT_LIST_DIR}/kv_pipeline_past_input_limit.sh
                   $<TARGET_FILE:spindle-kv>)
  set_tests_properties(kv_pipeline_past_the_input_limit_is_answered_whole PROPERTIES
                       LABELS "kv" TIMEOUT 120)
  # A logged joiner of a shard the view's leader does not serve, and its
  # restart from its log (kv_join_logged_shards.sh).
  add_test(NAME kv_logged_joiner_of_a_shard_takes_its_state_from_the_shard
           COMMAND sh ${CMAKE_CURRENT_LIST_DIR}/kv_join_logged_shards.sh $<TARGET_FILE:spindle-kv>)
  set_tests_properties(kv_logged_joiner_of_a_shard_takes_its_state_from_the_shard PROPERTIES
                       LABELS "kv" TIMEOUT 60)
  # A total restart of two logged shards, one replica's log behind
  # (kv_restart_logged_shards.sh): the elected replica's log holds one
  # shard; the other shard is kept from its replicas' logs (docs/LOGS.md
  # "Total restart").
  add_test(NAME kv_total_restart_of_logged_shards_keeps_every_write
           COMMAND sh ${CMAKE_CURRENT_LIST_DIR}/kv_restart_logged_shards.sh $<TARGET_FILE:spindle-kv>)
  set_tests_properties(kv_total_restart_of_logged_shards_keeps_every_write PROPERTIES
                       LABELS "kv" TIMEOUT 90)
  # The same with a snapshot every 50 operations: replica 5's log ends
  # before its shard's source holds the shard from (a snapshot), and the
  # other shard's replicas before the elected replica's shard's snapshot.
  add_test(NAME kv_total_restart_of_logged_shards_after_snapshots_keeps_every_write
           COMMAND sh ${CMAKE_CURRENT_LIST_DIR}/kv_restart_logged_shards.sh $<TARGET_FILE:spindle-kv> 50)
  set_tests_properties(kv_total_restart_of_logged_shards_after_snapshots_keeps_every_write
                       PROPERTIES LABELS "kv" TIMEOUT 90)
endif()
# Linearizability (kv_linearizability.py, a Wing & Gong search per key): the
# checker on hand-made histories; a concurrent history across a SIGKILL and a
# join, which must linearize; and one with --stale-reads, in which the
# checker must find a violation.
if(EXISTS /usr/bin/python3)
  add_test(NAME kv_linearizability_checker_judges_handmade_histories
           COMMAND /usr/bin/python3 ${CMAKE_CURRENT_LIST_DIR}/kv_linearizability.py selftest)
  set_tests_properties(kv_linearizability_checker_judges_handmade_histories PROPERTIES
                       LABELS "kv" TIMEOUT 30)
  if(TARGET spindle-kv)
    add_test(NAME kv_linearizable_across_kill_and_join
             COMMAND /usr/bin/python3 ${CMAKE_CURRENT_LIST_DIR}/kv_history.py
                     $<TARGET_FILE:spindle-kv> --ops 1500)
    add_test(NAME kv_linearizable_across_kill_and_join_of_a_shard
             COMMAND /usr/bin/python3 ${CMAKE_CURRENT_LIST_DIR}/kv_history.py
                     $<TARGET_FILE:spindle-kv> --ops 1500 --shards)
    add_test(NAME kv_linearizable_across_kill_and_join_logged
             COMMAND /usr/bin/python3 ${CMAKE_CURRENT_LIST_DIR}/kv_history.py
                     $<TARGET_FILE:spindle-kv> --ops 1500 --log-dir)
    add_test(NAME kv_linearizability_checker_finds_stale_reads
             COMMAND /usr/bin/python3 ${CMAKE_CURRENT_LIST_DIR}/kv_history.py
                     $<TARGET_FILE:spindle-kv> --ops 2000 --stale-reads)
    set_tests_properties(kv_linearizable_across_kill_and_join
                         kv_linearizable_across_kill_and_join_of_a_shard
                         kv_linearizable_across_kill_and_join_logged
                         kv_linearizability_checker_finds_stale_reads PROPERTIES
                         LABELS "kv" TIMEOUT 120)
  endif()
endif()
