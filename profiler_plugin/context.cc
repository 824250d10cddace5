#include "profiler_plugin/context.h"

#include "profiler_plugin/service.h"

namespace autopilot::profiler {

ProfilerContext::ProfilerContext(size_t collPool, size_t childPool, size_t queueCapacity)
    : colls(collPool),
      phaseBlocks(collPool),
      proxyOps(childPool),
      nets(childPool),
      ces(kCePool),
      completed(queueCapacity),
      spans(queueCapacity * 4) {
  for (size_t i = 0; i < colls.capacity(); ++i) {
    CollRecord& c = colls.at(i);
    c.ctx = this;
    c.phases = phaseBlocks.at(i).phases;
    for (int ch = 0; ch < kMaxChannels; ++ch) {
      c.channels[ch].owner = &c;
      c.channels[ch].channelId = uint8_t(ch);
    }
  }
  for (size_t i = 0; i < proxyOps.capacity(); ++i) proxyOps.at(i).ctx = this;
}

ProfilerContext::~ProfilerContext() = default;

void ProfilerContext::resetForReuse() {
  for (size_t i = 0; i < colls.capacity(); ++i) {
    CollRecord& c = colls.at(i);
    c.refs.store(0, std::memory_order_relaxed);
    c.collStopped.store(0, std::memory_order_relaxed);
    c.startedChannels.store(~uint64_t(0), std::memory_order_relaxed);
    c.inUse.store(0, std::memory_order_release);
  }
  for (size_t i = 0; i < proxyOps.capacity(); ++i) proxyOps.release(&proxyOps.at(i));
  for (size_t i = 0; i < nets.capacity(); ++i) nets.release(&nets.at(i));
  for (size_t i = 0; i < ces.capacity(); ++i) {
    ces.at(i).pending.store(0, std::memory_order_relaxed);
    ces.release(&ces.at(i));
  }
  CompletedColl c;
  while (completed.pop(&c)) {
  }
  TraceSpan s;
  while (spans.pop(&s)) {
  }
  for (std::atomic<uint64_t>* counter :
       {&counters.collStarted, &counters.collCompleted, &counters.collPoolFull,
        &counters.childPoolFull, &counters.completedQueueFull, &counters.traceQueueFull,
        &counters.busPublished, &counters.busRejected, &counters.otherClock, &counters.reclaimed,
        &counters.unbalanced, &counters.untrackedChildren, &counters.ceStarted, &counters.ceTimed,
        &counters.ceUntimed, &counters.cePoolFull, &counters.phases}) {
    counter->store(0, std::memory_order_relaxed);
  }
  clockRule.reset();
  state.reset();
}

ContextRegistry& ContextRegistry::instance() {
  static ContextRegistry registry;
  return registry;
}

ProfilerContext* ContextRegistry::acquire(size_t collPool, size_t childPool, size_t queueCapacity) {
  std::lock_guard<std::mutex> lock(mu_);
  // Capacities are fixed per load of the library (parameters are frozen), so a retired
  // context normally fits; the check matters only when tests change them.
  for (auto it = retired_.begin(); it != retired_.end(); ++it) {
    ProfilerContext* ctx = *it;
    if (ctx->colls.capacity() == FixedPool<CollRecord>::roundUp(collPool) &&
        ctx->proxyOps.capacity() == FixedPool<ProxyOpRecord>::roundUp(childPool) &&
        ctx->completed.capacity() == Ring<CompletedColl>::roundUp(queueCapacity)) {
      retired_.erase(it);
      ctx->resetForReuse();
      return ctx;
    }
  }
  all_.push_back(std::make_unique<ProfilerContext>(collPool, childPool, queueCapacity));
  return all_.back().get();
}

void ContextRegistry::retire(ProfilerContext* ctx) {
  std::lock_guard<std::mutex> lock(mu_);
  retired_.push_back(ctx);
}

size_t ContextRegistry::allocated() const {
  std::lock_guard<std::mutex> lock(mu_);
  return all_.size();
}

}  // namespace autopilot::profiler
