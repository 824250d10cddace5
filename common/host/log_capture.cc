#include "common/host/log_capture.h"

#include <strings.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <chrono>
#include <cstdarg>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <deque>
#include <mutex>
#include <sstream>

namespace autopilot::host {
namespace {

std::mutex gMutex;
std::deque<LogRecord>& store() {
  static std::deque<LogRecord> records;
  return records;
}
int gEchoLevel = abi::kLogWarn;
unsigned long gEchoMask = abi::subsys::kInit | abi::subsys::kBootstrap | abi::subsys::kEnv;

const char* levelName(int level) {
  switch (level) {
    case abi::kLogVersion:
      return "VERSION";
    case abi::kLogWarn:
      return "WARN";
    case abi::kLogInfo:
      return "INFO";
    case abi::kLogAbort:
      return "ABORT";
    case abi::kLogTrace:
      return "TRACE";
  }
  return "LOG";
}

void hostLogger(abi::LogLevel level, unsigned long flags, const char* filefunc, int line,
                const char* fmt, ...) {
  char buf[2048];
  va_list ap;
  va_start(ap, fmt);
  std::vsnprintf(buf, sizeof(buf), fmt, ap);
  va_end(ap);
  std::lock_guard<std::mutex> lock(gMutex);
  auto& records = store();
  if (records.size() >= LogCapture::kMaxRecords) records.pop_front();
  records.push_back(LogRecord{
      level, flags, filefunc ? filefunc : "", line, buf,
      std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count()});
  // NCCL prints WARN regardless of subsystem; other levels need a subsystem match.
  bool echo = level <= gEchoLevel &&
              (level == abi::kLogWarn || level == abi::kLogVersion || (flags & gEchoMask) != 0);
  if (echo) {
    char host[64] = "host";
    gethostname(host, sizeof(host) - 1);
    std::fprintf(stderr, "%s:%d:%ld NCCL %s %s\n", host, int(getpid()), long(syscall(SYS_gettid)),
                 levelName(level), buf);
  }
}

}  // namespace

abi::Logger LogCapture::logger() { return &hostLogger; }

std::vector<LogRecord> LogCapture::records() {
  std::lock_guard<std::mutex> lock(gMutex);
  return {store().begin(), store().end()};
}

void LogCapture::clear() {
  std::lock_guard<std::mutex> lock(gMutex);
  store().clear();
}

size_t LogCapture::count(int level, const std::string& needle) {
  std::lock_guard<std::mutex> lock(gMutex);
  size_t n = 0;
  for (const auto& r : store()) {
    if ((level < 0 || r.level == level) && r.message.find(needle) != std::string::npos) ++n;
  }
  return n;
}

void LogCapture::setEcho(int level, unsigned long subsysMask) {
  std::lock_guard<std::mutex> lock(gMutex);
  gEchoLevel = level;
  gEchoMask = subsysMask;
}

unsigned long parseSubsysList(const std::string& value) {
  static const struct {
    const char* name;
    unsigned long flag;
  } kNames[] = {{"INIT", abi::subsys::kInit},
                {"COLL", abi::subsys::kColl},
                {"P2P", abi::subsys::kP2p},
                {"SHM", abi::subsys::kShm},
                {"NET", abi::subsys::kNet},
                {"GRAPH", abi::subsys::kGraph},
                {"TUNING", abi::subsys::kTuning},
                {"ENV", abi::subsys::kEnv},
                {"ALLOC", abi::subsys::kAlloc},
                {"CALL", abi::subsys::kCall},
                {"PROXY", abi::subsys::kProxy},
                {"NVLS", abi::subsys::kNvls},
                {"BOOTSTRAP", abi::subsys::kBootstrap},
                {"REG", abi::subsys::kReg},
                {"PROFILE", abi::subsys::kProfile},
                {"RAS", abi::subsys::kRas},
                {"ALL", abi::subsys::kAll}};
  std::string list = value;
  bool invert = !list.empty() && list[0] == '^';
  if (invert) list.erase(0, 1);
  unsigned long mask = 0;
  std::stringstream ss(list);
  std::string item;
  while (std::getline(ss, item, ',')) {
    for (const auto& n : kNames) {
      if (strcasecmp(item.c_str(), n.name) == 0) mask |= n.flag;
    }
  }
  return invert ? ~mask : mask;
}

void LogCapture::configureEchoFromEnv() {
  int level = abi::kLogWarn;
  if (const char* d = std::getenv("NCCL_DEBUG")) {
    if (strcasecmp(d, "VERSION") == 0)
      level = abi::kLogVersion;
    else if (strcasecmp(d, "WARN") == 0)
      level = abi::kLogWarn;
    else if (strcasecmp(d, "INFO") == 0)
      level = abi::kLogInfo;
    else if (strcasecmp(d, "TRACE") == 0)
      level = abi::kLogTrace;
    else if (strcasecmp(d, "NONE") == 0)
      level = abi::kLogNone;
  }
  unsigned long mask = abi::subsys::kInit | abi::subsys::kBootstrap | abi::subsys::kEnv;
  if (const char* s = std::getenv("NCCL_DEBUG_SUBSYS")) mask = parseSubsysList(s);
  setEcho(level, mask);
}

}  // namespace autopilot::host
