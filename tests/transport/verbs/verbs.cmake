# verbs backend: its logic through fake verbs (no RDMA device needed), and
# the real no-device error path. Both programs share verbs_fake.h.
if(SPINDLE_VERBS_FOUND)
  spindle_add_test(test_verbs_post SOURCES ${CMAKE_CURRENT_LIST_DIR}/test_verbs_post.c
    TIMEOUT 60 LABELS transport verbs)
  target_link_libraries(test_verbs_post PRIVATE PkgConfig::SPINDLE_VERBS_PC)
  spindle_add_test(test_verbs_conn SOURCES ${CMAKE_CURRENT_LIST_DIR}/test_verbs_conn.c
    TIMEOUT 60 LABELS transport verbs)
  target_link_libraries(test_verbs_conn PRIVATE PkgConfig::SPINDLE_VERBS_PC)
endif()
