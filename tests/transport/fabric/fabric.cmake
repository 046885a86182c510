# libfabric backend tests, what only this backend does (the contract is in
# tests/transport/conformance): set-up errors, records split and posted in
# parts, credits, a silent peer bounded. Both providers are required: a
# missing one fails the test (tf_require_provider), it is never skipped.
if(SPINDLE_FABRIC_FOUND)
  foreach(prov tcp sockets)
    spindle_add_test(test_fabric_basic_${prov}
      SOURCES ${CMAKE_CURRENT_LIST_DIR}/test_fabric_basic.c
      ARGS ${prov} TIMEOUT 120 LABELS fabric)
    spindle_add_test(test_fabric_failure_${prov}
      SOURCES ${CMAKE_CURRENT_LIST_DIR}/test_fabric_failure.c
      ARGS ${prov} TIMEOUT 120 LABELS fabric)
  endforeach()
endif()
