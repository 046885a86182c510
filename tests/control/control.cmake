# The control channel (src/control): the directory exchange, and the TCP
# mesh, mailboxes and join listener between real processes on loopback.
spindle_add_test(test_ctl_dir SOURCES ${CMAKE_CURRENT_LIST_DIR}/test_ctl_dir.c TIMEOUT 60
  LABELS control)
spindle_add_test(test_ctl_tcp SOURCES ${CMAKE_CURRENT_LIST_DIR}/test_ctl_tcp.c TIMEOUT 60
  LABELS control)
spindle_add_test(test_ctl_wire SOURCES ${CMAKE_CURRENT_LIST_DIR}/test_ctl_wire.c TIMEOUT 30
  LABELS control wire)
spindle_add_test(test_ctl_auth SOURCES ${CMAKE_CURRENT_LIST_DIR}/test_ctl_auth.c TIMEOUT 90
  LABELS control security)
spindle_add_test(test_ctl_accept SOURCES ${CMAKE_CURRENT_LIST_DIR}/test_ctl_accept.c TIMEOUT 120
  LABELS control security)
# Not a test: the group key's cost on the control channel (docs/SECURITY.md).
add_executable(bench_ctl_rtt ${CMAKE_CURRENT_LIST_DIR}/bench_ctl_rtt.c)
target_link_libraries(bench_ctl_rtt PRIVATE spindle_objects)
target_include_directories(bench_ctl_rtt PRIVATE ${CMAKE_SOURCE_DIR}/tests)
target_compile_definitions(bench_ctl_rtt PRIVATE SPINDLE_BUILDING)
# Not a test by itself: a stranger's client against members' control ports
# (attack.sh, docs/SECURITY.md "Under attack").
add_executable(spindle-attack ${CMAKE_CURRENT_LIST_DIR}/attack.c)
# A keyed group streams, and a joiner with the key gets in, while strangers
# flood, send garbage, replay a real joiner's bytes and try to join with
# another key and with none (attack.sh; about 10 s). One round here: the
# benchmark's rounds and figures are in docs/SECURITY.md.
if(TARGET spindle-bench AND TARGET spindle-keygen)
  if(SPINDLE_TSAN OR SPINDLE_ASAN)
    set(SPINDLE_ATTACK_MESSAGES 15000)
  else()
    set(SPINDLE_ATTACK_MESSAGES 30000)
  endif()
  add_test(NAME attack_keyed_group
           COMMAND bash ${CMAKE_CURRENT_LIST_DIR}/attack.sh $<TARGET_FILE:spindle-bench>
                   $<TARGET_FILE:spindle-attack> $<TARGET_FILE:spindle-keygen>
                   $<TARGET_FILE:check_traces> 1 ${SPINDLE_ATTACK_MESSAGES} 200 20 20 5000)
  set_tests_properties(attack_keyed_group PROPERTIES LABELS "control;security" TIMEOUT 180)
endif()
