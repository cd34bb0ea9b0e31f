# Test helpers. Labels: unit, mpi, gpu, slow (more in tests/CMakeLists.txt).
include(GoogleTest)
set(ZT_MPIEXEC_FLAGS --oversubscribe --bind-to none CACHE STRING "Extra flags for mpiexec in tests")
# Open MPI refuses to run as root without these; CI and the dev machines run as root.
# PMIX_MCA_psec=^munge: mpirun's PMIx server (libpmix2) loads its munge security plugin
# whenever libmunge is installed (install-deps.sh --slurm) and asks munged for a
# credential at start; with munged down but its socket left behind (a killed munged: the
# Slurm tests start one), libmunge retries the refused connect for 2.3 s, on every mpirun.
# That was the ci stage's 777 -> 1,232 s (bench/results/ci-time.md, "CI time, 2026-11-28, 420c689").
# The local launches use PMIx's native (uid) security either way.
# OMP_WAIT_POLICY=passive: CTest runs tests side by side on few cores (and zt's CLI tests
# run 2 OpenMP threads beside another test), so idle OpenMP threads must sleep, not spin
# (docs/model.md, "Kernels": a spinning step next to other work ran 8x slower). Every test.
set(ZT_TEST_ENV OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 OMPI_MCA_rmaps_base_oversubscribe=1
    PMIX_MCA_psec=^munge OMP_WAIT_POLICY=passive)

# zt_add_unit_test(NAME src... LIBS lib... [LABELS ...])
function(zt_add_unit_test name)
  cmake_parse_arguments(A "" "" "SOURCES;LIBS;LABELS" ${ARGN})
  add_executable(${name} ${A_SOURCES})
  zt_target_defaults(${name})
  target_link_libraries(${name} PRIVATE ${A_LIBS} GTest::gtest_main)
  target_include_directories(${name} PRIVATE ${PROJECT_SOURCE_DIR}/tests)
  gtest_discover_tests(${name} DISCOVERY_TIMEOUT 60)
  # gtest_discover_tests(PROPERTIES ...) keeps only the first element of a list value
  # (CMake 3.25), so the labels and environment are set by a CTest include file that
  # runs after the discovered tests (listed in ${name}_TESTS) are defined.
  set(_props "${CMAKE_CURRENT_BINARY_DIR}/${name}_properties.cmake")
  set(_labels unit ${A_LABELS})
  file(WRITE "${_props}"
       "if(${name}_TESTS)\n"
       "  set_tests_properties(\${${name}_TESTS} PROPERTIES LABELS \"${_labels}\"\n"
       "                      ENVIRONMENT \"${ZT_TEST_ENV}\")\n"
       "endif()\n")
  set_property(DIRECTORY APPEND PROPERTY TEST_INCLUDE_FILES "${_props}")
endfunction()

# tests/mpi_main.cpp, compiled once for every MPI test binary (it was compiled once per
# binary, 22 times): MPI_THREAD_FUNNELED, and MPI_THREAD_MULTIPLE for the tests of threads
# calling MPI (zt_add_mpi_test's THREAD_MULTIPLE).
foreach(_variant zt_test_mpi_main zt_test_mpi_main_mt)
  add_library(${_variant} OBJECT ${PROJECT_SOURCE_DIR}/tests/mpi_main.cpp)
  zt_target_defaults(${_variant})
  target_link_libraries(${_variant} PRIVATE GTest::gtest MPI::MPI_C)
endforeach()
target_compile_definitions(zt_test_mpi_main_mt PRIVATE ZT_TEST_MPI_THREAD_MULTIPLE)

# zt_add_mpi_test(NAME SOURCES ... LIBS ... NP 1 2 3 4 [LABELS ...] [TIMEOUT s] [SEPARATE Suite ...]
#                 [THREAD_MULTIPLE])
# One CTest entry per rank count: NAME.npN, run under mpiexec. The test binary
# uses tests/mpi_main.cpp, which initialises MPI and only prints on rank 0, and exits 77
# (SKIP_RETURN_CODE: CTest reports "skipped") when every test on rank 0 was skipped.
# SEPARATE: gtest suites that may skip (e.g. they need root) run as their own entries,
# NAME.Suite.npN, so that their skip shows in CTest instead of inside NAME.npN's pass.
# THREAD_MULTIPLE: MPI initialised with MPI_THREAD_MULTIPLE (threads that call MPI).
function(zt_add_mpi_test name)
  cmake_parse_arguments(A "THREAD_MULTIPLE" "TIMEOUT" "SOURCES;LIBS;NP;LABELS;SEPARATE" ${ARGN})
  if(NOT A_TIMEOUT)
    set(A_TIMEOUT 300)
  endif()
  set(_main zt_test_mpi_main)
  if(A_THREAD_MULTIPLE)
    set(_main zt_test_mpi_main_mt)
  endif()
  add_executable(${name} ${A_SOURCES} $<TARGET_OBJECTS:${_main}>)
  zt_target_defaults(${name})
  target_link_libraries(${name} PRIVATE ${A_LIBS} GTest::gtest MPI::MPI_C)
  target_include_directories(${name} PRIVATE ${PROJECT_SOURCE_DIR}/tests)
  set(_rest)
  if(A_SEPARATE)
    list(TRANSFORM A_SEPARATE APPEND ".*" OUTPUT_VARIABLE _patterns)
    list(JOIN _patterns ":" _joined)
    set(_rest "--gtest_filter=-${_joined}")
  endif()
  foreach(np ${A_NP})
    set(_entries "${name}.np${np}|${_rest}")
    foreach(suite ${A_SEPARATE})
      list(APPEND _entries "${name}.${suite}.np${np}|--gtest_filter=${suite}.*")
    endforeach()
    foreach(entry ${_entries})
      string(REPLACE "|" ";" entry "${entry}")
      list(GET entry 0 _test)
      list(LENGTH entry _len)
      set(_filter)
      if(_len GREATER 1)
        list(GET entry 1 _filter)
      endif()
      add_test(NAME ${_test}
               COMMAND ${MPIEXEC_EXECUTABLE} ${MPIEXEC_NUMPROC_FLAG} ${np} ${ZT_MPIEXEC_FLAGS}
                       $<TARGET_FILE:${name}> ${_filter})
      set_tests_properties(${_test} PROPERTIES LABELS "mpi;${A_LABELS}"
                           ENVIRONMENT "${ZT_TEST_ENV}" TIMEOUT ${A_TIMEOUT} PROCESSORS ${np}
                           SKIP_RETURN_CODE 77)
    endforeach()
  endforeach()
endfunction()
