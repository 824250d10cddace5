// The tuner plugin: per-communicator assembly of the hot path (tuner_comm.h), the consensus
// (coordinator.h), the leader's learner (learner.h), persistence (tuning_store.h) and the
// service thread (tuner_service.h), plus every NCCL_AUTOPILOT_TUNER_* parameter.
//
// When the tuner leaves NCCL's table untouched for a whole communicator:
//  - NCCL_AUTOPILOT_TUNER_ENABLE=0;
//  - tuner ABI v3/v4 (NCCL before 2.27): no communicator id, so no way to agree across ranks;
//  - NCCL_ALGO or NCCL_PROTO set on any rank (the user decided; that rank vetoes learning);
//  - no rendezvous (ranks on several nodes, and neither NCCL_AUTOPILOT_COORDINATOR nor
//    MASTER_ADDR), or not every rank joined within the join timeout.
// Channel counts (NCCL_AUTOPILOT_TUNER_CHANNELS): only lowered, to half what NCCL runs a cell
// with in the context, agreed like the cell (decision.h, learner.h). Chunk sizes
// (NCCL_AUTOPILOT_TUNER_CHUNK, tuner v6+ only, off by default): half NCCL's, the same way.
// And per call: sizes below NCCL_AUTOPILOT_TUNER_MIN_BYTES (an opt-in floor, default 0: the
// policy itself probes a context only where a probe pays for itself), and contexts not learned
// yet.
// regBuff is never used: it can differ per rank. CUDA graph capture cannot be seen by a tuner:
// a captured call bakes in the decision in force at capture, which is the same on every rank
// (it is a pure function of the agreed table); NCCL_AUTOPILOT_TUNER_EXPLORE=0 keeps probes out
// of captured graphs altogether (with a tuning file from an eager run, learned choices still
// apply).
#include "tuner_plugin/tuner.h"

#include <sys/stat.h>
#include <unistd.h>

#include <atomic>
#include <cstdlib>
#include <fstream>
#include <memory>
#include <optional>
#include <sstream>

#include "common/comm_registry.h"
#include "common/event_journal.h"
#include "common/instance.h"
#include "common/log.h"
#include "common/measurement_bus.h"
#include "common/params.h"
#include "common/safe_file.h"
#include "tuner_plugin/coordinator.h"
#include "tuner_plugin/learner.h"
#include "tuner_plugin/synthetic_measurements.h"
#include "tuner_plugin/tuner_comm.h"
#include "tuner_plugin/tuner_service.h"
#include "tuner_plugin/tuning_store.h"

