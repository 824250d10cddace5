#include "profiler_plugin/events.h"

#include <atomic>
#include <cstring>

#include "common/clock.h"
#include "common/measurement_bus.h"
#include "profiler_plugin/context.h"
#include "profiler_plugin/cuda_events.h"
#include "profiler_plugin/nccl_names.h"
#include "profiler_plugin/nccl_net_rails.h"

namespace autopilot::profiler {
namespace {

namespace ev = abi::event;
std::atomic<pid_t> gOwnPid{0};

inline RecordKind kindOf(const void* handle) { return *static_cast<const RecordKind*>(handle); }

// Takes one more reference on a collective, unless it already completed (refs == 0): a child
// that arrives after its parent completed must not resurrect it.
bool tryRetain(CollRecord* coll) {
  int32_t refs = coll->refs.load(std::memory_order_relaxed);
  while (refs > 0) {
    if (coll->refs.compare_exchange_weak(refs, refs + 1, std::memory_order_relaxed)) return true;
  }
  return false;
}

void complete(CollRecord* coll);

// Drops one reference; the last one completes the collective. acq_rel: the completer must see
// every field the other reference holders wrote before their release (channel timers).
void releaseRef(CollRecord* coll) {
  int32_t before = coll->refs.fetch_sub(1, std::memory_order_acq_rel);
  if (before == 1) {
    complete(coll);
  } else if (before <= 0) {
    // A stop without a matching start (or after a reclaim): undo, never go negative.
    coll->refs.fetch_add(1, std::memory_order_relaxed);
    coll->ctx->counters.unbalanced.fetch_add(1, std::memory_order_relaxed);
  }
}

}  // namespace

void publishToBus(ProfilerContext* ctx, const CompletedColl& c) {
  if (!ctx->live.load(std::memory_order_acquire)) return;
  // One clock per communicator for its whole life: the first completed collective decides
  // (GPU when its kernel channels carried timers), and samples timed otherwise are not
  // published, so the tuner never compares a GPU duration with a host one.
  const bus::DurationClock clock =
      c.gpuTimed ? bus::DurationClock::kGpu : bus::DurationClock::kHost;
  if (!ctx->clockRule.admitClock(clock)) {
    ctx->counters.otherClock.fetch_add(1, std::memory_order_relaxed);
    return;
  }
  bus::CollectiveSample s;
  s.commId = ctx->commId;
  s.seqNumber = c.seqNumber;
  s.func = c.func;
  s.algo = c.algo;
  s.proto = c.proto;
  s.nChannels = c.nChannels;
  s.nBytes = c.nBytes;
  s.clock = clock;
  s.durationNs = c.gpuTimed ? c.gpuEndNs - c.gpuStartNs : c.hostEndNs - c.hostStartNs;
  s.completedAtNs = c.hostEndNs;
  if (bus::MeasurementBus::instance().publish(s)) {
    ctx->counters.busPublished.fetch_add(1, std::memory_order_relaxed);
  } else {
    ctx->counters.busRejected.fetch_add(1, std::memory_order_relaxed);
  }
}

namespace {

void complete(CollRecord* coll) {
  ProfilerContext* ctx = coll->ctx;
  CompletedColl c;
  c.seqNumber = coll->seqNumber;
  c.count = coll->count;
  c.nBytes = coll->nBytes;
  c.hostStartNs = coll->hostStartNs.load(std::memory_order_relaxed);
  c.hostEndNs = monotonicNs();
  c.func = coll->func;
  c.algo = coll->algo;
  c.proto = coll->proto;
  c.datatype = coll->datatype;
  c.nChannels = coll->nChannelsDescr;
  c.isSymColl = coll->isSymColl;
  c.userTag = coll->userTag;
  std::memcpy(c.kernelVariant, coll->kernelVariant, sizeof(c.kernelVariant));

  // GPU duration: earliest channel start to latest channel stop. Valid only when every started
  // channel reported both timers in order; otherwise the host duration stands alone.
  uint64_t used = coll->startedChannels.load(std::memory_order_relaxed);
  bool gpuValid = used != 0;
  uint64_t gpuStart = UINT64_MAX, gpuEnd = 0;
  for (uint64_t bits = used; bits != 0; bits &= bits - 1) {
    const ChannelRecord& ch = coll->channels[__builtin_ctzll(bits)];
    if (ch.gpuStartNs == 0 || ch.gpuStopNs < ch.gpuStartNs) gpuValid = false;
    if (ch.gpuStartNs < gpuStart) gpuStart = ch.gpuStartNs;
    if (ch.gpuStopNs > gpuEnd) gpuEnd = ch.gpuStopNs;
  }
  if (gpuValid) {
    c.gpuTimed = 1;
    c.gpuStartNs = gpuStart;
    c.gpuEndNs = gpuEnd;
    // Kernel phases (v7): only phases with both timers in order count.
    for (uint64_t bits = used; bits != 0; bits &= bits - 1) {
      const ChannelRecord& ch = coll->channels[__builtin_ctzll(bits)];
      if (!ch.phased) continue;
      const PhaseRecord* phases = phasesOf(ch);
      for (int p = 0; p < kNumPhases; ++p) {
        const PhaseRecord& ph = phases[p];
        if (ph.gpuStartNs == 0 || ph.gpuStopNs < ph.gpuStartNs) continue;
        (p == 1 ? c.phaseComputeNs : c.phaseSyncNs) += ph.gpuStopNs - ph.gpuStartNs;
      }
    }
  }

  if (ctx->measuresCompletion) {
    publishToBus(ctx, c);
    if (!ctx->completed.push(c))
      ctx->counters.completedQueueFull.fetch_add(1, std::memory_order_relaxed);
  }
  if (ctx->traceSpans && gpuValid) {
    for (uint64_t bits = used; bits != 0; bits &= bits - 1) {
      const ChannelRecord& ch = coll->channels[__builtin_ctzll(bits)];
      TraceSpan span;
      span.kind = TraceSpan::kKernelChannel;
      span.seqNumber = c.seqNumber;
      span.startNs = ch.gpuStartNs;
      span.endNs = ch.gpuStopNs;
      span.anchorHostNs = c.hostEndNs;
      span.anchorGpuNs = gpuEnd;
      span.channelId = ch.channelId;
      span.func = c.func;
      span.userTag = c.userTag;
      if (!ctx->spans.push(span))
        ctx->counters.traceQueueFull.fetch_add(1, std::memory_order_relaxed);
      for (int p = 0; p < (ch.phased ? kNumPhases : 0); ++p) {
        const PhaseRecord& ph = phasesOf(ch)[p];
        if (ph.gpuStartNs == 0 || ph.gpuStopNs < ph.gpuStartNs) continue;
        span.kind = TraceSpan::kKernelPhase;
        span.phaseId = uint8_t(p);
        span.startNs = ph.gpuStartNs;
        span.endNs = ph.gpuStopNs;
        if (!ctx->spans.push(span))
          ctx->counters.traceQueueFull.fetch_add(1, std::memory_order_relaxed);
      }
    }
  }
  ctx->counters.collCompleted.fetch_add(1, std::memory_order_relaxed);
  // Every channel marked started: a kernel-channel event arriving after completion (a late or
  // duplicate one) finds its bit set and is not tracked; Coll start clears the mask.
  coll->startedChannels.store(~uint64_t(0), std::memory_order_relaxed);
  coll->channelsLeft.store(0, std::memory_order_relaxed);
  coll->collStopped.store(0, std::memory_order_relaxed);
  ctx->colls.release(coll);
}

void startColl(ProfilerContext* ctx, void** eHandle, const abi::ProfilerEventDescrV7& d) {
  CollRecord* coll = ctx->colls.acquire();
  if (coll == nullptr) {
    ctx->counters.collPoolFull.fetch_add(1, std::memory_order_relaxed);
    return;
  }
  const auto& cd = d.coll;
  coll->seqNumber = cd.seqNumber;
  coll->count = cd.count;
  coll->func = int8_t(parseFunc(cd.func));
  coll->algo = int8_t(parseAlgo(cd.algo));
  coll->proto = int8_t(parseProto(cd.proto));
  coll->datatype = int8_t(parseDatatype(cd.datatype));
  coll->nBytes = tunerBytes(coll->func, coll->datatype, cd.count, ctx->nRanks);
  coll->nChannelsDescr = cd.nChannels;
  // v7 fields (zero when an older NCCL's descriptor was widened by the adapter).
  coll->isSymColl = cd.isSymColl ? 1 : 0;
  coll->userTag = cd.userTag;
  if (cd.kernelVariant != nullptr) {
    size_t i = 0;
    for (; i + 1 < kVariantChars && cd.kernelVariant[i] != '\0'; ++i) {
      coll->kernelVariant[i] = cd.kernelVariant[i];
    }
    coll->kernelVariant[i] = '\0';
  } else {
    coll->kernelVariant[0] = '\0';
  }
  // NCCL emits one KernelCh event per channel of the collective; their references are taken
  // now because they may all start after NCCL stops the Coll event.
  coll->nChannels =
      ctx->kernelChTimed ? uint8_t(cd.nChannels > kMaxChannels ? kMaxChannels : cd.nChannels) : 0;
  coll->startedChannels.store(0, std::memory_order_relaxed);
  coll->channelStarts.store(0, std::memory_order_relaxed);
  coll->channelsLeft.store(coll->nChannels, std::memory_order_relaxed);
  coll->collStopped.store(0, std::memory_order_relaxed);
  coll->hostStartNs.store(monotonicNs(), std::memory_order_relaxed);
  coll->refs.store(1 + (coll->nChannels > 0 ? 1 : 0), std::memory_order_release);
  ctx->counters.collStarted.fetch_add(1, std::memory_order_relaxed);
  *eHandle = coll;
}

void startKernelCh(ProfilerContext* ctx, void** eHandle, const abi::ProfilerEventDescrV7& d) {
  void* parent = d.parentObj;
  if (parent == nullptr || kindOf(parent) != RecordKind::kColl) return;  // e.g. a P2p kernel
  auto* coll = static_cast<CollRecord*>(parent);
  int channel = d.kernelCh.channelId & (kMaxChannels - 1);
  uint64_t bit = uint64_t(1) << channel;
  // Single writer (the proxy thread): plain load + store, no locked instruction.
  uint64_t before = coll->startedChannels.load(std::memory_order_relaxed);
  if (before & bit) {
    // A second event on one channel would share the channel record, and a completed
    // collective has every bit set: not tracked.
    ctx->counters.untrackedChildren.fetch_add(1, std::memory_order_relaxed);
    return;
  }
  uint32_t starts = coll->channelStarts.load(std::memory_order_relaxed);
  ChannelRecord& ch = coll->channels[channel];
  // The first nChannels events belong to the group whose reference Coll start took; any
  // beyond that (or all of them when the descriptor had no channel count) take their own.
  ch.extra = starts >= coll->nChannels;
  if (ch.extra && !tryRetain(coll)) {
    ctx->counters.untrackedChildren.fetch_add(1, std::memory_order_relaxed);
    return;
  }
  coll->startedChannels.store(before | bit, std::memory_order_relaxed);
  coll->channelStarts.store(starts + 1, std::memory_order_relaxed);
  ch.gpuStartNs = d.kernelCh.pTimer;
  ch.gpuStopNs = 0;
  if (ch.phased) {
    PhaseRecord* phases = phasesOf(ch);
    for (int p = 0; p < kNumPhases; ++p) phases[p].gpuStartNs = phases[p].gpuStopNs = 0;
    ch.phased = 0;
  }
  *eHandle = &ch;
}

// KernelPhase (v7): a child of a KernelCh event; its handle is the phase slot in the channel's
// record, written by the same single thread as the channel.
void startKernelPhase(ProfilerContext* ctx, void** eHandle, const abi::ProfilerEventDescrV7& d) {
  void* parent = d.parentObj;
  uint8_t phase = d.kernelPhase.phaseId;
  if (parent == nullptr || kindOf(parent) != RecordKind::kKernelCh || phase >= kNumPhases) {
    ctx->counters.untrackedChildren.fetch_add(1, std::memory_order_relaxed);
    return;
  }
  auto* ch = static_cast<ChannelRecord*>(parent);
  PhaseRecord& ph = phasesOf(*ch)[phase];
  ph.phaseId = phase;
  ph.channel = ch;
  ph.gpuStartNs = d.kernelPhase.pTimer;
  ph.gpuStopNs = 0;
  ch->phased = 1;
  ctx->counters.phases.fetch_add(1, std::memory_order_relaxed);
  *eHandle = &ph;
}

// CeColl (v6+): the start event brackets NCCL's enqueue of the copies; a CUDA event recorded
// on the stream here, and one at stop, time the copies themselves.
void startCe(ProfilerContext* ctx, void** eHandle, const abi::ProfilerEventDescrV7& d) {
  CeRecord* ce = ctx->ces.acquire();
  if (ce == nullptr) {
    ctx->counters.cePoolFull.fetch_add(1, std::memory_order_relaxed);
    return;
  }
  const auto& cd = d.ceColl;
  ce->func = int8_t(parseFunc(cd.func));
  ce->datatype = int8_t(parseDatatype(cd.datatype));
  ce->seqNumber = cd.seqNumber;
  ce->count = cd.count;
  ce->nBytes = tunerBytes(ce->func, ce->datatype, cd.count, ctx->nRanks);
  ce->userTag = cd.userTag;
  ce->stream = cd.stream;
  ce->pending.store(0, std::memory_order_relaxed);
  ce->hostStartNs = monotonicNs();
  ce->hostStopNs = 0;
  ce->timed = 0;
  if (ctx->ceCudaTimed) {
    // First use of this slot: its two events are created once and kept (see CeRecord).
    if (ce->startEvent == nullptr) ce->startEvent = cuda::createEvent();
    if (ce->stopEvent == nullptr) ce->stopEvent = cuda::createEvent();
    ce->timed = cuda::record(ce->startEvent, ce->stream) ? 1 : 0;
  }
  ctx->counters.ceStarted.fetch_add(1, std::memory_order_relaxed);
  *eHandle = ce;
}

void stopCe(CeRecord* ce) {
  ce->hostStopNs = monotonicNs();
  if (ce->timed && !cuda::record(ce->stopEvent, ce->stream)) ce->timed = 0;
  // Handed to the service thread, which completes it (pollCopyEngine).
  ce->pending.store(1, std::memory_order_release);
}

void stopKernelCh(ChannelRecord* ch) {
  CollRecord* coll = ch->owner;
  if (ch->extra) return releaseRef(coll);
  uint32_t left = coll->channelsLeft.load(std::memory_order_relaxed);
  if (left == 0) {  // more stops than starts: a late or repeated stop
    coll->ctx->counters.unbalanced.fetch_add(1, std::memory_order_relaxed);
    return;
  }
  coll->channelsLeft.store(left - 1, std::memory_order_relaxed);
  if (left == 1) releaseRef(coll);  // the group's reference
}

void startProxyOp(ProfilerContext* ctx, void** eHandle, const abi::ProfilerEventDescrV7& d) {
  ProxyOpRecord* op = ctx->proxyOps.acquire();
  if (op == nullptr) {
    ctx->counters.childPoolFull.fetch_add(1, std::memory_order_relaxed);
    return;
  }
  op->owner = nullptr;
  void* parent = d.parentObj;
  // Under PXN the op may come from another process: its parent handle is not ours.
  if (parent != nullptr && d.proxyOp.pid == gOwnPid.load(std::memory_order_relaxed) &&
      kindOf(parent) == RecordKind::kColl) {
    auto* coll = static_cast<CollRecord*>(parent);
    if (tryRetain(coll)) op->owner = coll;
  }
  if (op->owner == nullptr) ctx->counters.untrackedChildren.fetch_add(1, std::memory_order_relaxed);
  op->seqNumber = op->owner ? op->owner->seqNumber : 0;
  op->peer = d.proxyOp.peer;
  op->nSteps = d.proxyOp.nSteps;
  op->chunkSize = d.proxyOp.chunkSize;
  op->channelId = d.proxyOp.channelId;
  op->isSend = d.proxyOp.isSend ? 1 : 0;
  op->hostStartNs = monotonicNs();
  *eHandle = op;
}

void stopProxyOp(ProxyOpRecord* op) {
  ProfilerContext* ctx = op->ctx;
  CollRecord* owner = op->owner;
  if (ctx->traceSpans) {
    TraceSpan span;
    span.kind = TraceSpan::kProxyOp;
    span.seqNumber = op->seqNumber;
    span.startNs = op->hostStartNs;
    span.endNs = monotonicNs();
    span.peer = op->peer;
    span.channelId = op->channelId;
    span.isSend = op->isSend;
    span.func = owner ? owner->func : -1;
    if (!ctx->spans.push(span))
      ctx->counters.traceQueueFull.fetch_add(1, std::memory_order_relaxed);
  }
  op->owner = nullptr;
  ctx->proxyOps.release(op);
  if (owner != nullptr) releaseRef(owner);
}

// NCCL's own net plugins describe each transfer with a versioned payload that may live on the
// caller's stack: decode and copy it now.
void startNet(ProfilerContext* ctx, void** eHandle, const abi::ProfilerEventDescrV7& d) {
  const void* data = d.netPlugin.data;
  int64_t id = d.netPlugin.id;
  if (data == nullptr || (id & abi::net_event::kVersionMask) != 1) return;
  int rail = -1;
  bool isSend = false;
  uint64_t length = 0;
  int64_t type = id & abi::net_event::kTypeMask;
  if (type == abi::net_event::kTypeIb) {
    abi::ProfilerNetIbDescrV1 ib;
    std::memcpy(&ib, data, sizeof(ib));
    if (ib.type != 1) return;
    rail = ncclIbRail(ib.qp.device);
    // ibv_wr_opcode: RDMA_WRITE 0, RDMA_WRITE_WITH_IMM 1, SEND 2 carry our data out; the
    // others (receives, RDMA_READ flushes) count as received.
    isSend = ib.qp.opcode >= 0 && ib.qp.opcode <= 2;
    length = ib.qp.length;
  } else if (type == abi::net_event::kTypeSocket) {
    abi::ProfilerNetSockDescrV1 sock;
    std::memcpy(&sock, data, sizeof(sock));
    if (sock.type != 1) return;
    rail = ncclSocketRail(sock.sock.fd);
    isSend = sock.sock.op == 0;  // NCCL_SOCKET_SEND
    length = sock.sock.length;
  } else {
    return;  // another net plugin's private format
  }
  if (rail < 0) return;
  NetRecord* rec = ctx->nets.acquire();
  if (rec == nullptr) {
    ctx->counters.childPoolFull.fetch_add(1, std::memory_order_relaxed);
    return;
  }
  rec->rail = rail;
  rec->isSend = isSend ? 1 : 0;
  rec->length = length;
  rec->hostStartNs = monotonicNs();
  *eHandle = rec;
}

// Releasing a pool slot only clears its inUse flag (FixedPool::release), so a net record needs
// no pointer back to its context's pool.
void stopNet(NetRecord* rec) {
  accountNcclNetTransfer(rec->rail, rec->isSend != 0, rec->length,
                         monotonicNs() - rec->hostStartNs);
  rec->inUse.store(0, std::memory_order_release);
}

}  // namespace

void setOwnPid(pid_t pid) noexcept { gOwnPid.store(pid, std::memory_order_relaxed); }

void onStartEvent(ProfilerContext* ctx, void** eHandle, const abi::ProfilerEventDescrV7& d) {
  *eHandle = nullptr;
  if (ctx == nullptr || !ctx->live.load(std::memory_order_relaxed)) return;
  switch (d.type) {
    case ev::kColl:
      return startColl(ctx, eHandle, d);
    case ev::kKernelCh:
      return startKernelCh(ctx, eHandle, d);
    case ev::kProxyOp:
      return startProxyOp(ctx, eHandle, d);
    case ev::kNetPlugin:
      return startNet(ctx, eHandle, d);
    case ev::kKernelPhase:
      return startKernelPhase(ctx, eHandle, d);
    case ev::kCeColl:
      return startCe(ctx, eHandle, d);
    default:
      // GroupApi, CollApi, P2pApi, KernelLaunch, Group, P2p, ProxyStep, ProxyCtrl, CeSync,
      // CeBatch and any type a newer NCCL adds: NCCL starts some of them as ancestors or
      // children of what we asked for; they carry nothing we measure.
      return;
  }
}

void onStopEvent(void* eHandle) {
  if (eHandle == nullptr) return;
  switch (kindOf(eHandle)) {
    case RecordKind::kColl: {
      auto* coll = static_cast<CollRecord*>(eHandle);
      // Only "enqueued": completion is the last child's stop (or this, if it is the last ref).
      if (coll->collStopped.exchange(1, std::memory_order_relaxed) != 0) return;  // twice
      releaseRef(coll);
      return;
    }
    case RecordKind::kKernelCh:
      return stopKernelCh(static_cast<ChannelRecord*>(eHandle));
    case RecordKind::kProxyOp:
      return stopProxyOp(static_cast<ProxyOpRecord*>(eHandle));
    case RecordKind::kNet:
      return stopNet(static_cast<NetRecord*>(eHandle));
    case RecordKind::kKernelPhase:
      return;  // its stop time came with state 31
    case RecordKind::kCe: {
      auto* ce = static_cast<CeRecord*>(eHandle);
      if (ce->pending.load(std::memory_order_relaxed) == 0) stopCe(ce);
      return;
    }
  }
}

void onRecordEventState(void* eHandle, int state, const abi::ProfilerEventStateArgsV5* args) {
  if (eHandle == nullptr || args == nullptr) return;
  if (state == abi::state::kKernelChStop && kindOf(eHandle) == RecordKind::kKernelCh) {
    static_cast<ChannelRecord*>(eHandle)->gpuStopNs = args->kernelCh.pTimer;
  } else if (state == abi::state::kKernelPhaseStop && kindOf(eHandle) == RecordKind::kKernelPhase) {
    static_cast<PhaseRecord*>(eHandle)->gpuStopNs = args->kernelCh.pTimer;
  }
  // Every other state, including values beyond kMaxKnown a newer NCCL may send: ignored.
}

size_t pollCopyEngine(ProfilerContext* ctx, uint64_t nowNs, uint64_t staleNs) {
  size_t done = 0;
  for (size_t i = 0; i < ctx->ces.capacity(); ++i) {
    CeRecord& ce = ctx->ces.at(i);
    if (ce.inUse.load(std::memory_order_acquire) == 0 ||
        ce.pending.load(std::memory_order_acquire) == 0) {
      continue;
    }
    uint64_t gpuNs = 0;
    bool timed = false;
    if (ce.timed) {
      int q = cuda::query(ce.stopEvent);
      if (q == 0 && nowNs < ce.hostStopNs + staleNs) continue;  // still copying
      timed = q == 1 && cuda::elapsedNs(ce.startEvent, ce.stopEvent, &gpuNs);
    }
    CompletedColl c;
    c.engine = kCopyEngine;
    c.seqNumber = ce.seqNumber;
    c.count = ce.count;
    c.nBytes = ce.nBytes;
    c.func = ce.func;
    c.datatype = ce.datatype;
    c.userTag = ce.userTag;
    c.hostStartNs = ce.hostStartNs;
    c.hostEndNs = timed ? nowNs : ce.hostStopNs;
    if (timed) {
      // A GPU-measured duration without GPU timestamps: placed to end at its stop event.
      c.gpuTimed = 1;
      c.gpuStartNs = 1;
      c.gpuEndNs = 1 + gpuNs;
      ctx->counters.ceTimed.fetch_add(1, std::memory_order_relaxed);
      // Like a kernel collective's Coll+KernelCh duration: onto the bus for the tuner. A
      // copy-engine collective has no algorithm or protocol (-1), so it never counts as a
      // kernel arm's measurement; and it never decides the communicator's clock alone.
      if (ctx->clockRule.clock() >= 0) publishToBus(ctx, c);
    } else {
      ctx->counters.ceUntimed.fetch_add(1, std::memory_order_relaxed);
    }
    if (!ctx->completed.push(c))
      ctx->counters.completedQueueFull.fetch_add(1, std::memory_order_relaxed);
    ce.pending.store(0, std::memory_order_relaxed);
    ctx->ces.release(&ce);
    ++done;
  }
  return done;
}

size_t reclaimStale(ProfilerContext* ctx, uint64_t nowNs, uint64_t staleNs) {
  size_t reclaimed = 0;
  for (size_t i = 0; i < ctx->colls.capacity(); ++i) {
    CollRecord& c = ctx->colls.at(i);
    if (c.inUse.load(std::memory_order_acquire) == 0 ||
        c.collStopped.load(std::memory_order_relaxed) == 0 ||
        nowNs < c.hostStartNs.load(std::memory_order_relaxed) + staleNs) {
      continue;
    }
    int32_t refs = c.refs.load(std::memory_order_relaxed);
    if (refs > 0 && c.refs.compare_exchange_strong(refs, 0, std::memory_order_acq_rel)) {
      c.startedChannels.store(~uint64_t(0), std::memory_order_relaxed);
      c.channelsLeft.store(0, std::memory_order_relaxed);
      c.collStopped.store(0, std::memory_order_relaxed);
      ctx->colls.release(&c);
      ++reclaimed;
    }
  }
  if (reclaimed) ctx->counters.reclaimed.fetch_add(reclaimed, std::memory_order_relaxed);
  return reclaimed;
}

}  // namespace autopilot::profiler
