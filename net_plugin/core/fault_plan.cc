#include "net_plugin/core/fault_plan.h"

#include <cctype>
#include <cerrno>
#include <cmath>
#include <cstdlib>

namespace autopilot::net::core {

namespace {

std::vector<std::string> tokens(const std::string& line) {
  std::vector<std::string> out;
  size_t i = 0;
  while (i < line.size()) {
    while (i < line.size() && std::isspace(static_cast<unsigned char>(line[i]))) ++i;
    size_t start = i;
    while (i < line.size() && !std::isspace(static_cast<unsigned char>(line[i]))) ++i;
    if (i > start) out.push_back(line.substr(start, i - start));
  }
  return out;
}

bool parseIndex(const std::string& s, int* out) {
  if (s.empty() || s.size() > 4) return false;
  int v = 0;
  for (char c : s) {
    if (c < '0' || c > '9') return false;
    v = v * 10 + (c - '0');
  }
  *out = v;
  return true;
}

bool parseRate(const std::string& s, double* out) {
  if (s.empty() || s.size() > 32) return false;
  for (char c : s) {
    if (!(std::isdigit(static_cast<unsigned char>(c)) || c == '.')) return false;
  }
  errno = 0;
  char* end = nullptr;
  double v = std::strtod(s.c_str(), &end);
  if (errno != 0 || end != s.c_str() + s.size() || !std::isfinite(v) || v < 0 || v > 1e7) {
    return false;
  }
  *out = v;
  return true;
}

bool printableName(const std::string& s) {
  if (s.size() > 64) return false;
  for (char c : s) {
    if (!std::isprint(static_cast<unsigned char>(c))) return false;
  }
  return true;
}

}  // namespace

FaultPlan parseFaultPlan(const char* text, size_t length) {
  FaultPlan plan;
  size_t pos = 0;
  int lineNo = 0;
  while (pos < length) {
    size_t end = pos;
    while (end < length && text[end] != '\n') ++end;
    ++lineNo;
    if (size_t(lineNo) > kMaxFaultLines) {
      plan.errors.push_back("more than " + std::to_string(kMaxFaultLines) +
                            " lines: the rest is ignored");
      break;
    }
    std::string where = "line " + std::to_string(lineNo) + ": ";
    if (end - pos > kMaxFaultLineLength) {
      plan.errors.push_back(where + "longer than " + std::to_string(kMaxFaultLineLength) +
                            " characters");
      pos = end + 1;
      continue;
    }
    std::string line(text + pos, end - pos);
    pos = end + 1;
    size_t hash = line.find('#');
    if (hash != std::string::npos) line.resize(hash);
    bool binary = false;
    for (char c : line) {
      if (c == '\0') binary = true;
    }
    if (binary) {
      plan.errors.push_back(where + "contains a NUL byte");
      continue;
    }
    std::vector<std::string> t = tokens(line);
    if (t.empty()) continue;
    if (t[0] != "rail" || t.size() < 3) {
      plan.errors.push_back(
          where + "expected 'rail <name|index> down|deaf|reject|up|rate <Mbit/s>|qp-reset <n>'");
      continue;
    }
    FaultRule rule;
    rule.line = lineNo;
    rule.rail = t[1];
    if (!printableName(rule.rail)) {
      plan.errors.push_back(where + "bad rail name");
      continue;
    }
    int index;
    if (parseIndex(rule.rail, &index)) rule.index = index;
    if (t[2] == "down" && t.size() == 3) {
      rule.action = FaultRule::Action::kDown;
    } else if (t[2] == "deaf" && t.size() == 3) {
      rule.action = FaultRule::Action::kDeaf;
    } else if (t[2] == "reject" && t.size() == 3) {
      rule.action = FaultRule::Action::kReject;
    } else if (t[2] == "up" && t.size() == 3) {
      rule.action = FaultRule::Action::kUp;
    } else if (t[2] == "rate" && t.size() == 4) {
      rule.action = FaultRule::Action::kRate;
      if (!parseRate(t[3], &rule.rateMbps)) {
        plan.errors.push_back(where + "bad rate '" + t[3] + "' (Mbit/s, 0..10000000)");
        continue;
      }
    } else if (t[2] == "qp-reset" && t.size() == 4) {
      rule.action = FaultRule::Action::kQpReset;
      if (!parseIndex(t[3], &rule.resetSequence)) {
        plan.errors.push_back(where + "bad qp-reset sequence '" + t[3] + "' (0..9999)");
        continue;
      }
    } else {
      plan.errors.push_back(
          where + "expected down, deaf, reject, up, rate <Mbit/s> or qp-reset <n> after the rail");
      continue;
    }
    plan.rules.push_back(std::move(rule));
  }
  return plan;
}

}  // namespace autopilot::net::core
