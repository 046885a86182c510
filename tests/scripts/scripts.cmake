# The repository's own checks (scripts/): the layering checker passes on
# the tree and catches an upward include and an include circle.
add_test(NAME check_layers
         COMMAND sh ${CMAKE_CURRENT_LIST_DIR}/check_layers_test.sh
                 ${CMAKE_SOURCE_DIR}/scripts/check-layers.sh ${CMAKE_SOURCE_DIR})
set_tests_properties(check_layers PROPERTIES LABELS "scripts" TIMEOUT 60)
# Every environment variable the library reads is declared in
# src/config/config_env.c; the checker catches one that is not.
add_test(NAME check_env_declared
         COMMAND sh ${CMAKE_CURRENT_LIST_DIR}/check_env_test.sh
                 ${CMAKE_SOURCE_DIR}/scripts/check-env.sh ${CMAKE_SOURCE_DIR})
set_tests_properties(check_env_declared PROPERTIES LABELS "scripts;config" TIMEOUT 60)
