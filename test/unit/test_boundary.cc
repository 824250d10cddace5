// Nothing escapes the C ABI: exceptions become ncclResult_t values, and the never-fail wrapper
// used by getCollInfo and the profiler callbacks always reports success.
#include <catch2/catch.hpp>
#include <stdexcept>

#include "common/boundary.h"

using namespace autopilot;

TEST_CASE("guarded maps exceptions to result codes", "[boundary]") {
  CHECK(guarded("t", 0, [] { return abi::kSuccess; }) == abi::kSuccess);
  CHECK(guarded("t", 0, [] { return abi::kRemoteError; }) == abi::kRemoteError);
  CHECK(guarded("t", 0, []() -> abi::Result { throw std::bad_alloc(); }) == abi::kSystemError);
  CHECK(guarded("t", 0, []() -> abi::Result { throw std::runtime_error("x"); }) ==
        abi::kInternalError);
  CHECK(guarded("t", 0, []() -> abi::Result { throw 42; }) == abi::kInternalError);
}

TEST_CASE("guardedNeverFail swallows everything", "[boundary]") {
  int calls = 0;
  CHECK(guardedNeverFail("t", 0, [&] { ++calls; }) == abi::kSuccess);
  CHECK(guardedNeverFail("t", 0, [&] {
          ++calls;
          throw std::logic_error("boom");
        }) == abi::kSuccess);
  CHECK(calls == 2);
}
