# `autopilot replay` on a small synthetic file with forced channel counts: a row whose system ends
# with "; channels forced to N" is its own arm of the same context, the policy finds it when it
# is the best, and rows naming an invalid count (0, above 64, not a number) are skipped.
execute_process(COMMAND ${TOOL} replay ${CSV} --flat --per-context --runs 3
                OUTPUT_VARIABLE out RESULT_VARIABLE rc)
message("${out}")
if(NOT rc EQUAL 0)
  message(FATAL_ERROR "autopilot replay failed (exit ${rc})")
endif()
foreach(expected "arms 4 " "best Ring/Simple/8ch" "learned Ring/Simple/8ch" "3 rows and 0 contexts skipped")
  string(FIND "${out}" "${expected}" at)
  if(at LESS 0)
    message(FATAL_ERROR "expected '${expected}' in the replay output")
  endif()
endforeach()
