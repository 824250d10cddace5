#include "common/params.h"

#include <strings.h>

#include <algorithm>
#include <cctype>
#include <cerrno>
#include <cmath>
#include <cstdlib>
#include <cstring>

#include "common/log.h"

namespace autopilot::params {
namespace {

std::mutex& registryMutex() {
  static std::mutex mu;
  return mu;
}
std::vector<ParamBase*>& registry() {
  static std::vector<ParamBase*> params;
  return params;
}
std::atomic<bool> gLogged{false};

std::string trim(const char* text) {
  std::string s(text);
  size_t b = s.find_first_not_of(" \t\r\n");
  size_t e = s.find_last_not_of(" \t\r\n");
  return b == std::string::npos ? std::string() : s.substr(b, e - b + 1);
}

std::string formatDouble(double v) {
  char buf[64];
  std::snprintf(buf, sizeof(buf), "%g", v);
  return buf;
}

}  // namespace

const char* sourceName(Source s) {
  switch (s) {
    case Source::kDefault:
      return "default";
    case Source::kEnvironment:
      return "environment";
    case Source::kInvalid:
      return "default (environment value rejected)";
  }
  return "?";
}

ParamBase::ParamBase(const char* name, const char* typeName, const char* doc)
    : name_(name), typeName_(typeName), doc_(doc) {
  std::lock_guard<std::mutex> lock(registryMutex());
  registry().push_back(this);
}

void ParamBase::resolve() {
  std::lock_guard<std::mutex> lock(mu_);
  if (state_.load(std::memory_order_relaxed) == kResolved) return;
  const char* env = std::getenv(name_);
  useDefault();
  source_ = Source::kDefault;
  raw_.clear();
  rejection_.clear();
  if (env != nullptr) {
    raw_ = env;
    std::string reason;
    if (parse(env, &reason)) {
      source_ = Source::kEnvironment;
    } else {
      useDefault();
      source_ = Source::kInvalid;
      rejection_ = reason;
    }
  }
  state_.store(kResolved, std::memory_order_release);
  if (source_ == Source::kInvalid && log::logger() != nullptr) {
    warned_ = true;
    AP_WARN(abi::subsys::kInit | abi::subsys::kEnv, "%s='%s' ignored: %s; using the default %s",
            name_, raw_.c_str(), rejection_.c_str(), defaultString().c_str());
  }
}

std::string ParamBase::valueString() {
  resolve();
  return currentString();
}

Source ParamBase::source() {
  resolve();
  return source_;
}

std::string ParamBase::rejection() {
  resolve();
  std::lock_guard<std::mutex> lock(mu_);
  return rejection_;
}

void ParamBase::resetForTesting() {
  std::lock_guard<std::mutex> lock(mu_);
  warned_ = false;
  state_.store(kUnresolved, std::memory_order_release);
}

// ---- bool

BoolParam::BoolParam(const char* name, bool def, const char* doc)
    : ParamBase(name, "bool", doc), default_(def), value_(def) {}

std::string BoolParam::defaultString() const { return default_ ? "1" : "0"; }
std::string BoolParam::currentString() const { return value_ ? "1" : "0"; }

bool BoolParam::parse(const char* text, std::string* reason) {
  std::string s = trim(text);
  static const char* kTrue[] = {"1", "true", "yes", "on", "y"};
  static const char* kFalse[] = {"0", "false", "no", "off", "n"};
  for (const char* t : kTrue) {
    if (strcasecmp(s.c_str(), t) == 0) {
      value_ = true;
      return true;
    }
  }
  for (const char* f : kFalse) {
    if (strcasecmp(s.c_str(), f) == 0) {
      value_ = false;
      return true;
    }
  }
  *reason = "not a boolean (expected 0/1, true/false, yes/no, on/off)";
  return false;
}

// ---- int

IntParam::IntParam(const char* name, int64_t def, int64_t min, int64_t max, const char* doc,
                   IntSyntax syntax)
    : ParamBase(name,
                syntax == IntSyntax::kSize   ? "size"
                : syntax == IntSyntax::kMask ? "mask"
                                             : "int",
                doc),
      default_(def),
      min_(min),
      max_(max),
      syntax_(syntax),
      value_(def) {}

std::string IntParam::defaultString() const { return std::to_string(default_); }
std::string IntParam::currentString() const { return std::to_string(value_); }
std::string IntParam::constraintString() const {
  return std::to_string(min_) + ".." + std::to_string(max_);
}

bool IntParam::parse(const char* text, std::string* reason) {
  std::string s = trim(text);
  if (s.empty()) {
    *reason = "empty";
    return false;
  }
  const bool hex = syntax_ == IntSyntax::kMask && (s.rfind("0x", 0) == 0 || s.rfind("0X", 0) == 0);
  const char* digits = s.c_str() + (hex ? 2 : 0);
  // strtoll would skip blanks and take a sign before the digits; only [-]digits is accepted.
  const char* first = digits + (!hex && *digits == '-' ? 1 : 0);
  if (!(hex ? std::isxdigit(static_cast<unsigned char>(*first))
            : std::isdigit(static_cast<unsigned char>(*first)))) {
    *reason = "not a decimal integer";
    return false;
  }
  errno = 0;
  char* end = nullptr;
  long long v = std::strtoll(digits, &end, hex ? 16 : 10);
  if (end == digits || errno == ERANGE) {
    *reason = "not an integer";
    return false;
  }
  long long mult = 1;
  if (*end != '\0' && syntax_ == IntSyntax::kSize && end[1] == '\0') {
    switch (*end) {
      case 'k':
      case 'K':
        mult = 1ll << 10;
        break;
      case 'm':
      case 'M':
        mult = 1ll << 20;
        break;
      case 'g':
      case 'G':
        mult = 1ll << 30;
        break;
      case 't':
      case 'T':
        mult = 1ll << 40;
        break;
      default:
        mult = 0;
    }
    if (mult != 0) ++end;
  }
  if (*end != '\0' || mult == 0) {
    *reason = std::string("trailing characters '") + end + "'";
    return false;
  }
  if (v != 0 && (v > INT64_MAX / mult || v < INT64_MIN / mult)) {
    *reason = "out of range";
    return false;
  }
  v *= mult;
  if (v < min_ || v > max_) {
    *reason = "outside " + constraintString();
    return false;
  }
  value_ = v;
  return true;
}

// ---- double

DoubleParam::DoubleParam(const char* name, double def, double min, double max, const char* doc)
    : ParamBase(name, "float", doc), default_(def), min_(min), max_(max), value_(def) {}

std::string DoubleParam::defaultString() const { return formatDouble(default_); }
std::string DoubleParam::currentString() const { return formatDouble(value_); }
std::string DoubleParam::constraintString() const {
  return formatDouble(min_) + ".." + formatDouble(max_);
}

bool DoubleParam::parse(const char* text, std::string* reason) {
  std::string s = trim(text);
  errno = 0;
  char* end = nullptr;
  double v = std::strtod(s.c_str(), &end);
  if (s.empty() || end == s.c_str() || *end != '\0' || errno == ERANGE || !std::isfinite(v)) {
    *reason = "not a finite number";
    return false;
  }
  if (v < min_ || v > max_) {
    *reason = "outside " + constraintString();
    return false;
  }
  value_ = v;
  return true;
}

// ---- string

StringParam::StringParam(const char* name, const char* def, const char* doc,
                         std::initializer_list<const char*> choices)
    : ParamBase(name, choices.size() ? "enum" : "string", doc), default_(def), value_(def) {
  for (const char* c : choices) choices_.emplace_back(c);
}

std::string StringParam::defaultString() const { return default_; }
std::string StringParam::constraintString() const {
  std::string out;
  for (const auto& c : choices_) out += (out.empty() ? "" : "|") + c;
  return out;
}

bool StringParam::parse(const char* text, std::string* reason) {
  std::string s = trim(text);
  if (s.size() > 4096) {
    *reason = "longer than 4096 characters";
    return false;
  }
  if (choices_.empty()) {
    value_ = s;
    return true;
  }
  for (const auto& c : choices_) {
    if (strcasecmp(c.c_str(), s.c_str()) == 0) {
      value_ = c;
      return true;
    }
  }
  *reason = "not one of " + constraintString();
  return false;
}

// ---- registry

std::vector<ParamBase*> all() {
  std::lock_guard<std::mutex> lock(registryMutex());
  return registry();
}

ParamBase* find(const std::string& name) {
  for (ParamBase* p : all()) {
    if (name == p->name()) return p;
  }
  return nullptr;
}

void logAllOnce() {
  if (gLogged.exchange(true)) return;
  for (ParamBase* p : all()) {
    std::string v = p->valueString();
    Source src = p->source();
    bool warnNow = false;
    {
      std::lock_guard<std::mutex> lock(p->mu_);
      warnNow = src == Source::kInvalid && !p->warned_;
      if (warnNow) p->warned_ = true;
    }
    if (warnNow) {
      AP_WARN(abi::subsys::kInit | abi::subsys::kEnv, "%s='%s' ignored: %s; using the default %s",
              p->name(), p->raw_.c_str(), p->rejection_.c_str(), p->defaultString().c_str());
    }
    AP_INFO(abi::subsys::kInit | abi::subsys::kEnv, "%s=%s (%s)", p->name(), v.c_str(),
            sourceName(src));
  }
}

std::string markdownTable() {
  std::vector<ParamBase*> params = all();
  std::sort(params.begin(), params.end(),
            [](ParamBase* a, ParamBase* b) { return std::strcmp(a->name(), b->name()) < 0; });
  std::string out =
      "| Variable | Type | Default | Allowed | Description |\n"
      "|---|---|---|---|---|\n";
  for (ParamBase* p : params) {
    std::string allowed = p->constraintString();
    std::string def = p->defaultString();
    out += std::string("| `") + p->name() + "` | " + p->typeName() + " | " +
           (def.empty() ? "(empty)" : "`" + def + "`") + " | " +
           (allowed.empty() ? "" : "`" + allowed + "`") + " | " + p->doc() + " |\n";
  }
  return out;
}

void resetAllForTesting() {
  for (ParamBase* p : all()) p->resetForTesting();
  gLogged.store(false);
}

}  // namespace autopilot::params