namespace autopilot::tuner {
namespace {

params::BoolParam gTunerEnable(
    "NCCL_AUTOPILOT_TUNER_ENABLE", true,
    "Tuner plugin on/off. 0 leaves every NCCL cost table untouched (NCCL's own choice).");
params::BoolParam gExplore(
    "NCCL_AUTOPILOT_TUNER_EXPLORE", true,
    "Probe alternative algorithm/protocol cells. 0: only exploit what is known (measured or "
    "loaded from the tuning file), e.g. for jobs that capture CUDA graphs.");
params::BoolParam gChannels(
    "NCCL_AUTOPILOT_TUNER_CHANNELS", true,
    "Also learn where a cell runs faster at half the channel count NCCL runs it with (the "
    "count is agreed across ranks like the cell; it is only ever lowered, never for CollNet). "
    "0: NCCL's channel counts always.");
params::BoolParam gChunk(
    "NCCL_AUTOPILOT_TUNER_CHUNK", false,
    "Also learn where a ring or tree cell (LL128, Simple) runs faster at half the chunk size "
    "NCCL computes for it (tuner v6+, NCCL 2.30+; agreed across ranks like the cell; never "
    "below 64 KiB). Off by default until checked against a real NCCL on GPUs.");
params::IntParam gMinBytes(
    "NCCL_AUTOPILOT_TUNER_MIN_BYTES", 0, 0, int64_t(1) << 50,
    "Smallest collective (nBytes as NCCL passes it) the tuner learns on; smaller ones keep "
    "NCCL's choice. 0: every size (probes are gated by their expected gain).",
    params::IntSyntax::kSize);
params::DoubleParam gMinGain(
    "NCCL_AUTOPILOT_TUNER_MIN_GAIN", 0.02, 0.0, 0.5,
    "Smallest relative gain for which the tuner switches away from a choice or probes an arm.");
params::DoubleParam gProbeBudget(
    "NCCL_AUTOPILOT_TUNER_PROBE_BUDGET", 0.01, 0.0, 0.5,
    "Most extra time probes may cost, as a fraction of the time measured in collectives.");
params::IntParam gProbeWindowMs(
    "NCCL_AUTOPILOT_TUNER_PROBE_WINDOW_MS", 60000, 0, 3600000,
    "Longest stretch of time measured in collectives whose unspent probe budget may be saved "
    "up (a shift notice re-opens many contexts at once). 0: the whole job.");
params::IntParam gSwapLead(
    "NCCL_AUTOPILOT_TUNER_SWAP_LEAD", 2, 1, 1 << 20,
    "Calls between a policy change on the leader and its effect on every rank, at least (the "
    "lead spans NCCL_AUTOPILOT_TUNER_SWAP_LEAD_MS at the measured call rate; 64 calls before "
    "that rate is known; it grows when a rank is ahead).");
params::IntParam gSwapLeadMs(
    "NCCL_AUTOPILOT_TUNER_SWAP_LEAD_MS", 100, 0, 60000,
    "Time between a policy change on the leader and its effect on every rank, counted in calls "
    "at the communicator's measured call rate. 0: the lead is NCCL_AUTOPILOT_TUNER_SWAP_LEAD "
    "calls.");
params::IntParam gUpdateMs(
    "NCCL_AUTOPILOT_TUNER_UPDATE_MS", 5, 1, 60000,
    "How often the leader folds new measurements into its policy and proposes changes.");
params::IntParam gSyncTimeoutMs(
    "NCCL_AUTOPILOT_TUNER_SYNC_TIMEOUT_MS", 10000, 10, 3600000,
    "Longest a rank waits at an agreed switch point for the verdict before it keeps its table "
    "and freezes.");
params::IntParam gJoinTimeoutMs(
    "NCCL_AUTOPILOT_TUNER_JOIN_TIMEOUT_MS", 120000, 10, 86400000,
    "How long the ranks of a communicator may take to meet; after it, learning stays off.");
params::IntParam gPeerTimeoutMs(
    "NCCL_AUTOPILOT_TUNER_PEER_TIMEOUT_MS", 30000, 10, 86400000,
    "Silence after which a rank's control channel counts as cut (the communicator freezes).");
params::StringParam gTuningFile(
    "NCCL_AUTOPILOT_TUNING_FILE", "",
    "Learned results: loaded by the leader at init, saved by it at finalize (per topology, NCCL "
    "version and (nRanks, nNodes)).");
params::StringParam gSynthetic(
    "NCCL_AUTOPILOT_TUNER_SYNTHETIC", "",
    "Test hook: invent measurements from the cost table (seed=N,noise=S,scale=CELL:F/...). "
    "Never in production.");

constexpr unsigned long kFlags = abi::subsys::kInit | abi::subsys::kTuning;
constexpr uint64_t kFollowerDrainNs = 10'000'000;  // the bus ring holds 1024 samples

unsigned long long ull(uint64_t v) { return static_cast<unsigned long long>(v); }

bool envSet(const char* name) {
  const char* v = std::getenv(name);
  return v != nullptr && v[0] != '\0';
}

// One communicator: everything the plugin keeps for it.
class TunerRuntime final : public ServiceClient {
 public:
  TunerRuntime(const TunerInitArgs& args, int rank,
               std::unique_ptr<SyntheticMeasurements> synthetic, const CoordinatorConfig& cc,
               const PolicyConfig& pc)
      : commId_(args.commId),
        synthetic_(std::move(synthetic)),
        comm_(args.commId, uint64_t(gMinBytes.get()), uint64_t(gSyncTimeoutMs.get()) * 1000000,
              synthetic_.get()),
        coordinator_(&comm_, cc),
        learner_(&comm_, pc, gChannels.get(), gChunk.get() && args.abiVersion >= 6),
        updateNs_(uint64_t(gUpdateMs.get()) * 1000000),
        rank_(rank) {
    key_.abiVersion = args.abiVersion;
    key_.nRanks = int(args.nRanks);
    key_.nNodes = int(args.nNodes);
    if (args.nvlDomain != nullptr) key_.nvlDomain = *args.nvlDomain;
    if (args.constants != nullptr) {
      key_.haveConstants = true;
      key_.constants = *args.constants;
    }
  }

