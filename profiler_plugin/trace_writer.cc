#include "profiler_plugin/trace_writer.h"

#include <unistd.h>

#include <cerrno>
#include <cstring>

#include "common/comm_tag.h"
#include "common/log.h"
#include "common/safe_file.h"
#include "profiler_plugin/export_util.h"
#include "profiler_plugin/nccl_names.h"

namespace autopilot::profiler {
namespace {

constexpr int kTrackCollectives = 1;
constexpr int kTrackDecisions = 2;
constexpr int kTrackKernelChannel = 100;
constexpr int kTrackProxyOp = 200;

void appendUs(std::string* out, uint64_t ns) {
  char buf[32];
  std::snprintf(buf, sizeof(buf), "%llu.%03llu", static_cast<unsigned long long>(ns / 1000),
                static_cast<unsigned long long>(ns % 1000));
  *out += buf;
}

}  // namespace

std::unique_ptr<TraceWriter> TraceWriter::open(const std::string& path, uint64_t maxEvents,
                                               const ProfilerContext& ctx) {
  std::string error;
  int fd = openExportFile(path, false, &error);
  std::FILE* f = fd >= 0 ? fdopen(fd, "w") : nullptr;
  if (f == nullptr) {
    if (fd >= 0) ::close(fd);
    AP_WARN(abi::subsys::kProfile, "trace file cannot be created (%s): tracing is off",
            fd >= 0 ? std::strerror(errno) : error.c_str());
    return nullptr;
  }
  std::unique_ptr<TraceWriter> w(new TraceWriter(f, path, maxEvents));
  std::fputs("[\n", f);
  std::string name = "nccl-autopilot rank " + std::to_string(ctx.rank) + " comm ";
  if (!ctx.name.empty()) name += ctx.name + " ";
  name += commTag(ctx.commId);
  std::string ev = "{\"name\":\"process_name\",\"ph\":\"M\",\"pid\":" + std::to_string(w->pid_) +
                   ",\"tid\":0,\"args\":{\"name\":\"";
  appendJsonEscaped(&ev, name.c_str());
  ev += "\"}}";
  w->emit(ev);
  w->nameTrack(kTrackCollectives, "collectives (host clock)");
  w->nameTrack(kTrackDecisions, "autopilot decisions and state changes");
  return w;
}

TraceWriter::TraceWriter(std::FILE* file, std::string path, uint64_t maxEvents)
    : file_(file), path_(std::move(path)), maxEvents_(maxEvents), pid_(int(getpid())) {}

TraceWriter::~TraceWriter() { close(); }

bool TraceWriter::admit() {
  if (file_ == nullptr) {
    if (failed_) ++dropped_;  // lost to the failed write, not silently
    return false;
  }
  if (written_ >= maxEvents_) {
    ++dropped_;
    return false;
  }
  return true;
}

void TraceWriter::emit(const std::string& event) {
  if (!first_) std::fputs(",\n", file_);
  first_ = false;
  std::fwrite(event.data(), 1, event.size(), file_);
  ++written_;
  if (std::ferror(file_)) fail();
}

void TraceWriter::fail() {
  // A full disk or a lost mount: what was written cannot become valid JSON any more. The
  // partial file is removed rather than left for a viewer to choke on.
  AP_WARN(abi::subsys::kProfile,
          "trace file '%s': write failed (%s); the partial file is "
          "removed and tracing is off for this communicator",
          path_.c_str(), std::strerror(errno));
  std::fclose(file_);
  ::unlink(path_.c_str());
  file_ = nullptr;
  failed_ = true;
  dropped_ += written_;  // the removed file held them
  written_ = 0;
}

void TraceWriter::nameTrack(int tid, const std::string& name) {
  if (tid < 0 || tid >= int(sizeof(namedTracks_)) || namedTracks_[tid] || file_ == nullptr) return;
  namedTracks_[tid] = true;
  std::string ev = "{\"name\":\"thread_name\",\"ph\":\"M\",\"pid\":" + std::to_string(pid_) +
                   ",\"tid\":" + std::to_string(tid) + ",\"args\":{\"name\":\"";
  appendJsonEscaped(&ev, name.c_str());
  ev += "\"}}";
  emit(ev);  // metadata is not counted against the bound: it is a few events per file
  --written_;
}

void TraceWriter::collective(const CompletedColl& c, bool gpuClock) {
  if (!admit()) return;
  std::string& e = scratch_;
  e.clear();
  e += "{\"name\":\"";
  e += funcName(c.func);
  if (c.engine == kCopyEngine) e += " (copy engine)";
  e += "\",\"cat\":\"collective\",\"ph\":\"X\",\"pid\":";
  e += std::to_string(pid_);
  e += ",\"tid\":1,\"ts\":";
  appendUs(&e, c.hostStartNs);
  e += ",\"dur\":";
  appendUs(&e, c.hostEndNs - c.hostStartNs);
  char buf[448];
  std::snprintf(
      buf, sizeof(buf),
      ",\"args\":{\"seq\":%llu,\"bytes\":%llu,\"count\":%llu,\"datatype\":\"%s\","
      "\"algo\":\"%s\",\"proto\":\"%s\",\"nChannels\":%d,\"host_us\":%.3f,"
      "\"gpu_us\":%.3f,\"tuner_clock\":\"%s\",\"user_tag\":%llu,\"engine\":\"%s\"",
      static_cast<unsigned long long>(c.seqNumber), static_cast<unsigned long long>(c.nBytes),
      static_cast<unsigned long long>(c.count), datatypeName(c.datatype), algoName(c.algo),
      protoName(c.proto), int(c.nChannels), double(c.hostEndNs - c.hostStartNs) / 1e3,
      c.gpuTimed ? double(c.gpuEndNs - c.gpuStartNs) / 1e3 : 0.0, gpuClock ? "gpu" : "host",
      static_cast<unsigned long long>(c.userTag), c.engine == kCopyEngine ? "copy" : "kernel");
  e += buf;
  // NCCL 2.31+ (profiler v7): the kernel variant, and the time the channels spent in their
  // sync phases against their compute phase (GPU ns summed over channels).
  if (c.kernelVariant[0] != '\0') {
    e += ",\"kernel_variant\":\"";
    appendJsonEscaped(&e, c.kernelVariant);
    e += "\"";
  }
  if (c.isSymColl) e += ",\"symmetric\":true";
  if (c.phaseSyncNs != 0 || c.phaseComputeNs != 0) {
    std::snprintf(buf, sizeof(buf), ",\"phase_sync_us\":%.3f,\"phase_compute_us\":%.3f",
                  double(c.phaseSyncNs) / 1e3, double(c.phaseComputeNs) / 1e3);
    e += buf;
  }
  e += "}}";
  emit(e);
}

void TraceWriter::span(const TraceSpan& s) {
  if (!admit()) return;
  int tid;
  uint64_t startHost, endHost;
  char name[48];
  static const char* const kPhaseNames[3] = {"initial sync", "compute", "final sync"};
  if (s.kind == TraceSpan::kKernelChannel || s.kind == TraceSpan::kKernelPhase) {
    // Phases share their channel's track: they lie within its span, so viewers nest them.
    tid = kTrackKernelChannel + s.channelId;
    nameTrack(tid, "kernel channel " + std::to_string(s.channelId) + " (GPU timer)");
    // Align the collective's last GPU stop with its host completion time.
    startHost = s.anchorHostNs - (s.anchorGpuNs - s.startNs);
    endHost = s.anchorHostNs - (s.anchorGpuNs - s.endNs);
    if (s.kind == TraceSpan::kKernelPhase) {
      std::snprintf(name, sizeof(name), "%s", kPhaseNames[s.phaseId < 3 ? s.phaseId : 1]);
    } else {
      std::snprintf(name, sizeof(name), "%s ch%d", funcName(s.func), int(s.channelId));
    }
  } else {
    tid = kTrackProxyOp + s.channelId;
    nameTrack(tid, "proxy ops channel " + std::to_string(s.channelId));
    startHost = s.startNs;
    endHost = s.endNs;
    std::snprintf(name, sizeof(name), "%s %s peer %d", s.isSend ? "send" : "recv", funcName(s.func),
                  int(s.peer));
  }
  std::string& e = scratch_;
  e.clear();
  e += "{\"name\":\"";
  e += name;
  e += "\",\"cat\":\"";
  e += s.kind == TraceSpan::kKernelChannel ? "kernel"
       : s.kind == TraceSpan::kKernelPhase ? "kernel_phase"
                                           : "proxy";
  e += "\",\"ph\":\"X\",\"pid\":";
  e += std::to_string(pid_);
  e += ",\"tid\":";
  e += std::to_string(tid);
  e += ",\"ts\":";
  appendUs(&e, startHost);
  e += ",\"dur\":";
  appendUs(&e, endHost >= startHost ? endHost - startHost : 0);
  char buf[160];
  std::snprintf(
      buf, sizeof(buf), ",\"args\":{\"seq\":%llu,\"start\":%llu,\"stop\":%llu,\"user_tag\":%llu}}",
      static_cast<unsigned long long>(s.seqNumber), static_cast<unsigned long long>(s.startNs),
      static_cast<unsigned long long>(s.endNs), static_cast<unsigned long long>(s.userTag));
  e += buf;
  emit(e);
}

void TraceWriter::railCounter(const char* railName, double megabytesPerSec, uint64_t atNs) {
  if (!admit()) return;
  std::string& e = scratch_;
  e.clear();
  e += "{\"name\":\"rail ";
  appendJsonEscaped(&e, railName);
  e += " MB/s\",\"cat\":\"rail\",\"ph\":\"C\",\"pid\":";
  e += std::to_string(pid_);
  e += ",\"tid\":0,\"ts\":";
  appendUs(&e, atNs);
  char buf[64];
  std::snprintf(buf, sizeof(buf), ",\"args\":{\"MB/s\":%.3f}}", megabytesPerSec);
  e += buf;
  emit(e);
}

void TraceWriter::instant(const char* category, const char* name, const char* detail,
                          uint64_t atNs) {
  if (!admit()) return;
  std::string& e = scratch_;
  e.clear();
  e += "{\"name\":\"";
  appendJsonEscaped(&e, name);
  e += "\",\"cat\":\"";
  appendJsonEscaped(&e, category);
  e += "\",\"ph\":\"i\",\"s\":\"p\",\"pid\":";
  e += std::to_string(pid_);
  e += ",\"tid\":2,\"ts\":";
  appendUs(&e, atNs);
  e += ",\"args\":{\"detail\":\"";
  appendJsonEscaped(&e, detail);
  e += "\"}}";
  emit(e);
}

void TraceWriter::flush() {
  if (file_ != nullptr && (std::fflush(file_) != 0 || std::ferror(file_))) fail();
}

void TraceWriter::close() {
  if (file_ == nullptr) return;
  std::fputs("\n]\n", file_);
  if (std::ferror(file_)) {
    fail();
    return;
  }
  if (std::fclose(file_) != 0) {
    AP_WARN(abi::subsys::kProfile,
            "trace file '%s': write failed at close (%s); the partial "
            "file is removed",
            path_.c_str(), std::strerror(errno));
    ::unlink(path_.c_str());
    failed_ = true;
    dropped_ += written_;
    written_ = 0;
  }
  file_ = nullptr;
}

}  // namespace autopilot::profiler
