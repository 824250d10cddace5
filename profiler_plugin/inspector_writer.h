// NCCL Inspector-compatible JSON lines: one object per completed collective with Inspector's
// "header", "metadata" and "coll_perf" members (the fields its exporters read), plus an
// "autopilot" member with what Inspector lacks (algorithm, protocol, channels, datatype, host
// duration). Streamed by the service thread; bounded by `maxRecords` per file (then counted).
#pragma once

#include <sys/types.h>

#include <cstdint>
#include <cstdio>
#include <memory>
#include <string>

#include "profiler_plugin/context.h"

namespace autopilot::profiler {

class InspectorWriter {
 public:
  static std::unique_ptr<InspectorWriter> open(const std::string& path, uint64_t maxRecords,
                                               const ProfilerContext& ctx);
  ~InspectorWriter();
  InspectorWriter(const InspectorWriter&) = delete;
  InspectorWriter& operator=(const InspectorWriter&) = delete;

  // `gpuClock`: report the GPU duration as the execution time (Inspector's "kernel_gpu").
  void record(const CompletedColl& c, bool gpuClock, uint64_t wallNowUs);
  void flush();
  void close();
  // In a forked child: the file is the parent's. Forget it without writing (its buffer was
  // flushed before the fork); the child's copy of the stream is not reclaimed.
  void abandon() { file_ = nullptr; }
  const std::string& path() const { return path_; }
  uint64_t written() const { return written_; }
  // Records not in the file: past the bound, cut off by a failed write, or after it.
  uint64_t dropped() const { return dropped_; }
  bool failed() const { return failed_; }

 private:
  InspectorWriter(std::FILE* file, std::string path, uint64_t maxRecords);
  void fail();
  std::FILE* file_;
  std::string path_;
  uint64_t maxRecords_;
  uint64_t written_ = 0, dropped_ = 0;
  std::string headerPrefix_;  // the constant part of every line, built once
  std::string commName_;
  int nRanks_ = 0;
  std::string line_;
  off_t committed_ = -1;           // file size after the last successful flush
  uint64_t committedRecords_ = 0;  // records in the file at that flush
  bool failed_ = false;
};

}  // namespace autopilot::profiler
