#include "profiler_plugin/inspector_writer.h"

#include <unistd.h>

#include <cerrno>
#include <cstring>

#include "common/comm_tag.h"
#include "common/log.h"
#include "common/safe_file.h"
#include "profiler_plugin/export_util.h"
#include "profiler_plugin/nccl_names.h"

namespace autopilot::profiler {

std::unique_ptr<InspectorWriter> InspectorWriter::open(const std::string& path, uint64_t maxRecords,
                                                       const ProfilerContext& ctx) {
  std::string error;
  int fd = openExportFile(path, true, &error);
  std::FILE* f = fd >= 0 ? fdopen(fd, "a") : nullptr;
  if (f == nullptr) {
    if (fd >= 0) ::close(fd);
    AP_WARN(abi::subsys::kProfile, "Inspector JSON file cannot be opened (%s): that export is off",
            fd >= 0 ? std::strerror(errno) : error.c_str());
    return nullptr;
  }
  std::unique_ptr<InspectorWriter> w(new InspectorWriter(f, path, maxRecords));
  w->committed_ = lseek(fd, 0, SEEK_END);
  char buf[160];
  std::snprintf(buf, sizeof(buf),
                "{\"header\":{\"id\":\"%s\",\"rank\":%d,\"n_ranks\":%d,\"nnodes\":%d},",
                commTag(ctx.commId).c_str(), ctx.rank, ctx.nRanks, ctx.nNodes);
  w->headerPrefix_ = buf;
  w->headerPrefix_ +=
      "\"metadata\":{\"inspector_output_format_version\":\"v4.0\",\"git_rev\":\"\","
      "\"rec_mechanism\":\"profiler_plugin\",\"hostname\":\"";
  appendJsonEscaped(&w->headerPrefix_, hostName().c_str());
  w->headerPrefix_ += "\",\"pid\":" + std::to_string(getpid());
  appendJsonEscaped(&w->commName_, ctx.name.c_str());
  w->nRanks_ = ctx.nRanks;
  return w;
}

InspectorWriter::InspectorWriter(std::FILE* file, std::string path, uint64_t maxRecords)
    : file_(file), path_(std::move(path)), maxRecords_(maxRecords) {}

InspectorWriter::~InspectorWriter() { close(); }

void InspectorWriter::record(const CompletedColl& c, bool gpuClock, uint64_t wallNowUs) {
  if (file_ == nullptr) {
    if (failed_) ++dropped_;  // lost to the failed write, not silently
    return;
  }
  if (written_ >= maxRecords_) {
    ++dropped_;
    return;
  }
  bool gpu = gpuClock && c.gpuTimed;
  double hostUs = double(c.hostEndNs - c.hostStartNs) / 1e3;
  double execUs = gpu ? double(c.gpuEndNs - c.gpuStartNs) / 1e3 : hostUs;
  double algBw = execUs > 0 ? double(c.nBytes) / (execUs * 1e3) : 0.0;  // GB/s
  double busBw = algBw * busBandwidthFactor(c.func, nRanks_);
  line_ = headerPrefix_;
  char buf[640];
  std::snprintf(buf, sizeof(buf),
                ",\"dump_timestamp_us\":%llu},\"coll_perf\":{\"coll\":\"%s\",\"coll_sn\":%llu,"
                "\"coll_msg_size_bytes\":%llu,\"coll_exec_time_us\":%.3f,"
                "\"coll_timing_source\":\"%s\",\"coll_algobw_gbs\":%.6f,\"coll_busbw_gbs\":%.6f},"
                "\"autopilot\":{\"algo\":\"%s\",\"proto\":\"%s\",\"nchannels\":%d,"
                "\"datatype\":\"%s\",\"count\":%llu,\"host_time_us\":%.3f,\"user_tag\":%llu,"
                "\"engine\":\"%s\",\"comm_name\":\"",
                static_cast<unsigned long long>(wallNowUs), funcName(c.func),
                static_cast<unsigned long long>(c.seqNumber),
                static_cast<unsigned long long>(c.nBytes), execUs,
                !gpu                      ? "host"
                : c.engine == kCopyEngine ? "copy_engine_gpu"
                                          : "kernel_gpu",
                algBw, busBw, algoName(c.algo), protoName(c.proto), int(c.nChannels),
                datatypeName(c.datatype), static_cast<unsigned long long>(c.count), hostUs,
                static_cast<unsigned long long>(c.userTag),
                c.engine == kCopyEngine ? "copy" : "kernel");
  line_ += buf;
  line_ += commName_;
  line_ += "\"}}\n";
  std::fwrite(line_.data(), 1, line_.size(), file_);
  ++written_;
  if (std::ferror(file_)) fail();
}

void InspectorWriter::flush() {
  if (file_ == nullptr) return;
  if (std::fflush(file_) != 0 || std::ferror(file_)) {
    fail();
    return;
  }
  committed_ = lseek(fileno(file_), 0, SEEK_CUR);
  committedRecords_ = written_;
}

void InspectorWriter::fail() {
  // Lines are appended, possibly to an earlier run's file: the partial tail written since the
  // last good flush is cut off, so the file stays valid JSON lines.
  AP_WARN(abi::subsys::kProfile,
          "Inspector JSON file '%s': write failed (%s); lines since the "
          "last flush are removed and the export is off for this communicator",
          path_.c_str(), std::strerror(errno));
  if (committed_ >= 0) (void)!ftruncate(fileno(file_), committed_);
  std::fclose(file_);
  file_ = nullptr;
  failed_ = true;
  // The lines cut off are lost records (all of them when nothing was ever flushed).
  uint64_t kept = committed_ >= 0 ? committedRecords_ : 0;
  dropped_ += written_ - kept;
  written_ = kept;
}

void InspectorWriter::close() {
  if (file_ == nullptr) return;
  flush();
  if (file_ != nullptr) std::fclose(file_);
  file_ = nullptr;
}

}  // namespace autopilot::profiler
