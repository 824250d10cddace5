# The plugin library depends on exactly what README lists (objdump -p, NEEDED entries): glibc's
# libc, libm, libpthread and libdl (the last two hold the old symbol versions on a glibc before
# 2.34; docs/portability.md), the dynamic loader and libgcc_s. libstdc++ is linked in statically and
# libibverbs is opened with dlopen on first use; anything else (a JSON library, SimGrid,
# libstdc++.so) would be a new requirement on every machine NCCL runs on.
execute_process(COMMAND objdump -p ${LIB} OUTPUT_VARIABLE out RESULT_VARIABLE rc)
if(NOT rc EQUAL 0)
  message(FATAL_ERROR "objdump -p failed on ${LIB}")
endif()
string(REGEX MATCHALL "NEEDED +[^\n]+" lines "${out}")
set(found "")
foreach(line IN LISTS lines)
  string(REGEX REPLACE "NEEDED +" "" lib "${line}")
  string(STRIP "${lib}" lib)
  list(APPEND found "${lib}")
endforeach()
list(SORT found)
set(expected ld-linux-x86-64.so.2 libc.so.6 libdl.so.2 libgcc_s.so.1 libm.so.6 libpthread.so.0)
if(NOT found STREQUAL expected)
  message(FATAL_ERROR "NEEDED differs from README:\n  found:    ${found}\n  expected: ${expected}")
endif()
message(STATUS "NEEDED: ${found}")
