// Command-line parsing shared by every `autopilot` subcommand, on CLI11 (Debian libcli11-dev,
// header-only). One shape for all of them: `-h`/`--help` prints the usage on stdout and exits
// 0; a bad value or an unknown flag prints one line naming the flag and the value on stderr
// and exits 2 (kUsageError). Nothing thrown by parsing escapes a command.
//
// Numbers go through the helpers below rather than CLI11's own conversions, which read "010"
// as octal and "0x10" as hex, wrap "-1" into an unsigned, and let "nan" through a range check.
// Each helper checks the text itself and hands CLI11 a canonical decimal string, so a value
// means what it meant when the flags were parsed with std::stoi / std::stod.
#pragma once

#include <CLI/CLI.hpp>

#include <cerrno>
#include <algorithm>
#include <charconv>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <functional>
#include <limits>
#include <memory>
#include <optional>
#include <sstream>
#include <string>
#include <type_traits>
#include <vector>

namespace autopilot::cli {

inline constexpr int kUsageError = 2;

// Where the flags go that the tool passes to itself when it starts a child process. They stay
// visible: CLI11 leaves hidden options unnamed in its error messages.
inline constexpr const char* kInternalGroup = "Internal (the tool starts itself with these)";

// --help as man pages and the tool's earlier usage texts read: the usage line first, then the
// prose, then the options with their explanations wrapped to the terminal's usual 100 columns.
class HelpFormatter : public CLI::Formatter {
 public:
  static constexpr size_t kWidth = 100;
  static constexpr size_t kNameColumn = 30;

  HelpFormatter() { column_width(kNameColumn); }

  std::string make_description(const CLI::App*) const override { return ""; }

  std::string make_usage(const CLI::App* app, std::string name) const override {
    std::string description = app->get_description();
    if (!description.empty() && description.back() != '\n') description += '\n';
    return CLI::Formatter::make_usage(app, name) + description;
  }

  std::string make_option_desc(const CLI::Option* opt) const override {
    return wrap(opt->get_description(), kWidth - kNameColumn - 2);
  }