  TunerComm& comm() { return comm_; }

  void loadTuningFile() {
    const std::string& path = gTuningFile.get();
    if (path.empty() || rank_ > 0) return;  // only a potential leader's file matters
    std::vector<BanditPolicy::ContextRecord> records;
    std::vector<OtherScale> others;
    std::string why;
    const bool own = tuner::loadTuningFile(path, key_, &records, &why, &others);
    for (const OtherScale& o : others) {
      size_t n = learner_.addOtherScale(o.records);
      if (n > 0) {
        AP_INFO(kFlags,
                "tuner: comm 0x%llx: %zu contexts learned at nRanks %d nNodes %d (%s) seed the "
                "priors of this scale's new contexts (exploration only)",
                ull(commId_), n, o.nRanks, o.nNodes, path.c_str());
      }
    }
    if (own) {
      learner_.restore(records, 4);
      AP_INFO(kFlags, "tuner: comm 0x%llx: loaded %zu learned contexts from %s", ull(commId_),
              records.size(), path.c_str());
    } else if (!others.empty()) {
      AP_INFO(kFlags, "tuner: comm 0x%llx: no results of this scale in %s", ull(commId_),
              path.c_str());
    } else if (access(path.c_str(), F_OK) == 0) {
      AP_WARN(kFlags, "tuner: comm 0x%llx: tuning file ignored: %s", ull(commId_), why.c_str());
    }
  }

  void saveTuningFile() {
    const std::string& path = gTuningFile.get();
    if (path.empty() || coordinator_.role() != Coordinator::Role::kLeader) return;
    std::vector<BanditPolicy::ContextRecord> records = learner_.snapshot();
    if (records.empty()) return;
    std::string why;
    if (tuner::saveTuningFile(path, key_, records, &why)) {
      AP_INFO(kFlags, "tuner: comm 0x%llx: saved %zu learned contexts to %s", ull(commId_),
              records.size(), path.c_str());
    } else {
      AP_WARN(kFlags, "tuner: comm 0x%llx: %s", ull(commId_), why.c_str());
    }
  }

