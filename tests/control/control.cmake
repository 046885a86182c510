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