  // Greedy word wrap; explicit newlines are kept.
  static std::string wrap(const std::string& text, size_t width) {
    std::string out, line, word;
    auto flushWord = [&]() {
      if (word.empty()) return;
      if (!line.empty() && line.size() + 1 + word.size() > width) {
        out += line + '\n';
        line.clear();
      }
      line += (line.empty() ? "" : " ") + word;
      word.clear();
    };
    for (char c : text) {
      if (c == ' ' || c == '\n') {
        flushWord();
        if (c == '\n') {
          out += line + '\n';
          line.clear();
        }
      } else {
        word += c;
      }
    }
    flushWord();
    return out + line;
  }
};

// Applied to every subcommand's App before options are added: a flag given twice keeps its last
// value, as the hand-written parsers did (scripts append overrides to a default command line).
inline void configure(CLI::App& app) {
  app.option_defaults()->multi_option_policy(CLI::MultiOptionPolicy::TakeLast);
  app.formatter(std::make_shared<HelpFormatter>());
}

// Parses argv (argv[0] is the subcommand's name). Returns the exit code when the command should
// stop here (0 after --help, kUsageError after a bad command line), nothing when it should run.
inline std::optional<int> parseArgs(CLI::App& app, int argc, char** argv) {
  try {
    app.parse(argc, argv);
  } catch (const CLI::CallForHelp&) {
    std::fputs(app.help().c_str(), stdout);
    return 0;
  } catch (const CLI::ParseError& e) {
    std::string what = e.what();
    for (char& c : what) {
      if (c == '\n') c = ' ';
    }
    std::fprintf(stderr, "%s: %s (see --help)\n", app.get_name().c_str(), what.c_str());
    return kUsageError;
  }
  return std::nullopt;
}

namespace detail {

inline std::string quoted(const std::string& s) { return "'" + s + "'"; }

template <class T>
std::string boundsText(T lo, T hi) {
  constexpr T kMax = std::numeric_limits<T>::max();
  if (hi == kMax) return ">= " + std::to_string(lo);
  return "in [" + std::to_string(lo) + ", " + std::to_string(hi) + "]";
}

// Decimal integer with an optional sign, nothing else (std::stoi's leading blanks and trailing
// junk are errors here: "5x" was a silent 5).
enum class Parsed { kOk, kNotANumber, kTooLarge };

template <class T>
Parsed parseDecimal(const std::string& text, T* out) {
  const char* b = text.data();
  const char* e = b + text.size();
  if (b != e && *b == '+') ++b;
  if (b == e || (std::is_unsigned_v<T> && *b == '-')) return Parsed::kNotANumber;
  auto [end, ec] = std::from_chars(b, e, *out, 10);
  if (end != e) return Parsed::kNotANumber;
  if (ec == std::errc::result_out_of_range) return Parsed::kTooLarge;
  return ec == std::errc() ? Parsed::kOk : Parsed::kNotANumber;
}

// As strtoull with base 0 (decimal, 0x hex, 0 octal), for flags that always took that form.
inline Parsed parseAnyBase(const std::string& text, unsigned long long* out) {
  if (text.empty() || text[0] == '-' || text[0] == ' ' || text[0] == '+') {
    return Parsed::kNotANumber;
  }
  char* end = nullptr;
  errno = 0;
  *out = std::strtoull(text.c_str(), &end, 0);
  if (end != text.c_str() + text.size()) return Parsed::kNotANumber;
  return errno == ERANGE ? Parsed::kTooLarge : Parsed::kOk;
}

}  // namespace detail

enum class Radix { kDecimal, kAny };

// An integer flag in [lo, hi].
template <class T>
CLI::Option* addInt(CLI::App& app, const std::string& name, T& var, T lo, T hi,
                    const std::string& help, Radix radix = Radix::kDecimal) {
  static_assert(std::is_integral_v<T>);
  CLI::Validator v(
      [lo, hi, radix](std::string& text) -> std::string {
        T value{};
        detail::Parsed parsed;
        if (radix == Radix::kAny) {
          unsigned long long u = 0;
          parsed = detail::parseAnyBase(text, &u);
          if (parsed == detail::Parsed::kOk &&
              u > (unsigned long long)std::numeric_limits<T>::max()) {
            parsed = detail::Parsed::kTooLarge;
          }
          value = T(u);
        } else {
          parsed = detail::parseDecimal(text, &value);
        }
        if (parsed == detail::Parsed::kNotANumber) {
          return detail::quoted(text) + " is not an integer " + detail::boundsText(lo, hi);
        }
        if (parsed == detail::Parsed::kTooLarge || value < lo || value > hi) {
          return detail::quoted(text) + " is out of range: wants an integer " +
                 detail::boundsText(lo, hi);
        }
        text = std::to_string(value);
        return "";
      },
      "");
  return app.add_option(name, var, help)->transform(v)->type_name("N")->capture_default_str();
}

// A real interval for addReal: bounds, each open or closed.
struct Interval {
  double lo, hi;
  bool loOpen, hiOpen;
  static Interval positive() { return {0, HUGE_VAL, true, true}; }
  static Interval atLeast(double lo) { return {lo, HUGE_VAL, false, true}; }
  static Interval closed(double lo, double hi) { return {lo, hi, false, false}; }
  static Interval leftOpen(double lo, double hi) { return {lo, hi, true, false}; }
  static Interval rightOpen(double lo, double hi) { return {lo, hi, false, true}; }
  static Interval open(double lo, double hi) { return {lo, hi, true, true}; }
  bool contains(double x) const {
    return (loOpen ? x > lo : x >= lo) && (hiOpen ? x < hi : x <= hi);
  }
  std::string text() const {
    auto num = [](double x) {
      std::ostringstream s;
      s << x;
      return s.str();
    };
    if (std::isinf(hi)) return (loOpen ? "> " : ">= ") + num(lo);
    return (loOpen ? "in (" : "in [") + num(lo) + ", " + num(hi) + (hiOpen ? ")" : "]");
  }
};

// A finite real flag within `range` (nan and inf are rejected whatever the range).
inline CLI::Option* addReal(CLI::App& app, const std::string& name, double& var, Interval range,
                            const std::string& help) {
  CLI::Validator v(
      [range](std::string& text) -> std::string {
        const char* b = text.c_str();
        char* end = nullptr;
        errno = 0;
        double x = text.empty() || text[0] == ' ' ? 0 : std::strtod(b, &end);
        if (end == nullptr || end == b || *end != '\0' || errno == ERANGE || !std::isfinite(x)) {
          return detail::quoted(text) + " is not a number " + range.text();
        }
        if (!range.contains(x)) {
          return detail::quoted(text) + " is out of range: wants a number " + range.text();
        }
        return "";
      },
      "");
  return app.add_option(name, var, help)->transform(v)->type_name("S")->capture_default_str();
}

// A string flag whose value is one of `choices`.
inline CLI::Option* addChoice(CLI::App& app, const std::string& name, std::string& var,
                              std::vector<std::string> choices, const std::string& help) {
  std::string all;
  for (const std::string& c : choices) all += (all.empty() ? "" : "|") + c;
  CLI::Validator v(
      [choices, all](std::string& text) -> std::string {
        for (const std::string& c : choices) {
          if (text == c) return "";
        }
        return detail::quoted(text) + " is not one of " + all;
      },
      "");
  return app.add_option(name, var, help)->check(v)->type_name(all)->capture_default_str();
}

// A check for a comma-separated list: `item` returns an error for one element ("" when it is
// fine). Empty elements are skipped, as the lists were always split; `requireOne` turns away a
// list with no element at all.
inline CLI::Validator listOf(std::function<std::string(const std::string&)> item,
                             bool requireOne) {
  return CLI::Validator(
      [item, requireOne](std::string& text) -> std::string {
        int elements = 0;
        for (size_t start = 0; start <= text.size();) {
          size_t comma = std::min(text.find(',', start), text.size());
          std::string one = text.substr(start, comma - start);
          start = comma + 1;
          if (one.empty()) continue;
          ++elements;
          std::string error = item(one);
          if (!error.empty()) return error;
        }
        if (requireOne && elements == 0) return "no element in " + detail::quoted(text);
        return "";
      },
      "");
}

// A comma-separated list of decimal integers, each in [lo, hi].
inline CLI::Validator integerList(uint64_t lo, uint64_t hi) {
  return listOf([lo, hi](const std::string& one) -> std::string {
    uint64_t value = 0;
    if (detail::parseDecimal(one, &value) != detail::Parsed::kOk || value < lo || value > hi) {
      return detail::quoted(one) + " is not an integer " + detail::boundsText(lo, hi);
    }
    return "";
  }, /*requireOne=*/true);
}

// A comma-separated list of names, each one of `choices`.
inline CLI::Validator choiceList(std::vector<std::string> choices, bool requireOne = false) {
  std::string all;
  for (const std::string& c : choices) all += (all.empty() ? "" : ",") + c;
  return listOf([choices, all](const std::string& one) -> std::string {
    for (const std::string& c : choices) {
      if (one == c) return "";
    }
    return detail::quoted(one) + " is not one of " + all;
  }, requireOne);
}

}  // namespace autopilot::cli
