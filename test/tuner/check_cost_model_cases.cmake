# Regenerates the cost-model cases from the Python reference (an independent re-implementation of
# NCCL's cost model beside the checkout; docs/nccl-cost-model.md) and compares them with the
# checked-in copy that tuner_unit_tests reads.
execute_process(COMMAND ${PYTHON} ${GEN} ${REF} OUTPUT_VARIABLE generated RESULT_VARIABLE rc)
if(NOT rc EQUAL 0)
  message(FATAL_ERROR "gen_cost_model_cases.py failed")
endif()
file(READ ${EXPECTED} expected)
if(NOT generated STREQUAL expected)
  message(FATAL_ERROR "test/tuner/cost_model_cases.txt is stale: regenerate it with\n"
                      "  python3 test/tuner/gen_cost_model_cases.py ../shared/docs/nccl_cost_model.py"
                      " > test/tuner/cost_model_cases.txt")
endif()
