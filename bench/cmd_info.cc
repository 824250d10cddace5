// `autopilot info`: load the library through the plugin-host harness, exactly as NCCL would,
// and print what NCCL would see: which file and versioned symbol each plugin resolves to,
// whether the three share one instance, the net devices, and every parameter with its source
// (taken from what the library itself logged at init).
#include <cctype>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <optional>
#include <string>

#include "autopilot_version.h"
#include "bench/cli_args.h"
#include "bench/commands.h"
#include "common/host/log_capture.h"
#include "common/host/plugin_host.h"

namespace autopilot::cli {
namespace {

using host::LogCapture;
using host::PluginKind;

std::string describeEnv(PluginKind kind, std::string* value) {
  const char* env = std::getenv(host::kindEnvVar(kind));
  if (env != nullptr) {
    *value = env;
    return std::string(host::kindEnvVar(kind)) + "=" + env;
  }
  *value = "autopilot";
  return std::string(host::kindEnvVar(kind)) + " unset: using 'autopilot'";
}

// The "instance 0x..." a plugin's init logged (every init names the loaded copy it runs in).
std::string instanceOf(const std::string& needle) {
  for (const auto& r : LogCapture::records()) {
    if (r.message.find(needle) == std::string::npos) continue;
    size_t at = r.message.find("instance 0x");
    if (at == std::string::npos) continue;
    size_t begin = at + 9, end = begin + 2;
    while (end < r.message.size() && std::isxdigit(static_cast<unsigned char>(r.message[end]))) {
      ++end;
    }
    return r.message.substr(begin, end - begin);
  }
  return "?";
}

// The ABI layout a symbol version implies, in a few words (what differs between versions).
const char* layoutOf(PluginKind kind, int version) {
  switch (kind) {
    case PluginKind::kNet:
      return version >= 12   ? "22 functions; properties 128 B (vProps 8 devices, railId, planeId)"
             : version == 11 ? "22 functions, per-comm init/finalize; properties 112 B (vProps 4)"
             : version >= 9  ? "20 functions, init once per process; properties 104 B"
                             : "19 functions, int sizes; properties 64 B";
    case PluginKind::kTuner:
      return version >= 7   ? "getCollInfo + getChunkSize; constants 1272 B (5 GPU generations)"
             : version == 6 ? "getCollInfo + getChunkSize; constants 1152 B"
             : version == 5 ? "getCollInfo; constants 1152 B"
                            : "getCollInfo; no constants, no communicator id";
    case PluginKind::kProfiler:
      return version >= 7   ? "descriptor 136 B: userTag, kernelVariant, CE and kernel-phase events"
             : version == 6 ? "descriptor 112 B: + copy-engine events (CeColl/CeSync/CeBatch)"
             : version == 5 ? "descriptor 112 B: API-level events"
                            : "descriptor 104 B: no API-level events";
  }
  return "";
}

int cmdInfo(int argc, char** argv) {
  std::string nccl;
  cli::Args args(
      "autopilot info",
      "Loads libnccl-*-autopilot.so the way NCCL does (NCCL_NET_PLUGIN, NCCL_TUNER_PLUGIN,\n"
      "NCCL_PROFILER_PLUGIN; 'autopilot' where unset), runs one communicator's plugin\n"
      "init/finalize and prints what NCCL would see. NCCL_DEBUG=INFO echoes the log.");
  args.addChecked(
          "--nccl", nccl,
          [](const std::string& text) -> std::string {
            if (host::findNcclRelease(text) != nullptr) return "";
            return "unknown NCCL release '" + text + "' (2.19 .. 2.32)";
          },
          "reproduce that NCCL release's loader (2.19 .. 2.32; default the newest): which "
          "symbol and layout it would pick for each plugin")
      .typeName("X.Y");
  if (std::optional<int> rc = args.parse(argc, argv)) return *rc;
  LogCapture::configureEchoFromEnv();
  std::string netName, tunerName, profilerName;
  std::string netEnv = describeEnv(PluginKind::kNet, &netName);
  std::string tunerEnv = describeEnv(PluginKind::kTuner, &tunerName);
  std::string profilerEnv = describeEnv(PluginKind::kProfiler, &profilerName);

  host::PluginHost::Options options;
  options.nccl = nccl;
  options.netPlugin = netName;
  options.tunerPlugin = tunerName;
  options.profilerPlugin = profilerName;
  host::PluginHost pluginHost(options);
  bool haveNet = pluginHost.loadNet();
  bool haveProfiler = pluginHost.loadProfiler();
  bool haveTuner = pluginHost.loadTuner();

  const host::NcclRelease& release = pluginHost.release();
  std::printf("nccl-autopilot %s: plugins as NCCL %s would load them\n\n", AUTOPILOT_VERSION_STRING,
              release.label().c_str());
  auto show = [&](PluginKind kind, const std::string& env, bool ok, const char* name, int version,
                  const host::OpenedLibrary* lib, const std::vector<int>& order) {
    std::printf("%-9s %s\n", host::kindName(kind), env.c_str());
    std::string tried;
    for (int v : order) tried += (tried.empty() ? "" : ", ") + host::pluginSymbol(int(kind), v);
    std::printf("          NCCL %s looks for %s\n", release.label().c_str(),
                tried.empty() ? "nothing (no plugins of this kind)" : tried.c_str());
    if (!ok) {
      std::printf("          not loaded: NCCL would run without this plugin\n");
      return;
    }
    std::printf("          file    %s%s\n", lib->path.c_str(),
                lib->viaNetLibrary ? " (via the net plugin library)" : "");
    std::printf("          symbol  %s, name \"%s\"\n",
                host::pluginSymbol(int(kind), version).c_str(), name);
    std::printf("          layout  %s\n", layoutOf(kind, version));
  };
  show(PluginKind::kNet, netEnv, haveNet, haveNet ? pluginHost.net()->name() : "",
       haveNet ? pluginHost.net()->version() : 0, haveNet ? &pluginHost.net()->library() : nullptr,
       release.net);
  show(PluginKind::kTuner, tunerEnv, haveTuner, haveTuner ? pluginHost.tuner()->name() : "",
       haveTuner ? pluginHost.tuner()->version() : 0,
       haveTuner ? &pluginHost.tuner()->library() : nullptr, release.tuner);
  show(PluginKind::kProfiler, profilerEnv, haveProfiler,
       haveProfiler ? pluginHost.profiler()->name() : "",
       haveProfiler ? pluginHost.profiler()->version() : 0,
       haveProfiler ? &pluginHost.profiler()->library() : nullptr, release.profiler);
  // Failed first attempts are normal (NCCL tries NAME, then libnccl-<kind>-NAME.so); show them
  // only when a plugin did not load at all.
  if (!haveNet || !haveTuner || !haveProfiler) {
    for (const std::string& d : pluginHost.diagnostics()) std::printf("  note: %s\n", d.c_str());
  }

  // One communicator's lifecycle, in NCCL's order, to see what each plugin reports.
  host::CommSession::Config config;
  config.commId = 0xa17a17a17ull;
  config.nRanks = 2;
  config.nNodes = 2;
  config.name = "autopilot-info";
  host::CommSession session(pluginHost, config);
  abi::Result r = session.init();
  std::printf("\ncommunicator probe (commId 0x%llx, %d ranks, %d nodes): %s\n",
              static_cast<unsigned long long>(config.commId), config.nRanks, config.nNodes,
              r == abi::kSuccess ? "init ok" : "tuner init FAILED (NCCL would abort)");
  if (haveNet) {
    if (session.netUsable()) {
      std::printf("  net: %d device(s)\n", session.netDevices());
      for (int d = 0; d < session.netDevices(); ++d) {
        abi::NetPropertiesV11 p;
        if (pluginHost.net()->getProperties(d, &p) != abi::kSuccess) continue;
        std::printf(
            "    dev %d: %s  %d Mbps  latency %.1f us  maxComms %d  maxRecvs %d  "
            "ptrSupport 0x%x%s\n",
            d, p.name ? p.name : "?", p.speed, p.latency, p.maxComms, p.maxRecvs, p.ptrSupport,
            p.vProps.ndevs > 1 ? "  (virtual)" : "");
      }
    } else {
      std::printf("  net: no devices: NCCL would fall back to its internal IB/Socket transports\n");
    }
  }
  if (haveProfiler) {
    std::printf("  profiler: %s, activation mask 0x%x\n",
                session.profilerContext() ? "context created" : "no context",
                *pluginHost.activationMask());
  }
  if (haveTuner) std::printf("  tuner: context %s\n", session.tunerContext() ? "created" : "NULL");

  std::string ids[3] = {instanceOf("net v"), instanceOf("tuner v"), instanceOf("profiler v")};
  bool loaded[3] = {haveNet, haveTuner, haveProfiler};
  std::string first;
  bool same = true;
  int count = 0;
  for (int i = 0; i < 3; ++i) {
    if (!loaded[i] || ids[i] == "?") continue;
    ++count;
    if (first.empty()) first = ids[i];
    same = same && ids[i] == first;
  }
  if (count > 1) {
    std::printf("  shared instance: %s (%s)\n", same ? "yes" : "NO", first.c_str());
  }
  session.finalize();

  std::printf("\nparameters (as logged by the library at init):\n");
  for (const auto& rec : LogCapture::records()) {
    const std::string& m = rec.message;
    size_t at = m.find("NCCL_AUTOPILOT_");
    if (at == std::string::npos) continue;
    std::printf("  %s%s\n", rec.level == abi::kLogWarn ? "WARN " : "", m.substr(at).c_str());
  }
  pluginHost.unloadAll();
  return (haveNet || haveTuner || haveProfiler) ? 0 : 1;
}

}  // namespace

CommandRegistrar registerInfo("info", cmdInfo,
                              "load the plugins through the harness and show what NCCL would see");

}  // namespace autopilot::cli
