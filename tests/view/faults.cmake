# Fault injection: the trace checker, its self-test on crafted traces, and
# randomized kill -9 runs of spindle-bench with failure tolerance.
add_executable(check_traces ${CMAKE_CURRENT_LIST_DIR}/check_traces.c)
add_test(NAME faults_checker
         COMMAND sh ${CMAKE_CURRENT_LIST_DIR}/faults_checker.sh $<TARGET_FILE:check_traces>)
set_tests_properties(faults_checker PROPERTIES LABELS "view;faults" TIMEOUT 60)
