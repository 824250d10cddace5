// Args over CLI11 (see cli_args.h).
#include "bench/cli_args.h"

#include <CLI/CLI.hpp>
#include <algorithm>
#include <cerrno>
#include <charconv>
#include <cstdio>
#include <cstdlib>
#include <limits>
#include <sstream>
#include <type_traits>

namespace autopilot::cli {
namespace {

constexpr const char* kInternalGroup = "Internal (the tool starts itself with these)";

// --help as man pages and the tool's earlier usage texts read: the usage line first, then the
// prose, then the options with their explanations wrapped to the usual 100 columns.
class HelpFormatter : public CLI::Formatter {
 public:
  static constexpr size_t kWidth = 100;
  static constexpr size_t kNameColumn = 30;

  HelpFormatter() { column_width(kNameColumn); }

  std::string usageLine;  // replaces CLI11's where set (the top level names COMMAND)

  std::string make_description(const CLI::App*) const override { return ""; }

  std::string make_usage(const CLI::App* app, std::string name) const override {
    std::string description = app->get_description();
    if (!description.empty() && description.back() != '\n') description += '\n';
    std::string usage =
        usageLine.empty() ? CLI::Formatter::make_usage(app, name) : "Usage: " + usageLine + "\n";
    return usage + description;
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

std::string inQuotes(const std::string& s) { return "'" + s + "'"; }

template <class T>
std::string boundsText(T lo, T hi) {
  if (hi == std::numeric_limits<T>::max()) return ">= " + std::to_string(lo);
  return "in [" + std::to_string(lo) + ", " + std::to_string(hi) + "]";
}

enum class Parsed { kOk, kNotANumber, kTooLarge };

// Decimal integer with an optional sign, nothing else (std::stoi's leading blanks and trailing
// junk are errors here: "5x" was a silent 5).
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

Parsed parseAnyBase(const std::string& text, unsigned long long* out) {
  if (text.empty() || text[0] == '-' || text[0] == ' ' || text[0] == '+') {
    return Parsed::kNotANumber;
  }
  char* end = nullptr;
  errno = 0;
  *out = std::strtoull(text.c_str(), &end, 0);
  if (end != text.c_str() + text.size()) return Parsed::kNotANumber;
  return errno == ERANGE ? Parsed::kTooLarge : Parsed::kOk;
}

// A check for a comma-separated list: `item` returns an error for one element ("" when fine).
CLI::Validator listOf(std::function<std::string(const std::string&)> item, bool requireOne) {
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
        if (requireOne && elements == 0) return "no element in " + inQuotes(text);
        return "";
      },
      "");
}

std::string joined(const std::vector<std::string>& items, const char* separator) {
  std::string all;
  for (const std::string& c : items) all += (all.empty() ? "" : separator) + c;
  return all;
}

}  // namespace

std::string Interval::text() const {
  auto num = [](double x) {
    std::ostringstream s;
    s << x;
    return s.str();
  };
  if (std::isinf(hi)) return (loOpen ? "> " : ">= ") + num(lo);
  return (loOpen ? "in (" : "in [") + num(lo) + ", " + num(hi) + (hiOpen ? ")" : "]");
}

Opt& Opt::required() {
  o_->required();
  return *this;
}
Opt& Opt::typeName(const std::string& name) {
  o_->type_name(name);
  return *this;
}
Opt& Opt::showDefault() {
  o_->capture_default_str();
  return *this;
}
Opt& Opt::hideDefault() {
  o_->default_str("");
  return *this;
}
Opt& Opt::internal() {
  o_->group(kInternalGroup);
  return *this;
}
bool Opt::given() const { return o_->count() > 0; }

Args::Args(const std::string& name, const std::string& description)
    : app_(std::make_unique<CLI::App>(description, name)), name_(name) {
  // A flag given twice keeps its last value, as the hand-written parsers did (scripts append
  // overrides to a default command line).
  app_->option_defaults()->multi_option_policy(CLI::MultiOptionPolicy::TakeLast);
  app_->formatter(std::make_shared<HelpFormatter>());
}

Args::~Args() = default;

Opt Args::addFlag(const std::string& name, bool& var, const std::string& help) {
  return Opt(app_->add_flag(name, var, help));
}

Opt Args::addText(const std::string& name, std::string& var, const std::string& help) {
  return Opt(app_->add_option(name, var, help));
}

template <class T>
Opt Args::addInt(const std::string& name, T& var, T lo, T hi, const std::string& help,
                 Radix radix) {
  static_assert(std::is_integral_v<T>);
  CLI::Validator v(
      [lo, hi, radix](std::string& text) -> std::string {
        T value{};
        Parsed parsed;
        if (radix == Radix::kAny) {
          unsigned long long u = 0;
          parsed = parseAnyBase(text, &u);
          if (parsed == Parsed::kOk && u > (unsigned long long)std::numeric_limits<T>::max()) {
            parsed = Parsed::kTooLarge;
          }
          value = T(u);
        } else {
          parsed = parseDecimal(text, &value);
        }
        if (parsed == Parsed::kNotANumber) {
          return inQuotes(text) + " is not an integer " + boundsText(lo, hi);
        }
        if (parsed == Parsed::kTooLarge || value < lo || value > hi) {
          return inQuotes(text) + " is out of range: wants an integer " + boundsText(lo, hi);
        }
        text = std::to_string(value);
        return "";
      },
      "");
  return Opt(
      app_->add_option(name, var, help)->transform(v)->type_name("N")->capture_default_str());
}

template Opt Args::addInt<int>(const std::string&, int&, int, int, const std::string&, Radix);
template Opt Args::addInt<long>(const std::string&, long&, long, long, const std::string&, Radix);
template Opt Args::addInt<unsigned long>(const std::string&, unsigned long&, unsigned long,
                                         unsigned long, const std::string&, Radix);
template Opt Args::addInt<unsigned long long>(const std::string&, unsigned long long&,
                                              unsigned long long, unsigned long long,
                                              const std::string&, Radix);

Opt Args::addReal(const std::string& name, double& var, Interval range, const std::string& help) {
  CLI::Validator v(
      [range](std::string& text) -> std::string {
        const char* b = text.c_str();
        char* end = nullptr;
        errno = 0;
        double x = text.empty() || text[0] == ' ' ? 0 : std::strtod(b, &end);
        if (end == nullptr || end == b || *end != '\0' || errno == ERANGE || !std::isfinite(x)) {
          return inQuotes(text) + " is not a number " + range.text();
        }
        if (!range.contains(x)) {
          return inQuotes(text) + " is out of range: wants a number " + range.text();
        }
        return "";
      },
      "");
  return Opt(
      app_->add_option(name, var, help)->transform(v)->type_name("S")->capture_default_str());
}

Opt Args::addChoice(const std::string& name, std::string& var, std::vector<std::string> choices,
                    const std::string& help) {
  std::string all = joined(choices, "|");
  CLI::Validator v(
      [choices, all](std::string& text) -> std::string {
        if (std::find(choices.begin(), choices.end(), text) != choices.end()) return "";
        return inQuotes(text) + " is not one of " + all;
      },
      "");
  return Opt(app_->add_option(name, var, help)->check(v)->type_name(all)->capture_default_str());
}

Opt Args::addIntList(const std::string& name, std::string& var, uint64_t lo, uint64_t hi,
                     const std::string& help) {
  CLI::Validator v = listOf(
      [lo, hi](const std::string& one) -> std::string {
        uint64_t value = 0;
        if (parseDecimal(one, &value) != Parsed::kOk || value < lo || value > hi) {
          return inQuotes(one) + " is not an integer " + boundsText(lo, hi);
        }
        return "";
      },
      /*requireOne=*/true);
  return Opt(app_->add_option(name, var, help)->check(v)->type_name("LIST"));
}

Opt Args::addChoiceList(const std::string& name, std::string& var, std::vector<std::string> choices,
                        const std::string& help, bool requireOne) {
  std::string all = joined(choices, ",");
  CLI::Validator v = listOf(
      [choices, all](const std::string& one) -> std::string {
        if (std::find(choices.begin(), choices.end(), one) != choices.end()) return "";
        return inQuotes(one) + " is not one of " + all;
      },
      requireOne);
  return Opt(app_->add_option(name, var, help)->check(v)->type_name("LIST"));
}

Opt Args::addChecked(const std::string& name, std::string& var,
                     std::function<std::string(const std::string&)> check,
                     const std::string& help) {
  CLI::Validator v([check](std::string& text) { return check(text); }, "");
  return Opt(app_->add_option(name, var, help)->check(v));
}

Opt Args::addPositionals(const std::string& name, std::vector<std::string>& var,
                         const std::string& help) {
  return Opt(app_->add_option(name, var, help));
}

void Args::footer(const std::string& text) { app_->footer(text); }

void Args::topLevel(const std::string& usageLine) {
  auto formatter = std::make_shared<HelpFormatter>();
  formatter->usageLine = usageLine;
  app_->formatter(formatter);
  app_->prefix_command();
}

std::vector<std::string> Args::remaining() const { return app_->remaining(); }

std::string Args::help() const { return app_->help(); }

std::optional<int> Args::parse(int argc, char** argv) {
  try {
    app_->parse(argc, argv);
  } catch (const CLI::CallForHelp&) {
    std::fputs(app_->help().c_str(), stdout);
    return 0;
  } catch (const CLI::ParseError& e) {
    std::string what = e.what();
    std::replace(what.begin(), what.end(), '\n', ' ');
    std::fprintf(stderr, "%s: %s (see --help)\n", name_.c_str(), what.c_str());
    return kUsageError;
  }
  return std::nullopt;
}

}  // namespace autopilot::cli
