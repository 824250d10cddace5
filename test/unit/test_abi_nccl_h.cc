// Enum values we share with NCCL's public header, checked against the installed nccl.h when
// the build found one.
#include <catch2/catch.hpp>

#include "common/abi/nccl_abi.h"

#ifdef AUTOPILOT_HAVE_NCCL_H
#include <nccl.h>

TEST_CASE("ncclResult_t values match the installed nccl.h", "[abi][nccl.h]") {
  using namespace autopilot::abi;
  CHECK(int(kSuccess) == int(ncclSuccess));
  CHECK(int(kUnhandledCudaError) == int(ncclUnhandledCudaError));
  CHECK(int(kSystemError) == int(ncclSystemError));
  CHECK(int(kInternalError) == int(ncclInternalError));
  CHECK(int(kInvalidArgument) == int(ncclInvalidArgument));
  CHECK(int(kInvalidUsage) == int(ncclInvalidUsage));
  CHECK(int(kRemoteError) == int(ncclRemoteError));
  CHECK(int(kInProgress) == int(ncclInProgress));
  CHECK(int(kNumResults) == int(ncclNumResults));
  CHECK(sizeof(Result) == sizeof(ncclResult_t));
  INFO("installed nccl.h is " << NCCL_MAJOR << "." << NCCL_MINOR << "." << NCCL_PATCH);
  CHECK(NCCL_VERSION_CODE >= 22000);
}
#else
TEST_CASE("ncclResult_t values match the installed nccl.h", "[abi][nccl.h]") {
  WARN("skipped: no nccl.h found at configure time (set NCCL_HOME to enable this check)");
  SUCCEED();
}
#endif
