# hzc_add_host_test(NAME SOURCES... [LIBS libs...])
#   A GoogleTest binary that runs on the host without the module.
# hzc_add_vm_test(NAME SOURCES... [LIBS libs...])
#   A GoogleTest binary that needs hzc.ko; it runs in the QEMU guest.
find_package(GTest)
if(NOT GTest_FOUND)
  message(FATAL_ERROR "GoogleTest not found: install libgtest-dev and libgmock-dev "
                      "(scripts/deps check), or configure with -DHZC_BUILD_TESTS=OFF "
                      "-DHZC_BUILD_BENCHMARKS=OFF to build the library and tools alone")
endif()

function(_hzc_add_test kind name)
  cmake_parse_arguments(ARG "" "" "LIBS" ${ARGN})
  add_executable(${name} ${ARG_UNPARSED_ARGUMENTS})
  target_link_libraries(${name} PRIVATE GTest::gtest GTest::gtest_main GTest::gmock ${ARG_LIBS})
  # The tests' own code needs no optimiser's best: -O1 with line tables (enough for backtraces)
  # compiles in about half the time of -O2 -g. The library they test, the rank programs they
  # start and the benchmarks keep the build type's flags.
  if(CMAKE_BUILD_TYPE STREQUAL "RelWithDebInfo")
    target_compile_options(${name} PRIVATE -O1 -g1)
  endif()
  set_target_properties(${name} PROPERTIES RUNTIME_OUTPUT_DIRECTORY ${CMAKE_BINARY_DIR}/bin/${kind})
endfunction()

function(hzc_add_host_test name)
  _hzc_add_test(host-tests ${name} ${ARGN})
  add_test(NAME ${name} COMMAND ${name})
endfunction()

function(hzc_add_vm_test name)
  _hzc_add_test(vm-tests ${name} ${ARGN})
endfunction()

# hzc_add_hosts_test(NAME SOURCES... [LIBS libs...])
#   A GoogleTest binary for two guests at once (scripts/vm-run --hosts 2): it runs in both.
function(hzc_add_hosts_test name)
  _hzc_add_test(hosts-tests ${name} ${ARGN})
endfunction()
