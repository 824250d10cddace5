// Command-line parsing shared by every `autopilot` subcommand and by ncclperf, on CLI11 (Debian
// libcli11-dev, header-only). One shape for all of them: `-h`/`--help` prints the usage on
// stdout and exits 0; a bad value or an unknown flag prints one line naming the flag and the
// value on stderr and exits 2 (kUsageError). Nothing thrown by parsing escapes a command.
//
// Args is a thin typed front over CLI::App, and only cli_args.cc includes CLI11: its headers
// cost several CPU-seconds per translation unit (parsing, plus the validator objects it defines
// at namespace scope), which every command's file would otherwise pay in each build.
//
// Numbers are checked as text before CLI11 converts them, because CLI11 reads "010" as octal and
// "0x10" as hex, wraps "-1" into an unsigned and lets "nan" through a range check; each value
// reaches CLI11 as a canonical decimal string, so it means what it meant when the flags were
// parsed with std::stoi / std::stod.
#pragma once

#include <cmath>
#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <vector>

namespace CLI {
class App;
class Option;
}  // namespace CLI

namespace autopilot::cli {

inline constexpr int kUsageError = 2;

enum class Radix {
  kDecimal,
  kAny,  // as strtoull with base 0 (decimal, 0x hex, 0 octal), for flags that always took that
};

// A real interval for Args::addReal: bounds, each open or closed.
struct Interval {
  double lo, hi;
  bool loOpen, hiOpen;
  static Interval positive() { return {0, HUGE_VAL, true, true}; }
  static Interval atLeast(double lo) { return {lo, HUGE_VAL, false, true}; }
  static Interval closed(double lo, double hi) { return {lo, hi, false, false}; }
  static Interval leftOpen(double lo, double hi) { return {lo, hi, true, false}; }
  static Interval rightOpen(double lo, double hi) { return {lo, hi, false, true}; }
  bool contains(double x) const {
    return (loOpen ? x > lo : x >= lo) && (hiOpen ? x < hi : x <= hi);
  }
  std::string text() const;  // "> 0", "in (0, 600]"
};

// One option, to refine after adding it.
class Opt {
 public:
  explicit Opt(CLI::Option* o) : o_(o) {}
  Opt& required();
  Opt& typeName(const std::string& name);  // the placeholder in --help: N, FILE, LIST
  Opt& showDefault();                      // "=value" in --help (numbers show theirs already)
  Opt& hideDefault();
  // Listed under "Internal": flags the tool passes to itself when it starts a child process.
  // Not hidden, since CLI11 leaves hidden options unnamed in its error messages.
  Opt& internal();
  bool given() const;  // on the command line (valid after Args::parse)

 private:
  CLI::Option* o_;
};

class Args {
 public:
  // `name` as the user types it ("autopilot demo"); `description` is printed under the usage.
  Args(const std::string& name, const std::string& description);
  ~Args();
  Args(const Args&) = delete;
  Args& operator=(const Args&) = delete;

  Opt addFlag(const std::string& name, bool& var, const std::string& help);
  Opt addText(const std::string& name, std::string& var, const std::string& help);
  // An integer in [lo, hi] (T: int, int64_t, uint64_t, size_t).
  template <class T>
  Opt addInt(const std::string& name, T& var, T lo, T hi, const std::string& help,
             Radix radix = Radix::kDecimal);
  // A finite real within `range` (nan and inf are refused whatever the range).
  Opt addReal(const std::string& name, double& var, Interval range, const std::string& help);
  // One of `choices`.
  Opt addChoice(const std::string& name, std::string& var, std::vector<std::string> choices,
                const std::string& help);
  // Comma-separated lists (empty elements are skipped, as these lists always were split).
  Opt addIntList(const std::string& name, std::string& var, uint64_t lo, uint64_t hi,
                 const std::string& help);  // at least one element
  Opt addChoiceList(const std::string& name, std::string& var, std::vector<std::string> choices,
                    const std::string& help, bool requireOne = false);
  // A string checked by `check`, which returns "" or what is wrong with the value.
  Opt addChecked(const std::string& name, std::string& var,
                 std::function<std::string(const std::string&)> check, const std::string& help);
  Opt addPositionals(const std::string& name, std::vector<std::string>& var,
                     const std::string& help);

  void footer(const std::string& text);
  // The top level: the usage line as given, and everything from the first word that is not one
  // of its own options on left to remaining() (the command and its arguments).
  void topLevel(const std::string& usageLine);
  std::vector<std::string> remaining() const;
  std::string help() const;

  // Returns the exit code when the command should stop here (0 after --help, kUsageError after
  // a bad command line), nothing when it should run.
  std::optional<int> parse(int argc, char** argv);

 private:
  std::unique_ptr<CLI::App> app_;
  std::string name_;
};

}  // namespace autopilot::cli
