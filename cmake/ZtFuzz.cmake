# Fuzzing (libFuzzer, clang only): -DZT_FUZZ=ON instruments every zt library for coverage
# (-fsanitize=fuzzer-no-link) with AddressSanitizer and UndefinedBehaviorSanitizer, and
# builds the targets in fuzz/. Use the `fuzz` preset (CC=clang, CXX=clang++, build-fuzz/).
option(ZT_FUZZ "Build the libFuzzer targets in fuzz/ (clang; instruments all of zt)" OFF)
if(ZT_FUZZ)
  if(NOT CMAKE_CXX_COMPILER_ID STREQUAL "Clang")
    message(FATAL_ERROR "ZT_FUZZ needs clang (libFuzzer): configure with the `fuzz` preset "
                        "or -DCMAKE_CXX_COMPILER=clang++ -DCMAKE_C_COMPILER=clang")
  endif()
  set(ZT_FUZZ_SANITIZERS address,undefined)
  # -O1 -gline-tables-only (the fuzz preset's flags, and OSS-Fuzz's): line numbers in the
  # sanitizer reports at about a third less compile time than -O2 -g (src/kernels/cpu/linear.cpp:
  # 48.6 s -> 29.2 s of CPU, src/ckpt/hf_convert.cpp 25.7 -> 20.4 s, clang 14).
  target_compile_options(zt_options INTERFACE
    $<$<COMPILE_LANGUAGE:CXX>:-fsanitize=fuzzer-no-link,${ZT_FUZZ_SANITIZERS}
                              -fno-sanitize-recover=all -fno-omit-frame-pointer -gline-tables-only>)
  target_link_options(zt_options INTERFACE -fsanitize=${ZT_FUZZ_SANITIZERS})
endif()

# zt_add_fuzzer(NAME SOURCES ... LIBS ...): one libFuzzer executable.
function(zt_add_fuzzer name)
  cmake_parse_arguments(A "" "" "SOURCES;LIBS" ${ARGN})
  add_executable(${name} ${A_SOURCES})
  zt_target_defaults(${name})
  target_link_libraries(${name} PRIVATE ${A_LIBS})
  target_link_options(${name} PRIVATE -fsanitize=fuzzer)
endfunction()
