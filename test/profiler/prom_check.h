// A strict checker of the Prometheus text exposition format (0.0.4) as node_exporter's textfile
// collector parses it, plus promtool's lint rules we rely on (counters end in _total, HELP on
// every family). Returns an empty string when the text is valid, else the first problem.
#pragma once

#include <cctype>
#include <cstdlib>
#include <map>
#include <set>
#include <sstream>
#include <string>

namespace autopilot::test {

inline bool validMetricName(const std::string& s) {
  if (s.empty() || !(std::isalpha((unsigned char)s[0]) || s[0] == '_' || s[0] == ':')) return false;
  for (char c : s) {
    if (!(std::isalnum((unsigned char)c) || c == '_' || c == ':')) return false;
  }
  return true;
}

inline bool validLabelName(const std::string& s) {
  if (s.empty() || !(std::isalpha((unsigned char)s[0]) || s[0] == '_')) return false;
  for (char c : s) {
    if (!(std::isalnum((unsigned char)c) || c == '_')) return false;
  }
  return true;
}

inline std::string checkExposition(const std::string& text) {
  if (text.empty() || text.back() != '\n') return "missing final newline";
  std::istringstream in(text);
  std::string line;
  std::map<std::string, std::string> types;
  std::set<std::string> helped, finished, series;
  std::string current;
  int n = 0;
  while (std::getline(in, line)) {
    ++n;
    std::string where = "line " + std::to_string(n) + ": ";
    if (line.empty()) continue;
    if (line[0] == '#') {
      std::istringstream ls(line);
      std::string hash, kind, name;
      ls >> hash >> kind >> name;
      if (kind != "HELP" && kind != "TYPE") continue;  // a plain comment
      if (!validMetricName(name)) return where + "bad metric name '" + name + "'";
      if (name != current) {
        if (finished.count(name)) return where + "family '" + name + "' is not contiguous";
        if (!current.empty()) finished.insert(current);
        current = name;
      }
      if (kind == "HELP") {
        if (!helped.insert(name).second) return where + "second HELP for " + name;
        std::string rest;
        std::getline(ls, rest);
        if (rest.size() < 2) return where + "empty HELP for " + name;
      } else {
        std::string type;
        ls >> type;
        if (types.count(name)) return where + "second TYPE for " + name;
        if (type != "counter" && type != "gauge" && type != "histogram" && type != "summary" &&
            type != "untyped") {
          return where + "bad type '" + type + "'";
        }
        if (series.count(name) || finished.count(name)) return where + "TYPE after samples";
        types[name] = type;
        if (type == "counter" && name.size() < 6) return where + "counter without _total";
        if (type == "counter" && name.compare(name.size() - 6, 6, "_total") != 0) {
          return where + "counter '" + name + "' does not end in _total";
        }
      }
      continue;
    }
    size_t i = 0;
    while (i < line.size() && line[i] != '{' && line[i] != ' ') ++i;
    std::string name = line.substr(0, i);
    if (!validMetricName(name)) return where + "bad metric name '" + name + "'";
    if (name != current) {
      if (finished.count(name)) return where + "family '" + name + "' is not contiguous";
      if (!current.empty()) finished.insert(current);
      current = name;
    }
    if (!types.count(name)) return where + "sample of '" + name + "' without TYPE";
    if (!helped.count(name)) return where + "sample of '" + name + "' without HELP";
    std::string labels;
    std::set<std::string> labelNames;
    if (i < line.size() && line[i] == '{') {
      ++i;
      while (i < line.size() && line[i] != '}') {
        size_t eq = line.find('=', i);
        if (eq == std::string::npos) return where + "label without '='";
        std::string key = line.substr(i, eq - i);
        if (!validLabelName(key)) return where + "bad label name '" + key + "'";
        if (!labelNames.insert(key).second) return where + "duplicate label " + key;
        i = eq + 1;
        if (i >= line.size() || line[i] != '"') return where + "label value not quoted";
        ++i;
        std::string value;
        while (i < line.size() && line[i] != '"') {
          if (line[i] == '\\') {
            if (i + 1 >= line.size()) return where + "dangling escape";
            char e = line[i + 1];
            if (e != '\\' && e != '"' && e != 'n') return where + "bad escape";
            i += 2;
            continue;
          }
          value += line[i++];
        }
        if (i >= line.size()) return where + "unterminated label value";
        labels += key + "=" + value + ";";
        ++i;
        if (i < line.size() && line[i] == ',') ++i;
      }
      if (i >= line.size()) return where + "unterminated label set";
      ++i;
    }
    if (i >= line.size() || line[i] != ' ') return where + "no value";
    std::string value = line.substr(i + 1);
    size_t sp = value.find(' ');
    if (sp != std::string::npos) value = value.substr(0, sp);  // optional timestamp follows
    if (value != "NaN" && value != "+Inf" && value != "-Inf") {
      char* end = nullptr;
      std::strtod(value.c_str(), &end);
      if (value.empty() || *end != '\0') return where + "bad value '" + value + "'";
    }
    if (!series.insert(name + "|" + labels).second) return where + "duplicate series";
  }
  return {};
}

}  // namespace autopilot::test
