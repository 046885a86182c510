# The transport contract, one suite run unchanged against every backend
# (conformance.c): shm, libfabric with the tcp and sockets providers (a
# missing provider fails, never skips), the verbs backend on a fake NIC
# that moves bytes, and the broken shims the suite must catch.
set(conformance_sources ${CMAKE_CURRENT_LIST_DIR}/conformance.c
    ${CMAKE_CURRENT_LIST_DIR}/broken_shim.c)
if(SPINDLE_VERBS_FOUND)
  list(APPEND conformance_sources ${CMAKE_CURRENT_LIST_DIR}/../verbs/fake_nic.c)
endif()
add_executable(transport_conformance ${conformance_sources})
target_link_libraries(transport_conformance PRIVATE spindle_objects PkgConfig::CMOCKA)
target_include_directories(transport_conformance PRIVATE ${CMAKE_SOURCE_DIR}/tests
                           ${CMAKE_CURRENT_LIST_DIR})
target_compile_definitions(transport_conformance PRIVATE SPINDLE_BUILDING)
if(SPINDLE_VERBS_FOUND)
  target_link_libraries(transport_conformance PRIVATE PkgConfig::SPINDLE_VERBS_PC)
endif()

set(conformance_backends shm broken)
if(SPINDLE_FABRIC_FOUND)
  list(APPEND conformance_backends fabric:tcp fabric:sockets)
endif()
if(SPINDLE_VERBS_FOUND)
  list(APPEND conformance_backends verbs-fake)
endif()
foreach(backend ${conformance_backends})
  string(REPLACE ":" "_" name ${backend})
  string(REPLACE "-" "_" name ${name})
  add_test(NAME transport_conformance_${name} COMMAND transport_conformance ${backend})
  set_tests_properties(transport_conformance_${name} PROPERTIES
    LABELS "transport;conformance" TIMEOUT 600)
endforeach()
