#include "net_plugin/core/comm_config.h"

#include <algorithm>

#include "common/clock.h"
#include "common/params.h"

namespace autopilot::net::core {

namespace {

params::StringParam gStriping(
    "NCCL_AUTOPILOT_NET_STRIPING", "measured",
    "How chunks are spread over rails: 'measured' (earliest predicted completion from measured "
    "bandwidth) or 'equal' (rotation, what NCCL and aws-ofi-nccl do; a baseline).",
    {"measured", "equal"});
params::IntParam gChunkBytes("NCCL_AUTOPILOT_NET_CHUNK_BYTES", 1 << 20, 64 << 10, 64 << 20,
                             "Largest chunk a message is cut into (the unit of striping, "
                             "acknowledgement and re-sending).",
                             params::IntSyntax::kSize);
params::IntParam gMinChunkBytes("NCCL_AUTOPILOT_NET_MIN_CHUNK_BYTES", 64 << 10, 4 << 10, 16 << 20,
                                "Smallest chunk; messages under twice this size travel whole on "
                                "one rail.",
                                params::IntSyntax::kSize);
params::IntParam gRailWindow("NCCL_AUTOPILOT_NET_RAIL_WINDOW", 4 << 20, 256 << 10, 256 << 20,
                             "Bytes a rail may hold unacknowledged before chunks wait for it.",
                             params::IntSyntax::kSize);
params::IntParam gStallMs("NCCL_AUTOPILOT_NET_STALL_TIMEOUT_MS", 100, 10, 60000,
                          "A rail holding data with no progress for this long (plus the time "
                          "its queued bytes need at its measured rate; over TCP at least the "
                          "socket's retransmission timeout, up to 300 ms, plus half of this) is "
                          "declared failed.");
params::IntParam gPeerStallMs("NCCL_AUTOPILOT_NET_PEER_STALL_MS", 1000, 10, 60000,
                              "When every rail holding data stalls at once (the peer paused, not "
                              "a link), rails are declared failed only after this long.");
params::IntParam gLatenessCapMs("NCCL_AUTOPILOT_NET_LATENESS_CAP_MS", 1000, 0, 60000,
                                "Most that this process's own lateness (its longest recent gap "
                                "between progress passes, times 4) adds to a rail's silence "
                                "allowance on a loaded host; 0 turns the stretch off.");
params::BoolParam gFailover("NCCL_AUTOPILOT_NET_FAILOVER", true,
                            "0 turns failure detection and failover off (a baseline for "
                            "benchmarks): a silent link stalls the connection, a socket error on "
                            "any rail fails it, as a transport without failover would.");
params::IntParam gFailbackMinMs("NCCL_AUTOPILOT_NET_FAILBACK_MIN_MS", 50, 1, 60000,
                                "First re-connection attempt of a failed rail after this long; "
                                "doubles per failed attempt.");
params::IntParam gFailbackMaxMs("NCCL_AUTOPILOT_NET_FAILBACK_MAX_MS", 2000, 10, 3600000,
                                "Longest wait between re-connection attempts (they never stop).");
params::IntParam gPeerTimeoutMs("NCCL_AUTOPILOT_NET_PEER_TIMEOUT_MS", 2000, 100, 3600000,
                                "With no rail left for this long, requests fail (NCCL gets an "
                                "error only then).");
params::IntParam gConnectTimeoutMs("NCCL_AUTOPILOT_NET_CONNECT_TIMEOUT_MS", 30000, 100, 3600000,
                                   "connect() gives up on a peer that does not answer after "
                                   "this long.");
params::IntParam gMaxRecvs("NCCL_AUTOPILOT_NET_MAX_RECVS", 8, 1, 8,
                           "maxRecvs reported to NCCL: buffers one grouped receive may carry.");
params::DoubleParam gDegradedRatio("NCCL_AUTOPILOT_NET_DEGRADED_RATIO", 0.5, 0.01, 0.95,
                                   "A rail persistently below this fraction of its peers' median "
                                   "bandwidth is reported degraded.");
params::DoubleParam gEqualBand("NCCL_AUTOPILOT_NET_EQUAL_BAND", 0.5, 0.0, 0.9,
                               "Rails whose measured bandwidth is within this fraction of the "
                               "median count as equal when striping (an equal share each).");
params::DoubleParam gLateCopy(
    "NCCL_AUTOPILOT_NET_LATE_COPY", 2.0, 0.0, 1000.0,
    "A chunk that takes, or by its rail's current estimate will take, more than this many "
    "times what its rail was expected to need for it when it was placed (and over 30 ms) is "
    "sent again on the rail that delivers it first, where that saves time; the receiver keeps "
    "the copy that lands first. 0 turns late copies off. TCP only.");

params::BoolParam gProbeCopy(
    "NCCL_AUTOPILOT_NET_PROBE_COPY", true,
    "A rail measured below a quarter of its peers' rate is probed (and checked for a heal) with "
    "copies of chunks that also travel on another rail (the receiver keeps the first to land), "
    "so that no message waits for the measurement. 0: the chunk itself goes to the slow rail, "
    "as to any other probed rail. TCP only.");

CommConfig load() {
  CommConfig c;
  c.striper.policy =
      gStriping.get() == "equal" ? StripingPolicy::kEqualSplit : StripingPolicy::kMeasured;
  c.striper.windowBytes = uint64_t(gRailWindow.get());
  c.chunks.maxChunkBytes = uint64_t(gChunkBytes.get());
  c.chunks.minChunkBytes = uint64_t(gMinChunkBytes.get());
  c.chunks.wholeBelowBytes = 2 * c.chunks.minChunkBytes;
  c.striper.measureMinBytes = c.chunks.minChunkBytes;
  c.health.failure.stallTimeoutNs = uint64_t(gStallMs.get()) * 1'000'000;
  c.health.peerStallNs = uint64_t(gPeerStallMs.get()) * 1'000'000;
  c.health.failure.latenessCapNs = uint64_t(gLatenessCapMs.get()) * 1'000'000;
  c.health.failback.initialBackoffNs = uint64_t(gFailbackMinMs.get()) * 1'000'000;
  c.health.failback.maxBackoffNs = uint64_t(gFailbackMaxMs.get()) * 1'000'000;
  c.health.degradation.degradeBelow = gDegradedRatio.get();
  c.striper.equalBand = gEqualBand.get();
  c.striper.probePhaseNs = realtimeMinusMonotonicNs();
  c.health.degradation.recoverAbove = std::min(0.99, gDegradedRatio.get() * 1.4);
  c.peerTimeoutNs = uint64_t(gPeerTimeoutMs.get()) * 1'000'000;
  c.failover = gFailover.get();
  c.lateCopyFactor = gLateCopy.get();
  c.probeCopies = gProbeCopy.get();
  c.connectTimeoutNs = uint64_t(gConnectTimeoutMs.get()) * 1'000'000;
  c.maxRecvs = int(gMaxRecvs.get());
  return c;
}

}  // namespace

const CommConfig& commConfig() {
  static const CommConfig config = load();
  return config;
}

}  // namespace autopilot::net::core
