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
# The manual pages render without a warning and cover every public function
# and installed tool; the checker catches a page that is missing or broken.
find_program(SPINDLE_MAN_PROGRAM man)
if(SPINDLE_MAN_PROGRAM)
  add_test(NAME check_man_pages
           COMMAND sh ${CMAKE_CURRENT_LIST_DIR}/check_man_test.sh
                   ${CMAKE_SOURCE_DIR}/scripts/check-man.sh ${CMAKE_SOURCE_DIR})
  set_tests_properties(check_man_pages PROPERTIES LABELS "scripts" TIMEOUT 120)
endif()
# The ABI check's one judgement of its own (scripts/abi-appended.py, with
# abidiff): members appended to the structs that may grow pass, a member
# inserted mid-struct, a change reached through the options and a setup
# member added are each reported. Needs abidiff (abigail-tools, which
# `make abi` installs) and python3.
find_program(SPINDLE_ABIDIFF_PROGRAM abidiff)
find_program(SPINDLE_PYTHON3_PROGRAM python3)
if(SPINDLE_ABIDIFF_PROGRAM AND SPINDLE_PYTHON3_PROGRAM)
  add_test(NAME check_abi_appended
           COMMAND ${SPINDLE_PYTHON3_PROGRAM} ${CMAKE_CURRENT_LIST_DIR}/abi_appended_test.py
                   ${CMAKE_SOURCE_DIR}/scripts/abi-appended.py
                   ${CMAKE_SOURCE_DIR}/abi/libspindle.so.0.abi)
  set_tests_properties(check_abi_appended PROPERTIES LABELS "scripts" TIMEOUT 60)
endif()
