#include "profiler_plugin/export_util.h"

#include <fcntl.h>
#include <unistd.h>

#include <cctype>
#include <cerrno>
#include <cstdio>

#include "common/comm_tag.h"

namespace autopilot::profiler {

void appendJsonEscaped(std::string* out, const char* text) {
  if (text == nullptr) return;
  for (const char* p = text; *p != '\0'; ++p) {
    unsigned char c = static_cast<unsigned char>(*p);
    switch (c) {
      case '"':
        *out += "\\\"";
        break;
      case '\\':
        *out += "\\\\";
        break;
      case '\n':
        *out += "\\n";
        break;
      case '\r':
        *out += "\\r";
        break;
      case '\t':
        *out += "\\t";
        break;
      default:
        if (c < 0x20) {
          char buf[8];
          std::snprintf(buf, sizeof(buf), "\\u%04x", c);
          *out += buf;
        } else {
          *out += char(c);
        }
    }
  }
}

void appendLabelEscaped(std::string* out, const char* text) {
  if (text == nullptr) return;
  for (const char* p = text; *p != '\0'; ++p) {
    switch (*p) {
      case '\\':
        *out += "\\\\";
        break;
      case '"':
        *out += "\\\"";
        break;
      case '\n':
        *out += "\\n";
        break;
      default:
        *out += *p;
    }
  }
}

std::string hostName() {
  char buf[256];
  if (gethostname(buf, sizeof(buf)) != 0) return "unknown";
  buf[sizeof(buf) - 1] = '\0';
  return buf;
}

std::string expandPathPattern(const std::string& pattern, const PathFields& fields) {
  std::string out;
  for (size_t i = 0; i < pattern.size(); ++i) {
    char c = pattern[i];
    if (c != '%' || i + 1 == pattern.size()) {
      out += c;
      continue;
    }
    char buf[32];
    switch (pattern[i + 1]) {
      case 'r':
        std::snprintf(buf, sizeof(buf), "%d", fields.rank);
        out += buf;
        break;
      case 'c':
        out += commTag(fields.commId);
        break;
      case 'p':
        std::snprintf(buf, sizeof(buf), "%d", int(getpid()));
        out += buf;
        break;
      case 'h':
        out += hostName();
        break;
      case 'j':
        if (fields.job.empty()) out += "job";
        for (char j : fields.job) {
          bool keep =
              std::isalnum(static_cast<unsigned char>(j)) || j == '.' || j == '-' || j == '_';
          out += keep ? j : '_';
        }
        break;
      case '%':
        out += '%';
        break;
      default:
        out += c;
        out += pattern[i + 1];
        break;
    }
    ++i;
  }
  return out;
}

}  // namespace autopilot::profiler
