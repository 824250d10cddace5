#include "common/event_journal.h"

#include <cstdarg>
#include <cstdio>
#include <cstring>

#include "common/clock.h"

namespace autopilot::journal {

const char* sourceName(Source s) {
  switch (s) {
    case Source::kNet:
      return "net";
    case Source::kTuner:
      return "tuner";
    case Source::kProfiler:
      return "profiler";
  }
  return "?";
}

EventJournal& EventJournal::instance() {
  static EventJournal journal;
  return journal;
}

void EventJournal::record(Source source, uint64_t commId, int rail, const char* kind,
                          const char* fmt, ...) {
  Event e;
  e.timeNs = monotonicNs();
  e.source = source;
  e.commId = commId;
  e.rail = rail;
  std::snprintf(e.kind, sizeof(e.kind), "%s", kind ? kind : "");
  va_list ap;
  va_start(ap, fmt);
  std::vsnprintf(e.detail, sizeof(e.detail), fmt, ap);
  va_end(ap);
  std::lock_guard<std::mutex> lock(mu_);
  e.seq = next_++;
  ring_[e.seq % kCapacity] = e;
}

size_t EventJournal::readSince(uint64_t* cursor, Event* out, size_t max) const {
  std::lock_guard<std::mutex> lock(mu_);
  uint64_t first = *cursor + 1;
  uint64_t oldest = next_ > kCapacity ? next_ - kCapacity : 1;
  if (first < oldest) first = oldest;
  size_t n = 0;
  for (uint64_t s = first; s < next_ && n < max; ++s) out[n++] = ring_[s % kCapacity];
  if (n > 0) *cursor = out[n - 1].seq;
  return n;
}

uint64_t EventJournal::lastSeq() const {
  std::lock_guard<std::mutex> lock(mu_);
  return next_ - 1;
}

uint64_t EventJournal::overwritten() const {
  std::lock_guard<std::mutex> lock(mu_);
  return next_ > kCapacity + 1 ? next_ - 1 - kCapacity : 0;
}

void EventJournal::resetForTesting() {
  std::lock_guard<std::mutex> lock(mu_);
  next_ = 1;
}

}  // namespace autopilot::journal
