# spindle-bench over libfabric's tcp provider: delivery traces of a local
# 3-member group, --config errors, and three hosts in network namespaces.
if(SPINDLE_FABRIC_FOUND AND TARGET spindle-bench)
  # smc_traces.sh narrowed to 3 members, 128 B and 10 KB, a small window (many
  # wrap-arounds) and the default one (a full 10 KB window is more than one
  # landing ring, so its pushes go out in parts).
  add_test(NAME fabric_traces_agree
           COMMAND sh ${CMAKE_SOURCE_DIR}/tests/smc/smc_traces.sh $<TARGET_FILE:spindle-bench>)
  set_tests_properties(fabric_traces_agree PROPERTIES
    LABELS "fabric;smc" TIMEOUT 300
    ENVIRONMENT "SPINDLE_TRACE_MEMBERS=3;SPINDLE_TRACE_SIZES=128 10240;SPINDLE_TRACE_WINDOWS=7 100;SPINDLE_TRACE_MESSAGES=500;SPINDLE_TRACE_BENCH_ARGS=--transport fabric --provider tcp")

  add_test(NAME fabric_bench_config_errors
           COMMAND sh ${CMAKE_CURRENT_LIST_DIR}/bench_config_errors.sh
                   $<TARGET_FILE:spindle-bench>)
  set_tests_properties(fabric_bench_config_errors PROPERTIES LABELS "fabric;config" TIMEOUT 120)

  # Needs root and iproute2, and fails (never skips) without them.
  add_test(NAME fabric_netns_hosts
           COMMAND bash ${CMAKE_CURRENT_LIST_DIR}/netns_hosts.sh $<TARGET_FILE:spindle-bench> 1000)
  set_tests_properties(fabric_netns_hosts PROPERTIES LABELS "fabric;netns" TIMEOUT 300)
endif()
