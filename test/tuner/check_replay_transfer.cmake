# `autopilot replay --train A --score B` (here the small synthetic file as both): corrections are
# learned on A, seed B's prior, and the three rows are printed.
execute_process(COMMAND ${TOOL} replay --train ${CSV} --score ${CSV} --flat --runs 2
                OUTPUT_VARIABLE out RESULT_VARIABLE rc)
message("${out}")
if(NOT rc EQUAL 0)
  message(FATAL_ERROR "autopilot replay --train/--score failed (exit ${rc})")
endif()
foreach(expected "train (A)" "score (B) alone" "score (B) seeded by A")
  string(FIND "${out}" "${expected}" at)
  if(at LESS 0)
    message(FATAL_ERROR "expected '${expected}' in the replay output")
  endif()
endforeach()
if(NOT out MATCHES "([1-9][0-9]*) corrections learned on A; ([1-9][0-9]*) arms of B seeded")
  message(FATAL_ERROR "no correction learned on A or none applied to B")
endif()
