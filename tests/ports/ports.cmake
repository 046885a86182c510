# The tests' port reservation: tests/test_ports.h, and its Python and shell
# twins sharing its lock files.
spindle_add_test(test_ports SOURCES ${CMAKE_CURRENT_LIST_DIR}/test_ports.c LABELS unit ports
                 TIMEOUT 30)
add_test(NAME test_ports_twins COMMAND sh ${CMAKE_CURRENT_LIST_DIR}/test_ports_twins.sh)
set_tests_properties(test_ports_twins PROPERTIES LABELS "unit;ports" TIMEOUT 30)
