# libfabric backend tests, what only this backend does (the contract is in
# tests/transport/conformance): set-up errors, records split and posted in
# parts, credits, a silent peer bounded, connection set-up with a group
# key and write grants. Both providers are required: a
# missing one fails the test (tf_require_provider), it is never skipped.
if(SPINDLE_FABRIC_FOUND)
  foreach(prov tcp sockets)
    spindle_add_test(test_fabric_basic_${prov}
      SOURCES ${CMAKE_CURRENT_LIST_DIR}/test_fabric_basic.c
      ARGS ${prov} TIMEOUT 120 LABELS fabric)
    spindle_add_test(test_fabric_failure_${prov}
      SOURCES ${CMAKE_CURRENT_LIST_DIR}/test_fabric_failure.c
      ARGS ${prov} TIMEOUT 120 LABELS fabric)
    spindle_add_test(test_fabric_auth_${prov}
      SOURCES ${CMAKE_CURRENT_LIST_DIR}/test_fabric_auth.c
      ARGS ${prov} TIMEOUT 120 LABELS fabric security)
    spindle_add_test(test_fabric_grant_${prov}
      SOURCES ${CMAKE_CURRENT_LIST_DIR}/test_fabric_grant.c
      ARGS ${prov} TIMEOUT 120 LABELS fabric security)
  endforeach()
endif()
