// The typed parameter registry: strict parsing, defaults on bad input, sources, freezing.
#include <catch2/catch.hpp>
#include <cstdlib>
#include <string>

#include "common/params.h"

using namespace autopilot::params;

namespace {
BoolParam tBool("NCCL_AUTOPILOT_TEST_BOOL", true, "test bool");
IntParam tInt("NCCL_AUTOPILOT_TEST_INT", 5, 1, 100, "test int");
IntParam tSize("NCCL_AUTOPILOT_TEST_SIZE", 1 << 20, 0, int64_t(1) << 40, "test size",
               IntSyntax::kSize);
IntParam tMask("NCCL_AUTOPILOT_TEST_MASK", 66, 0, 1 << 20, "test mask", IntSyntax::kMask);
DoubleParam tDouble("NCCL_AUTOPILOT_TEST_DOUBLE", 0.5, 0.0, 1.0, "test double");
StringParam tString("NCCL_AUTOPILOT_TEST_STRING", "alpha", "test enum", {"alpha", "beta"});
StringParam tFree("NCCL_AUTOPILOT_TEST_FREE", "", "test free text");

template <typename P>
void withEnv(P& p, const char* value) {
  if (value) {
    setenv(p.name(), value, 1);
  } else {
    unsetenv(p.name());
  }
  p.resetForTesting();
}
}  // namespace

TEST_CASE("unset parameters take their defaults", "[params]") {
  withEnv(tInt, nullptr);
  CHECK(tInt.get() == 5);
  CHECK(tInt.source() == Source::kDefault);
}

TEST_CASE("integers parse strictly", "[params]") {
  withEnv(tInt, "42");
  CHECK(tInt.get() == 42);
  CHECK(tInt.source() == Source::kEnvironment);
  for (const char* bad :
       {"", "abc", "42x", "4 2", "101", "0", "-3", "1e3", "99999999999999999999"}) {
    withEnv(tInt, bad);
    INFO("value '" << bad << "'");
    CHECK(tInt.get() == 5);
    CHECK(tInt.source() == Source::kInvalid);
    CHECK_FALSE(tInt.rejection().empty());
  }
  withEnv(tInt, " 7 ");
  CHECK(tInt.get() == 7);
  // Decimal only: a leading zero is not octal, and hexadecimal is refused.
  withEnv(tInt, "0100");
  CHECK(tInt.get() == 100);
  for (const char* bad : {"0x10", "+7", "010e1", "- 7"}) {
    withEnv(tInt, bad);
    INFO("value '" << bad << "'");
    CHECK(tInt.get() == 5);
    CHECK(tInt.source() == Source::kInvalid);
  }
  withEnv(tInt, nullptr);
}

TEST_CASE("masks accept decimal and explicit 0x hexadecimal", "[params]") {
  withEnv(tMask, "0x82");
  CHECK(tMask.get() == 0x82);
  withEnv(tMask, "0X10");
  CHECK(tMask.get() == 16);
  withEnv(tMask, "0100");
  CHECK(tMask.get() == 100);
  withEnv(tMask, "0x");
  CHECK(tMask.get() == 66);
  CHECK(tMask.source() == Source::kInvalid);
  withEnv(tMask, "0xg1");
  CHECK(tMask.get() == 66);
  withEnv(tMask, nullptr);
}

TEST_CASE("sizes accept K/M/G/T suffixes and reject overflow", "[params]") {
  withEnv(tSize, "4K");
  CHECK(tSize.get() == 4096);
  withEnv(tSize, "2m");
  CHECK(tSize.get() == 2 << 20);
  withEnv(tSize, "1T");
  CHECK(tSize.get() == int64_t(1) << 40);
  withEnv(tSize, "2T");  // above the maximum
  CHECK(tSize.get() == 1 << 20);
  withEnv(tSize, "9223372036854775807G");
  CHECK(tSize.source() == Source::kInvalid);
  withEnv(tSize, "4KB");
  CHECK(tSize.source() == Source::kInvalid);
  withEnv(tSize, nullptr);
}

TEST_CASE("booleans accept the usual spellings only", "[params]") {
  for (const char* t : {"1", "true", "TRUE", "yes", "on"}) {
    withEnv(tBool, t);
    CHECK(tBool.get());
  }
  for (const char* f : {"0", "false", "No", "off"}) {
    withEnv(tBool, f);
    CHECK_FALSE(tBool.get());
    CHECK(tBool.source() == Source::kEnvironment);
  }
  withEnv(tBool, "2");
  CHECK(tBool.get());
  CHECK(tBool.source() == Source::kInvalid);
  withEnv(tBool, nullptr);
}

TEST_CASE("doubles must be finite and in range", "[params]") {
  withEnv(tDouble, "0.25");
  CHECK(tDouble.get() == 0.25);
  for (const char* bad : {"nan", "inf", "1.5", "-0.1", "0.3x", ""}) {
    withEnv(tDouble, bad);
    CHECK(tDouble.get() == 0.5);
    CHECK(tDouble.source() == Source::kInvalid);
  }
  withEnv(tDouble, nullptr);
}

TEST_CASE("enumerated strings match case-insensitively", "[params]") {
  withEnv(tString, "BETA");
  CHECK(tString.get() == "beta");
  withEnv(tString, "gamma");
  CHECK(tString.get() == "alpha");
  CHECK(tString.source() == Source::kInvalid);
  withEnv(tFree, "anything goes");
  CHECK(tFree.get() == "anything goes");
  withEnv(tString, nullptr);
  withEnv(tFree, nullptr);
}

TEST_CASE("values are frozen after the first read", "[params]") {
  withEnv(tInt, "9");
  CHECK(tInt.get() == 9);
  setenv(tInt.name(), "11", 1);
  CHECK(tInt.get() == 9);
  withEnv(tInt, nullptr);
}

TEST_CASE("the registry lists every declared parameter and renders a table", "[params]") {
  CHECK(find("NCCL_AUTOPILOT_TEST_INT") == &tInt);
  CHECK(find("NCCL_AUTOPILOT_NET_ENABLE") != nullptr);
  CHECK(find("NCCL_AUTOPILOT_TUNER_ENABLE") != nullptr);
  CHECK(find("NCCL_AUTOPILOT_PROFILER_ENABLE") != nullptr);
  std::string table = markdownTable();
  CHECK(table.find("| `NCCL_AUTOPILOT_TEST_SIZE` | size | `1048576` |") != std::string::npos);
  for (ParamBase* p : all()) {
    INFO(p->name());
    CHECK(std::string(p->name()).rfind("NCCL_AUTOPILOT_", 0) == 0);
    CHECK(std::string(p->doc()).size() > 5);
  }
}
