// `autopilot info` prints what NCCL would see, including parameters and their sources.
#include <catch2/catch.hpp>

#include "test/host/host_test_util.h"

using autopilot::test::binDir;
using autopilot::test::runCommand;

TEST_CASE("autopilot info shows the three plugins as one instance", "[cli]") {
  int status = -1;
  std::string out = runCommand(
      "env -u NCCL_NET_PLUGIN -u NCCL_TUNER_PLUGIN -u "
      "NCCL_PROFILER_PLUGIN " +
          binDir() + "/autopilot info 2>&1",
      &status);
  INFO(out);
  CHECK(status == 0);
  CHECK(out.find("symbol  ncclNetPlugin_v12") != std::string::npos);
  CHECK(out.find("symbol  ncclTunerPlugin_v7") != std::string::npos);
  CHECK(out.find("symbol  ncclProfiler_v7") != std::string::npos);
  CHECK(out.find("libnccl-net-autopilot.so") != std::string::npos);
  CHECK(out.find("shared instance: yes") != std::string::npos);
  CHECK(out.find("NCCL_AUTOPILOT_NET_ENABLE=1 (default)") != std::string::npos);
}

TEST_CASE("autopilot info reports a rejected parameter value and still succeeds", "[cli]") {
  int status = -1;
  std::string out = runCommand(
      "NCCL_AUTOPILOT_PROFILER_ENABLE=perhaps " + binDir() + "/autopilot info 2>&1", &status);
  INFO(out);
  CHECK(status == 0);
  CHECK(out.find("WARN NCCL_AUTOPILOT_PROFILER_ENABLE='perhaps' ignored") != std::string::npos);
}

TEST_CASE("autopilot info --nccl shows the symbol and layout an older NCCL would pick", "[cli]") {
  int status = -1;
  std::string out = runCommand(
      "env -u NCCL_NET_PLUGIN -u NCCL_TUNER_PLUGIN -u "
      "NCCL_PROFILER_PLUGIN " +
          binDir() + "/autopilot info --nccl 2.31 2>&1",
      &status);
  INFO(out);
  CHECK(status == 0);
  CHECK(out.find("as NCCL 2.31 would load them") != std::string::npos);
  CHECK(out.find("symbol  ncclNetPlugin_v12") != std::string::npos);
  CHECK(out.find("symbol  ncclTunerPlugin_v6") != std::string::npos);  // v7 is 2.32's
  CHECK(out.find("symbol  ncclProfiler_v7") != std::string::npos);
  CHECK(out.find("layout  getCollInfo + getChunkSize; constants 1152 B") != std::string::npos);
  CHECK(out.find("NCCL 2.31 looks for ncclTunerPlugin_v6, ncclTunerPlugin_v5") !=
        std::string::npos);

  out = runCommand(binDir() + "/autopilot info --nccl 2.22 2>&1", &status);
  CHECK(status == 0);
  CHECK(out.find("NCCL 2.22 looks for nothing (no plugins of this kind)") != std::string::npos);
  CHECK(out.find("symbol  ncclTunerPlugin_v3") != std::string::npos);

  runCommand(binDir() + "/autopilot info --nccl 1.0 2>&1", &status);
  CHECK(status == 2);
}