  void logSummary() {
    TunerComm::SwapStats s = comm_.swapStats();
    const Coordinator::Stats& c = coordinator_.stats();
    const Learner::Stats& l = learner_.stats();
    const bus::MeasurementMatcher::Stats& m = learner_.matchStats();
    const TunerComm::ChunkStats chunks = comm_.chunkStats();
    AP_INFO(
        kFlags,
        "tuner: comm 0x%llx rank %d: %s; policy v%u in effect (%llu applied, %llu dropped); "
        "hot swap (proposal to effect here) mean %.1f us max %.1f us; %llu waits at a switch "
        "point, %llu timeouts; leader: %llu proposals, %llu commits, %llu aborts (%llu refused "
        "by a rank still short of the previous switch point); %llu "
        "strangers rejected; %llu measurements, %llu attributed (%llu past a repeated question; "
        "not: %llu in aggregates, "
        "%llu realigned, %llu without a recorded call, %llu other clock, %llu unusable); %llu "
        "saved contexts used, %llu discarded, %llu seeded from another scale; %llu cells "
        "offered at half their channels (%llu samples ran another cell); %llu cells offered at "
        "half their chunk size (%llu tasks halved, %llu already at the smallest chunk); %llu "
        "contexts re-opened (%llu change points reported by the profiler)",
        ull(commId_), rank_, coordinator_.describe().c_str(), comm_.appliedVersion(),
        ull(s.applied), ull(s.dropped),
        s.applied ? double(s.latencySumNs) / s.applied / 1000.0 : 0.0,
        double(s.latencyMaxNs) / 1000.0, ull(s.waits), ull(s.timeouts), ull(c.proposals),
        ull(c.commits), ull(c.aborts), ull(c.busyRefusals), ull(c.strangersRejected),
        ull(l.samples), ull(l.attributed), ull(m.repeatsSkipped), ull(m.aggregateParts),
        ull(m.realigned), ull(m.notRecorded + m.noCall), ull(m.otherClock), ull(m.badSample),
        ull(l.restoredUsed), ull(l.restoredDiscarded), ull(l.seededFromOtherScale),
        ull(l.halvedArms), ull(l.otherCell), ull(l.halfChunkArms), ull(chunks.halved),
        ull(chunks.kept), ull(learner_.policy().reopenCount()), ull(l.shifts));
  }

  // ServiceClient, on the service thread.
  void collectFds(std::vector<pollfd>* fds) override { coordinator_.collectFds(fds); }
  void handleEvents(const pollfd* fds, size_t count, uint64_t nowNs) override {
    coordinator_.handleEvents(fds, count, nowNs);
  }
  uint64_t step(uint64_t nowNs) override {
    coordinator_.tick(nowNs);
    uint64_t next = coordinator_.nextDeadline();
    if (coordinator_.role() != Coordinator::Role::kLeader ||
        coordinator_.phase() == Coordinator::Phase::kOff ||
        coordinator_.phase() == Coordinator::Phase::kFrozen) {
      // Only the leader learns; elsewhere the profiler's samples are consumed and dropped so
      // that its bus ring never fills (it would count every later sample as rejected).
      bus::CollectiveSample discard[64];
      while (bus::MeasurementBus::instance().drain(commId_, discard, 64) == 64) {
      }
      return std::min(next, nowNs + kFollowerDrainNs);
    }
    if (nowNs >= nextLearnNs_) {
      nextLearnNs_ = nowNs + updateNs_;
      learner_.step();
      if (coordinator_.canPropose() && !(learner_.desired() == coordinator_.committed())) {
        if (coordinator_.propose(learner_.desired(), nowNs)) noteExploitChanges();
      }
    }
    return std::min(next, nextLearnNs_);
  }

 private:
  // Journal the exploited choices a proposal changes (rare), not the probes (frequent).
  void noteExploitChanges() {
    const DecisionTable& d = learner_.desired();
    for (int ctx = 0; ctx < kNumContexts; ++ctx) {
      if (d.entries[ctx].primary != lastPrimary_.entries[ctx].primary) {
        journal::EventJournal::instance().record(
            journal::Source::kTuner, commId_, -1, "tuner_choice",
            "func %d size 2^%d pipe bucket %d: arm %d -> %d, channels %d -> %d (proposed; "
            "arm = cell, + %d at fewer channels, + %d at half the chunk size)",
            contextFunc(ctx), contextSizeBucket(ctx), contextPipeBucket(ctx),
            lastPrimary_.entries[ctx].primary, d.entries[ctx].primary,
            lastPrimary_.entries[ctx].primaryChannels, d.entries[ctx].primaryChannels, kNumCells,
            2 * kNumCells);
      }
    }
    lastPrimary_ = d;
  }

