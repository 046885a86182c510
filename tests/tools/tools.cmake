# The command-line tools: spindle-rawbench reports the raw transport
# reference (shm, and libfabric tcp when built).
if(TARGET spindle-rawbench AND TARGET spindle-bench)
  if(SPINDLE_FABRIC_FOUND)
    set(rawbench_fabric fabric)
  endif()
  add_test(NAME rawbench_reports_the_reference
           COMMAND sh ${CMAKE_CURRENT_LIST_DIR}/rawbench.sh $<TARGET_FILE:spindle-rawbench>
                   $<TARGET_FILE:spindle-bench> ${rawbench_fabric})
  set_tests_properties(rawbench_reports_the_reference PROPERTIES LABELS "tools" TIMEOUT 120)
endif()
# spindle-keygen writes private keys the library accepts, and never
# overwrites one.
if(TARGET spindle-keygen)
  spindle_add_test(test_keygen SOURCES ${CMAKE_CURRENT_LIST_DIR}/test_keygen.c
    ARGS $<TARGET_FILE:spindle-keygen> TIMEOUT 30 LABELS tools security)
endif()
# spindle-bench --duration: flag validation, a timed run that stops by
# itself with a nonzero count, [bench] duration_ms, a joiner's summary.
if(TARGET spindle-bench)
  add_test(NAME bench_duration_runs_and_stops
           COMMAND sh ${CMAKE_CURRENT_LIST_DIR}/bench_duration.sh $<TARGET_FILE:spindle-bench>)
  set_tests_properties(bench_duration_runs_and_stops PROPERTIES LABELS "tools" TIMEOUT 180)
  # The run clock alone: a late warm-up edge still measures the whole
  # duration.
  spindle_add_test(test_bench_clock SOURCES ${CMAKE_CURRENT_LIST_DIR}/test_bench_clock.c
    ${CMAKE_SOURCE_DIR}/tools/bench/bench_timing.c TIMEOUT 30 LABELS tools)
  target_include_directories(test_bench_clock PRIVATE ${CMAKE_SOURCE_DIR}/tools/bench)
endif()
# spindle-run starts a group of spindle-hello from the environment alone,
# prefixes output, forwards SIGTERM and names how each copy ended.
if(TARGET spindle-run AND TARGET spindle-hello)
  add_test(NAME run_starts_a_group_from_the_environment
           COMMAND sh ${CMAKE_CURRENT_LIST_DIR}/run.sh $<TARGET_FILE:spindle-run>
                   $<TARGET_FILE:spindle-hello>)
  set_tests_properties(run_starts_a_group_from_the_environment PROPERTIES LABELS "tools"
                       TIMEOUT 120)
endif()
# spindle-log checks, repairs, prints and compares member logs.
if(TARGET spindle-log)
  spindle_add_test(test_log_tool SOURCES ${CMAKE_CURRENT_LIST_DIR}/test_log_tool.c
    ARGS $<TARGET_FILE:spindle-log> TIMEOUT 60 LABELS tools log)
endif()
# Logged delivery end to end: three member processes, then spindle-log
# compare over their logs.
if(TARGET spindle-log)
  spindle_add_test(test_logged_group SOURCES ${CMAKE_CURRENT_LIST_DIR}/test_logged_group.c
    ARGS $<TARGET_FILE:spindle-log> TIMEOUT 120 LABELS tools log group)
endif()
# spindle-bench --log-dir: the log's figures, and logs that agree.
if(TARGET spindle-bench AND TARGET spindle-log)
  add_test(NAME bench_log_dir_logs_every_message
           COMMAND sh ${CMAKE_CURRENT_LIST_DIR}/bench_log.sh $<TARGET_FILE:spindle-bench>
                   $<TARGET_FILE:spindle-log>)
  set_tests_properties(bench_log_dir_logs_every_message PROPERTIES LABELS "tools;log" TIMEOUT 120)
endif()
# spindle-info lists every variable of the environment table, marks the
# ones set, and every configuration key.
if(TARGET spindle-info)
  add_test(NAME info_lists_every_variable_and_key
           COMMAND sh ${CMAKE_CURRENT_LIST_DIR}/info.sh $<TARGET_FILE:spindle-info>
                   ${CMAKE_SOURCE_DIR})
  set_tests_properties(info_lists_every_variable_and_key PROPERTIES LABELS "tools;config"
                       TIMEOUT 30)
endif()

# spindle-bench --dispatch: every delivery through spindle_dispatch, also
# with the log's bound composed with the dispatch queue's.
if(TARGET spindle-bench)
  add_test(NAME bench_dispatch_delivers_everything
           COMMAND sh ${CMAKE_CURRENT_LIST_DIR}/bench_dispatch.sh $<TARGET_FILE:spindle-bench>)
  set_tests_properties(bench_dispatch_delivers_everything PROPERTIES LABELS "tools;group"
                       TIMEOUT 120)
endif()

# The administration endpoint: spindle-stat --json (read with jq) and
# spindle-ctl remove and leave on a three-member group, strangers, garbage
# and stale sockets refused, and the request parser.
if(TARGET spindle-stat AND TARGET spindle-ctl)
  spindle_add_test(test_admin SOURCES ${CMAKE_CURRENT_LIST_DIR}/test_admin.c
    ARGS $<TARGET_FILE:spindle-stat> $<TARGET_FILE:spindle-ctl> TIMEOUT 120 LABELS tools group)
endif()

# spindle-bench --app-cpus: a pinned run delivers everything; an unusable
# CPU or a malformed list is refused, named.
if(TARGET spindle-bench)
  add_test(NAME bench_app_cpus_pins_or_refuses
           COMMAND sh ${CMAKE_CURRENT_LIST_DIR}/bench_app_cpus.sh $<TARGET_FILE:spindle-bench>)
  set_tests_properties(bench_app_cpus_pins_or_refuses PROPERTIES LABELS "tools;bench" TIMEOUT 60)
endif()

# spindle-bench --realtime: a run whose group threads are SCHED_FIFO
# delivers everything (or names the refused policy); bad priorities refused.
if(TARGET spindle-bench)
  add_test(NAME bench_realtime_runs_or_refuses
           COMMAND sh ${CMAKE_CURRENT_LIST_DIR}/bench_realtime.sh $<TARGET_FILE:spindle-bench>)
  set_tests_properties(bench_realtime_runs_or_refuses PROPERTIES LABELS "tools;bench" TIMEOUT 60)
endif()
