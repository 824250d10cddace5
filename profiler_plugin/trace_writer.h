// Chrome trace-event JSON (the array form), which Perfetto and chrome://tracing open: one file
// per communicator and rank, streamed by the service thread and closed (valid JSON) at
// finalize. Bounded: after `maxEvents` events further ones are counted, not written.
//
// Tracks (tid) within the process (pid): 1 collectives (host clock, Coll start to completion),
// 2 decisions and state changes of our plugins (the event journal) and detected shifts,
// 100 + c kernel channel c (GPU timers placed on the host timeline by aligning the
// collective's last GPU stop with its host completion; the raw GPU values are in args),
// 200 + c proxy ops of channel c. Rails are counter tracks ("C" events, MB/s).
//
// The file is opened without following a symlink (safe_file.h); a write error removes the
// partial file and ends tracing for the communicator (failed()).
#pragma once

#include <cstdint>
#include <cstdio>
#include <memory>
#include <string>

#include "profiler_plugin/context.h"

namespace autopilot::profiler {

class TraceWriter {
 public:
  // NULL (and a warning) when the file cannot be created.
  static std::unique_ptr<TraceWriter> open(const std::string& path, uint64_t maxEvents,
                                           const ProfilerContext& ctx);
  ~TraceWriter();
  TraceWriter(const TraceWriter&) = delete;
  TraceWriter& operator=(const TraceWriter&) = delete;

  void collective(const CompletedColl& c, bool gpuClock);
  void span(const TraceSpan& s);
  void railCounter(const char* railName, double megabytesPerSec, uint64_t atNs);
  void instant(const char* category, const char* name, const char* detail, uint64_t atNs);
  void flush();
  void close();  // writes the closing bracket; idempotent
  // In a forked child: the file is the parent's. Forget it without writing (its buffer was
  // flushed before the fork); the child's copy of the stream is not reclaimed.
  void abandon() { file_ = nullptr; }

  const std::string& path() const { return path_; }
  uint64_t written() const { return written_; }
  // Events not in the file: past the bound, or lost with a file removed after a failed write.
  uint64_t dropped() const { return dropped_; }
  bool failed() const { return failed_; }

 private:
  TraceWriter(std::FILE* file, std::string path, uint64_t maxEvents);
  bool admit();
  void emit(const std::string& event);
  void fail();
  void nameTrack(int tid, const std::string& name);

  std::FILE* file_;
  std::string path_;
  uint64_t maxEvents_;
  uint64_t written_ = 0, dropped_ = 0;
  int pid_;
  bool first_ = true;
  bool failed_ = false;  // a write failed: the file was removed
  bool namedTracks_[512] = {};
  std::string scratch_;
};

}  // namespace autopilot::profiler
