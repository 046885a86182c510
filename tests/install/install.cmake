# The installed library, pkg-config file and CMake package, as a user sees them.
# Not in sanitizer builds: their library needs the sanitizer runtime linked
# into the program first, which a plain user build does not do.
if(NOT SPINDLE_ASAN AND NOT SPINDLE_TSAN)
  add_test(NAME install_consumer
           COMMAND sh ${CMAKE_CURRENT_LIST_DIR}/install_consumer.sh ${CMAKE_BINARY_DIR}
                   ${CMAKE_SOURCE_DIR})
  set_tests_properties(install_consumer PROPERTIES LABELS install TIMEOUT 300)
endif()
