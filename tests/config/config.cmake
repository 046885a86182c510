spindle_add_test(test_config SOURCES ${CMAKE_CURRENT_LIST_DIR}/test_config.c TIMEOUT 30
  LABELS config unit)
target_compile_definitions(test_config PRIVATE
  SPINDLE_EXAMPLE_INI="${CMAKE_SOURCE_DIR}/examples/cluster.ini")
spindle_add_test(test_setup SOURCES ${CMAKE_CURRENT_LIST_DIR}/test_setup.c TIMEOUT 30
  LABELS config unit)
target_compile_definitions(test_setup PRIVATE
  SPINDLE_EXAMPLE_INI="${CMAKE_SOURCE_DIR}/examples/cluster.ini")
spindle_add_test(test_launch_parse SOURCES ${CMAKE_CURRENT_LIST_DIR}/test_launch_parse.c
  TIMEOUT 30 LABELS config unit)
spindle_add_test(test_setup_env SOURCES ${CMAKE_CURRENT_LIST_DIR}/test_setup_env.c TIMEOUT 30
  LABELS config unit)
spindle_add_test(test_config_env SOURCES ${CMAKE_CURRENT_LIST_DIR}/test_config_env.c TIMEOUT 30
  LABELS config unit)
