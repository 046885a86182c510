# The transport layer itself: the backend registry and its checks.
spindle_add_test(test_transport_registry SOURCES ${CMAKE_CURRENT_LIST_DIR}/test_registry.c
                 TIMEOUT 60 LABELS transport)
