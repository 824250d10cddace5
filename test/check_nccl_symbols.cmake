# The equivalent of NCCL's own plugin check (plugins/mixed/example/test.sh in NVIDIA/nccl: the
# plugin must export the net and tuner symbol the NCCL tree declares as its native one), for
# every release from 2.28 to 2.32 and for the profiler too; then, for each release we claim,
# which symbol its loader would take (it tries its versions newest first). Reads only
# `nm -D` of the library, independently of the harness's table (common/host/nccl_releases.cc).
cmake_minimum_required(VERSION 3.25)
execute_process(COMMAND nm -D --defined-only ${LIB} OUTPUT_VARIABLE out RESULT_VARIABLE rc)
if(NOT rc EQUAL 0)
  message(FATAL_ERROR "nm failed on ${LIB}")
endif()
string(REGEX MATCHALL "nccl(NetPlugin|TunerPlugin|Profiler)_v[0-9]+" exported "${out}")

# release | net versions | tuner versions | profiler versions (newest first; "-": none)
set(releases
  "2.20|8,7,6,5|1|-"
  "2.21|8,7,6,5|2|-"
  "2.22|8,7,6,5|3,2|-"
  "2.23|8,7,6,5|3,2|1"
  "2.24|9,8,7,6,5|4,3,2|2,1"
  "2.25|9,8,7,6,5|4,3,2|2,1"
  "2.26|10,9,8,7,6|4,3,2|3,2,1"
  "2.27|10,9,8,7,6|4,3,2|4,3,2,1"
  "2.28|11,10,9,8,7,6|5,4,3,2|5,4,3,2,1"
  "2.29|11,10,9,8,7,6|5,4,3,2|6,5,4,3,2,1"
  "2.30|12,11,10,9,8,7,6|6,5,4,3,2|6,5,4,3,2,1"
  "2.31|12,11,10,9,8,7,6|6,5,4,3,2|7,6,5,4,3,2,1"
  "2.32|12,11,10,9,8,7,6|7,6,5,4,3,2|7,6,5,4,3,2,1")
# What README claims: the first release of each kind that finds one of our symbols.
set(claim_net 2.20)
set(claim_tuner 2.22)
set(claim_profiler 2.27)

set(failed "")
foreach(entry IN LISTS releases)
  string(REPLACE "|" ";" fields "${entry}")
  list(GET fields 0 release)
  set(line "NCCL ${release}:")
  set(i 1)
  foreach(kind net tuner profiler)
    list(GET fields ${i} versions)
    math(EXPR i "${i} + 1")
    if(kind STREQUAL "net")
      set(prefix ncclNetPlugin_v)
    elseif(kind STREQUAL "tuner")
      set(prefix ncclTunerPlugin_v)
    else()
      set(prefix ncclProfiler_v)
    endif()
    set(picked "")
    set(native "")
    if(NOT versions STREQUAL "-")
      string(REPLACE "," ";" versions "${versions}")
      list(GET versions 0 newest)
      set(native ${prefix}${newest})
      foreach(v IN LISTS versions)
        if("${prefix}${v}" IN_LIST exported)
          set(picked ${prefix}${v})
          break()
        endif()
      endforeach()
    endif()
    if(picked)
      string(APPEND line " ${kind}=${picked}")
    else()
      string(APPEND line " ${kind}=(none)")
    endif()
    # NCCL's own check, from 2.28 on: the native symbol is there.
    if(release VERSION_GREATER_EQUAL 2.28 AND NOT native IN_LIST exported)
      list(APPEND failed "NCCL ${release} expects ${native} [FAIL]")
    endif()
    # Our claims: every release from the claimed one on finds a symbol, none before it does
    # (a symbol for an older release would contradict README).
    if(release VERSION_GREATER_EQUAL ${claim_${kind}} AND NOT picked)
      list(APPEND failed "NCCL ${release} finds no ${kind} symbol, README claims it loads")
    endif()
    if(release VERSION_LESS ${claim_${kind}} AND picked)
      list(APPEND failed "NCCL ${release} finds ${picked}, README claims ${kind} from ${claim_${kind}}")
    endif()
  endforeach()
  message(STATUS "${line}")
endforeach()
if(failed)
  string(REPLACE ";" "\n  " failed "${failed}")
  message(FATAL_ERROR "NCCL symbol check:\n  ${failed}")
endif()
message(STATUS "NCCL symbol check: 2.28-2.32 find their native symbols [SUCCESS]")
