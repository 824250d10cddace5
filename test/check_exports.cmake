# The library exports exactly the fourteen plugin tables, nothing else (nm -D --defined-only).
execute_process(COMMAND nm -D --defined-only ${LIB} OUTPUT_VARIABLE out RESULT_VARIABLE rc)
if(NOT rc EQUAL 0)
  message(FATAL_ERROR "nm failed on ${LIB}")
endif()
string(REGEX MATCHALL "[^\n]+" lines "${out}")
set(found "")
foreach(line IN LISTS lines)
  string(REGEX REPLACE "^[0-9a-fA-F]* *[A-Za-z] +" "" sym "${line}")
  list(APPEND found "${sym}")
endforeach()
list(SORT found)
set(expected ncclNetPlugin_v8 ncclNetPlugin_v9 ncclNetPlugin_v10 ncclNetPlugin_v11
    ncclNetPlugin_v12 ncclProfiler_v4 ncclProfiler_v5 ncclProfiler_v6 ncclProfiler_v7
    ncclTunerPlugin_v3 ncclTunerPlugin_v4 ncclTunerPlugin_v5 ncclTunerPlugin_v6
    ncclTunerPlugin_v7)
list(SORT expected)
if(NOT found STREQUAL expected)
  message(FATAL_ERROR "exported symbols differ:\n  found:    ${found}\n  expected: ${expected}")
endif()
message(STATUS "exports OK: ${found}")

# The library must load on a machine without CUDA, NCCL or rdma-core: it may only need the C and
# C++ runtimes (optional pieces such as libibverbs are dlopen'ed at run time).
execute_process(COMMAND readelf -d ${LIB} OUTPUT_VARIABLE dyn RESULT_VARIABLE rc)
if(NOT rc EQUAL 0)
  message(FATAL_ERROR "readelf failed on ${LIB}")
endif()
string(REGEX MATCHALL "\\(NEEDED\\)[^\n]*\\[([^]]+)\\]" needed_lines "${dyn}")
foreach(line IN LISTS needed_lines)
  string(REGEX REPLACE ".*\\[([^]]+)\\].*" "\\1" lib "${line}")
  if(NOT lib MATCHES "^(libc|libm|libstdc\\+\\+|libgcc_s|libdl|libpthread|librt|ld-linux-x86-64|libasan|libubsan|libtsan)\\.so")
    message(FATAL_ERROR "unexpected link-time dependency: ${lib} (dlopen optional libraries instead)")
  endif()
endforeach()
message(STATUS "link-time dependencies OK")
