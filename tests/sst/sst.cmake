spindle_add_test(test_sst SOURCES ${CMAKE_CURRENT_LIST_DIR}/test_sst.c TIMEOUT 120 LABELS sst)
# The predicate thread runs while a table's connect waits for its peer
# (libfabric tcp: a listener that never answers).
if(SPINDLE_FABRIC_FOUND)
  spindle_add_test(test_sst_connect SOURCES ${CMAKE_CURRENT_LIST_DIR}/test_sst_connect.c
                   TIMEOUT 45 LABELS sst fabric)
  target_include_directories(test_sst_connect PRIVATE ${CMAKE_SOURCE_DIR}/tests/transport/fabric)
  # A sleeping peer answers on its transport's progress thread, and a
  # predicate without an arrival trigger still wakes its predicate thread.
  spindle_add_test(test_sst_arrival SOURCES ${CMAKE_CURRENT_LIST_DIR}/test_sst_arrival.c
                   TIMEOUT 60 LABELS sst fabric)
  target_include_directories(test_sst_arrival PRIVATE ${CMAKE_SOURCE_DIR}/tests/transport/fabric)
endif()
# One post rings no peer before every peer's batch is posted (post_pending).
spindle_add_test(test_sst_post_order SOURCES ${CMAKE_CURRENT_LIST_DIR}/test_sst_post_order.c
                 TIMEOUT 30 LABELS sst)
# The predicate thread's spin policy: none after ringing peers on few CPUs.
spindle_add_test(test_sst_spin SOURCES ${CMAKE_CURRENT_LIST_DIR}/test_sst_spin.c TIMEOUT 30
                 LABELS sst)
# A peer polling on a dedicated CPU is posted to without a doorbell ring.
spindle_add_test(test_sst_polling_ring SOURCES ${CMAKE_CURRENT_LIST_DIR}/test_sst_polling_ring.c
                 TIMEOUT 30 LABELS sst)
# The predicate thread keeps a real-time policy it inherits (skipped
# without the right to one) and a normal thread stays normal.
spindle_add_test(test_sst_policy SOURCES ${CMAKE_CURRENT_LIST_DIR}/test_sst_policy.c TIMEOUT 30
                 LABELS sst)
