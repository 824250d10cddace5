#include "bench/top/prom_text.h"

#include <cctype>
#include <cmath>
#include <cstdlib>

namespace autopilot::top {
namespace {

bool nameStart(char c) { return std::isalpha(static_cast<unsigned char>(c)) || c == '_'; }
bool nameChar(char c) { return std::isalnum(static_cast<unsigned char>(c)) || c == '_'; }

// The value token: a float, or NaN / +Inf / -Inf as the format spells them.
bool parseValue(std::string_view tok, double* out) {
  if (tok == "NaN") {
    *out = std::nan("");
    return true;
  }
  if (tok == "+Inf" || tok == "Inf") {
    *out = HUGE_VAL;
    return true;
  }
  if (tok == "-Inf") {
    *out = -HUGE_VAL;
    return true;
  }
  if (tok.empty() || tok.size() > 64) return false;
  char buf[72];
  tok.copy(buf, tok.size());
  buf[tok.size()] = '\0';
  char* end = nullptr;
  double v = std::strtod(buf, &end);
  if (end != buf + tok.size()) return false;
  // strtod also takes "nan", "inf", "infinity" and hex floats, which the format does not.
  for (char c : tok) {
    if (!(std::isdigit(static_cast<unsigned char>(c)) || c == '.' || c == 'e' || c == 'E' ||
          c == '+' || c == '-')) {
      return false;
    }
  }
  *out = v;
  return true;
}

// One sample line; returns "" or what is wrong.
std::string parseLine(std::string_view line, Sample* s) {
  size_t i = 0;
  if (i >= line.size() || !(nameStart(line[i]) || line[i] == ':')) return "no metric name";
  while (i < line.size() && (nameChar(line[i]) || line[i] == ':')) ++i;
  s->name.assign(line.substr(0, i));
  s->labels.clear();
  if (i < line.size() && line[i] == '{') {
    ++i;
    while (true) {
      while (i < line.size() && line[i] == ' ') ++i;
      if (i < line.size() && line[i] == '}') {
        ++i;
        break;
      }
      size_t k = i;
      if (k >= line.size() || !nameStart(line[k])) return "bad label name";
      while (i < line.size() && nameChar(line[i])) ++i;
      std::string key(line.substr(k, i - k));
      if (i >= line.size() || line[i] != '=') return "label without '='";
      ++i;
      if (i >= line.size() || line[i] != '"') return "label value not quoted";
      ++i;
      std::string value;
      bool closed = false;
      while (i < line.size()) {
        char c = line[i++];
        if (c == '"') {
          closed = true;
          break;
        }
        if (c == '\\') {
          if (i >= line.size()) return "escape at end of line";
          char e = line[i++];
          if (e == 'n') {
            value += '\n';
          } else if (e == '\\' || e == '"') {
            value += e;
          } else {
            return "bad escape in label value";
          }
        } else {
          value += c;
        }
      }
      if (!closed) return "unterminated label value";
      for (const auto& [existing, unused] : s->labels) {
        if (existing == key) return "label '" + key + "' repeated";
      }
      s->labels.emplace_back(std::move(key), std::move(value));
      while (i < line.size() && line[i] == ' ') ++i;
      if (i < line.size() && line[i] == ',') {
        ++i;
        continue;
      }
      if (i < line.size() && line[i] == '}') {
        ++i;
        break;
      }
      return "expected ',' or '}' after a label";
    }
  }
  if (i >= line.size() || (line[i] != ' ' && line[i] != '\t')) return "no value";
  while (i < line.size() && (line[i] == ' ' || line[i] == '\t')) ++i;
  size_t v = i;
  while (i < line.size() && line[i] != ' ' && line[i] != '\t') ++i;
  if (!parseValue(line.substr(v, i - v), &s->value)) return "bad value";
  while (i < line.size() && (line[i] == ' ' || line[i] == '\t')) ++i;
  if (i < line.size()) {  // an optional timestamp (integer milliseconds)
    size_t t = i;
    if (line[i] == '-') ++i;
    while (i < line.size() && std::isdigit(static_cast<unsigned char>(line[i]))) ++i;
    if (i == t || i != line.size()) return "bad timestamp";
  }
  return "";
}

}  // namespace

const std::string* Sample::label(std::string_view key) const {
  for (const auto& [k, v] : labels) {
    if (k == key) return &v;
  }
  return nullptr;
}

std::string Sample::seriesKey() const {
  std::string key = name;
  for (const auto& [k, v] : labels) {
    key += '\x1f';
    key += k;
    key += '=';
    key += v;
  }
  return key;
}

Exposition parseExposition(std::string_view text, size_t maxSamples) {
  Exposition out;
  size_t lineNo = 0;
  Sample s;
  while (!text.empty()) {
    size_t nl = text.find('\n');
    std::string_view line = text.substr(0, nl);
    text = nl == std::string_view::npos ? std::string_view() : text.substr(nl + 1);
    ++lineNo;
    if (!line.empty() && line.back() == '\r') line.remove_suffix(1);
    size_t first = line.find_first_not_of(" \t");
    if (first == std::string_view::npos || line[first] == '#') continue;
    line.remove_prefix(first);
    std::string error = parseLine(line, &s);
    if (error.empty() && out.samples.size() >= maxSamples) error = "too many samples";
    if (!error.empty()) {
      if (out.badLines++ == 0) out.firstError = "line " + std::to_string(lineNo) + ": " + error;
      continue;
    }
    out.samples.push_back(s);
  }
  return out;
}

}  // namespace autopilot::top
