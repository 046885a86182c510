# Small-message multicast: real member processes over shm.
spindle_add_test(test_smc_group SOURCES ${CMAKE_CURRENT_LIST_DIR}/test_smc_group.c
                 TIMEOUT 180 LABELS smc)
if(TARGET spindle-bench)
  add_test(NAME smc_traces_agree
           COMMAND sh ${CMAKE_CURRENT_LIST_DIR}/smc_traces.sh $<TARGET_FILE:spindle-bench>)
  add_test(NAME smc_batching_cuts_writes
           COMMAND sh ${CMAKE_CURRENT_LIST_DIR}/smc_batching.sh $<TARGET_FILE:spindle-bench>)
  add_test(NAME smc_own_inline_sent_num_follows_the_data
           COMMAND sh ${CMAKE_CURRENT_LIST_DIR}/smc_own_inline_bench.sh
                   $<TARGET_FILE:spindle-bench>)
  set_tests_properties(smc_traces_agree smc_batching_cuts_writes
                       smc_own_inline_sent_num_follows_the_data PROPERTIES LABELS smc TIMEOUT 180)
endif()
spindle_add_test(test_smc_view SOURCES ${CMAKE_CURRENT_LIST_DIR}/test_smc_view.c
                 TIMEOUT 60 LABELS smc)
spindle_add_test(test_smc_wrap SOURCES ${CMAKE_CURRENT_LIST_DIR}/test_smc_wrap.c
                 TIMEOUT 60 LABELS smc)
spindle_add_test(test_smc_rings SOURCES ${CMAKE_CURRENT_LIST_DIR}/test_smc_rings.c
                 TIMEOUT 60 LABELS smc)
# The ring slot header decoder: messages, nulls, and the lengths it refuses.
spindle_add_test(test_smc_slot_wire SOURCES ${CMAKE_CURRENT_LIST_DIR}/test_smc_slot_wire.c
                 TIMEOUT 30 LABELS smc security)
# A peer that breaks the protocol (slot lengths, counters, the point-to-point
# rings' too) is failed, not believed: two engines in one process, the test
# writing the lies.
spindle_add_test(test_smc_liar SOURCES ${CMAKE_CURRENT_LIST_DIR}/test_smc_liar.c TIMEOUT 60
                 LABELS smc)
# A null held here is passed before every member holds it; a message waits
# for every member (the delivery rule, smc_deliver_range).
spindle_add_test(test_smc_null_pass SOURCES ${CMAKE_CURRENT_LIST_DIR}/test_smc_null_pass.c
                 TIMEOUT 60 LABELS smc)
# The persistence column against a log the test plays: nothing persisted
# before it is durable, a full FIFO of marks thinned, the frontier upcall.
spindle_add_test(test_smc_frontier SOURCES ${CMAKE_CURRENT_LIST_DIR}/test_smc_frontier.c
                 TIMEOUT 60 LABELS smc)
# On libfabric a writer reaches only its own rings in a peer's side region:
# the write grants the view makes, checked at the target.
if(SPINDLE_FABRIC_FOUND)
  foreach(prov tcp sockets)
    spindle_add_test(test_smc_fabric_grant_${prov}
      SOURCES ${CMAKE_CURRENT_LIST_DIR}/test_smc_fabric_grant.c
      ARGS ${prov} TIMEOUT 60 LABELS smc fabric security)
  endforeach()
endif()
# Over libfabric a commit that finds its predicate thread asleep sends its
# atomic message itself; one order everywhere, also with senders at once;
# over shm the wake-up stays.
if(SPINDLE_FABRIC_FOUND)
  spindle_add_test(test_smc_commit_send SOURCES ${CMAKE_CURRENT_LIST_DIR}/test_smc_commit_send.c
                   TIMEOUT 120 LABELS smc fabric)
endif()