  const uint64_t commId_;
  std::unique_ptr<SyntheticMeasurements> synthetic_;
  TunerComm comm_;
  Coordinator coordinator_;
  Learner learner_;
  const uint64_t updateNs_;
  const int rank_;
  TuningKey key_;
  uint64_t nextLearnNs_ = 0;
  DecisionTable lastPrimary_;
};

struct TunerContext {
  pid_t ownerPid = getpid();  // a forked child's copy is its parent's communicator
  int abiVersion = 5;
  uint64_t commId = 0;
  bool busAttached = false;
  std::unique_ptr<TunerRuntime> runtime;  // null: NCCL's choices for every call
};

// Builds the runtime; returns null (with the reason logged) when this communicator keeps NCCL's
// choices throughout.
std::unique_ptr<TunerRuntime> makeRuntime(const TunerInitArgs& args) {
  if (!gTunerEnable.get()) return nullptr;
  if (!args.hasCommId) {
    AP_INFO(kFlags,
            "tuner v%d: NCCL does not pass a communicator id before tuner v5, so ranks "
            "cannot agree on learned choices; NCCL's choices stand",
            args.abiVersion);
    return nullptr;
  }
  comms::CommInfo info;
  int rank = comms::lookup(args.commId, &info) ? info.rank : -1;
  bool userAlgoProto = envSet("NCCL_ALGO") || envSet("NCCL_PROTO");

  CoordinatorConfig cc;
  cc.commId = args.commId;
  cc.nRanks = int(args.nRanks);
  cc.nNodes = int(args.nNodes);
  cc.rank = rank;
  cc.userAlgoProto = userAlgoProto;
  std::string why;
  cc.endpoint = resolveEndpoint(args.commId, int(args.nNodes), &why);
  if (cc.endpoint.kind == Endpoint::Kind::kNone) {
    // Loading the tuner and getting no learning is worth one warning per process (on rank 0, or
    // wherever the rank is unknown): at NCCL's default level an INFO line is never seen, and a
    // job launched by mpirun without MASTER_ADDR would just keep NCCL's choices.
    static std::atomic<bool> warned{false};
    const bool warn = rank <= 0 && !warned.exchange(true);
    log::emit(warn ? abi::kLogWarn : abi::kLogInfo, kFlags, __func__, __LINE__,
              "tuner: comm 0x%llx: %s; NCCL's choices stand%s", ull(args.commId), why.c_str(),
              warn ? " (NCCL_AUTOPILOT_COORDINATOR=host:port names where the ranks meet; "
                     "README: Using it with NCCL)"
                   : "");
    return nullptr;
  }
  std::optional<std::string> secret = readRendezvousSecret();
  if (!secret) return nullptr;  // warned once in readSecret
  // A Unix socket sits in a private directory (mode 0700): only a TCP rendezvous, what a job
  // spanning nodes uses, is reachable by others.
  if (secret->empty() && cc.endpoint.kind == Endpoint::Kind::kTcp) {
    noteUnauthenticatedRendezvous(rank, cc.endpoint);
  }
  cc.key = wire::jobKey(args.commId, int(args.nRanks), int(args.nNodes), *secret);
  const uint64_t ms = 1000000;
  // The leader gives up on a proposal before any rank stops waiting for its verdict.
  cc.ackTimeoutNs = uint64_t(gSyncTimeoutMs.get()) * ms / 2;
  cc.joinTimeoutNs = uint64_t(gJoinTimeoutMs.get()) * ms;
  cc.peerTimeoutNs = uint64_t(gPeerTimeoutMs.get()) * ms;
  cc.minLead = uint64_t(gSwapLead.get());
  cc.leadNs = uint64_t(gSwapLeadMs.get()) * ms;

  PolicyConfig pc;
  pc.minGain = gMinGain.get();
  pc.explore = gExplore.get();
  pc.probeBudget = gProbeBudget.get();
  pc.probeWindowUs = double(gProbeWindowMs.get()) * 1e3;

  std::unique_ptr<SyntheticMeasurements> synthetic;
  if (!gSynthetic.get().empty()) {
    std::string err;
    synthetic =
        SyntheticMeasurements::fromSpec(gSynthetic.get(), rank >= 0 ? rank : getpid(), &err);
    if (synthetic == nullptr) {
      AP_WARN(kFlags, "tuner: NCCL_AUTOPILOT_TUNER_SYNTHETIC ignored: %s", err.c_str());
    } else {
      AP_WARN(kFlags,
              "tuner: comm 0x%llx: NCCL_AUTOPILOT_TUNER_SYNTHETIC is set: measurements "
              "are INVENTED (test hook)",
              ull(args.commId));
    }
  }
  auto runtime = std::make_unique<TunerRuntime>(args, rank, std::move(synthetic), cc, pc);
  runtime->loadTuningFile();
  if (!TunerService::add(runtime.get())) {
    AP_WARN(kFlags, "tuner: cannot start the tuner service thread; NCCL's choices stand");
    return nullptr;
  }
  return runtime;
}

}  // namespace

abi::Result init(void** ctx, const TunerInitArgs& args) {
  *ctx = nullptr;
  params::logAllOnce();
  auto context = std::make_unique<TunerContext>();
  context->abiVersion = args.abiVersion;
  context->commId = args.commId;
  if (args.hasCommId) context->busAttached = bus::MeasurementBus::instance().attach(args.commId);
  context->runtime = makeRuntime(args);
  AP_INFO(kFlags, "tuner v%d ready: comm 0x%llx nRanks %zu nNodes %zu%s (instance 0x%llx)",
          args.abiVersion, ull(args.commId), args.nRanks, args.nNodes,
          !gTunerEnable.get() ? ", disabled by NCCL_AUTOPILOT_TUNER_ENABLE=0"
          : context->runtime  ? ""
                              : ", NCCL's choices stand",
          ull(instanceId()));
  *ctx = context.release();
  contextCreated();
  return abi::kSuccess;
}

void getCollInfo(void* ctx, int collType, size_t nBytes, int numPipeOps, float** costTable,
                 int numAlgo, int numProto, int regBuff, int* nChannels) {
  (void)regBuff;  // may differ per rank: never part of a decision
  TunerRuntime* runtime = static_cast<TunerContext*>(ctx)->runtime.get();
  if (runtime == nullptr) return;
  runtime->comm().getCollInfo(collType, nBytes, numPipeOps, costTable, numAlgo, numProto,
                              nChannels);
}

void getChunkSize(void* ctx, int collType, size_t nBytes, int algo, int proto, int nChannels,
                  size_t* chunkSize) {
  (void)nBytes;     // a channel part's bytes, not the task's (TunerComm::getChunkSize)
  (void)nChannels;  // 1 for such a part
  if (ctx == nullptr || chunkSize == nullptr) return;
  TunerRuntime* runtime = static_cast<TunerContext*>(ctx)->runtime.get();
  if (runtime == nullptr) return;  // NCCL's chunk size stands
  runtime->comm().getChunkSize(collType, algo, proto, chunkSize);
}

abi::Result finalize(void* ctx) {
  if (ctx == nullptr) return abi::kSuccess;
  std::unique_ptr<TunerContext> context(static_cast<TunerContext*>(ctx));
  if (context->ownerPid != getpid()) {
    // A forked child finalizing what it inherited: the rendezvous sockets and the socket file
    // are its parent's, still in use there. Nothing is closed, unlinked or saved; the child's
    // copy of the memory is simply not reclaimed.
    (void)context->runtime.release();
    (void)context.release();
    return abi::kSuccess;
  }
  if (context->runtime) {
    TunerService::remove(context->runtime.get());
    context->runtime->saveTuningFile();
    context->runtime->logSummary();
    context->runtime.reset();
  }
  if (context->busAttached) bus::MeasurementBus::instance().detach(context->commId);
  context.reset();
  contextDestroyed();
  return abi::kSuccess;
}

}  // namespace autopilot::tuner
