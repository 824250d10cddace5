// Typed registry of every NCCL_AUTOPILOT_* parameter.
//
// Each parameter is a namespace-scope object (BoolParam, IntParam, DoubleParam, StringParam
// below) declared next to the code that uses it; construction only records the declaration, so
// nothing is read at static initialisation. The value is resolved from the environment on first
// use, parsed strictly and frozen: a malformed or out-of-range value is reported with a warning
// and the default is used. NCCL merges NCCL_CONF_FILE and /etc/nccl.conf into the environment
// before any plugin loads (docs/nccl-plugin-abi.md §1.1), so getenv sees those too. Each
// plugin's init calls logAllOnce(), which logs every value and its source once per load. The
// README's configuration table is generated from this registry (`autopilot params --markdown`)
// and a test keeps the two identical.
#pragma once

#include <atomic>
#include <cstdint>
#include <initializer_list>
#include <mutex>
#include <string>
#include <vector>

namespace autopilot::params {

enum class Source { kDefault, kEnvironment, kInvalid };
const char* sourceName(Source s);

class ParamBase {
 public:
  ParamBase(const char* name, const char* typeName, const char* doc);
  ParamBase(const ParamBase&) = delete;
  ParamBase& operator=(const ParamBase&) = delete;
  virtual ~ParamBase() = default;

  const char* name() const { return name_; }
  const char* typeName() const { return typeName_; }
  const char* doc() const { return doc_; }
  virtual std::string defaultString() const = 0;
  virtual std::string constraintString() const { return {}; }

  // Resolving is idempotent and thread-safe; after it the value never changes.
  void resolve();
  std::string valueString();
  Source source();
  // The reason the environment value was rejected (empty unless source() is kInvalid).
  std::string rejection();
  // Forget the resolved value (tests only: the library itself freezes values per load).
  void resetForTesting();

 protected:
  // Parses `text` into the pending value; returns false with a reason on any defect.
  virtual bool parse(const char* text, std::string* reason) = 0;
  virtual void useDefault() = 0;
  virtual std::string currentString() const = 0;
  bool resolved() const { return state_.load(std::memory_order_acquire) == kResolved; }

 private:
  enum : int { kUnresolved = 0, kResolved = 1 };
  const char* name_;
  const char* typeName_;
  const char* doc_;
  std::mutex mu_;
  std::atomic<int> state_{kUnresolved};
  Source source_ = Source::kDefault;
  std::string raw_;
  std::string rejection_;
  bool warned_ = false;  // the rejection reached a real logger
  friend void logAllOnce();
};

class BoolParam final : public ParamBase {
 public:
  BoolParam(const char* name, bool def, const char* doc);
  bool get() {
    if (!resolved()) resolve();
    return value_;
  }
  std::string defaultString() const override;

 private:
  bool parse(const char* text, std::string* reason) override;
  void useDefault() override { value_ = default_; }
  std::string currentString() const override;
  bool default_;
  bool value_;
};

// How an integer is written. Decimal only by default: a leading zero is not octal ("0100" is
// 100) and "0x" is refused. Sizes accept an optional K/M/G/T suffix (powers of 1024); bit masks
// accept decimal or an explicit 0x hexadecimal form, as NCCL's own mask variables do.
enum class IntSyntax { kDecimal, kSize, kMask };

class IntParam final : public ParamBase {
 public:
  IntParam(const char* name, int64_t def, int64_t min, int64_t max, const char* doc,
           IntSyntax syntax = IntSyntax::kDecimal);
  int64_t get() {
    if (!resolved()) resolve();
    return value_;
  }
  std::string defaultString() const override;
  std::string constraintString() const override;

 private:
  bool parse(const char* text, std::string* reason) override;
  void useDefault() override { value_ = default_; }
  std::string currentString() const override;
  int64_t default_, min_, max_;
  IntSyntax syntax_;
  int64_t value_;
};

class DoubleParam final : public ParamBase {
 public:
  DoubleParam(const char* name, double def, double min, double max, const char* doc);
  double get() {
    if (!resolved()) resolve();
    return value_;
  }
  std::string defaultString() const override;
  std::string constraintString() const override;

 private:
  bool parse(const char* text, std::string* reason) override;
  void useDefault() override { value_ = default_; }
  std::string currentString() const override;
  double default_, min_, max_;
  double value_;
};

// Free text, or one of `choices` (compared case-insensitively) when choices are given.
class StringParam final : public ParamBase {
 public:
  StringParam(const char* name, const char* def, const char* doc,
              std::initializer_list<const char*> choices = {});
  const std::string& get() {
    if (!resolved()) resolve();
    return value_;
  }
  std::string defaultString() const override;
  std::string constraintString() const override;

 private:
  bool parse(const char* text, std::string* reason) override;
  void useDefault() override { value_ = default_; }
  std::string currentString() const override { return value_; }
  std::string default_;
  std::vector<std::string> choices_;
  std::string value_;
};

// Every declared parameter, in declaration order within a file (files in link order).
std::vector<ParamBase*> all();
ParamBase* find(const std::string& name);

// Resolves everything and logs each value and its source once per load of the library (INFO,
// INIT and ENV subsystems); rejected values are also logged at WARN. Called from every plugin init.
void logAllOnce();

// The README configuration table (markdown), sorted by name.
std::string markdownTable();

// Resets every parameter (tests only).
void resetAllForTesting();

}  // namespace autopilot::params
