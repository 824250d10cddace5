#include "net_plugin/core/rail_selection.h"

#include <algorithm>
#include <cctype>

namespace autopilot::net::core {

namespace {

std::string trim(const std::string& s) {
  size_t b = 0, e = s.size();
  while (b < e && std::isspace(static_cast<unsigned char>(s[b]))) ++b;
  while (e > b && std::isspace(static_cast<unsigned char>(s[e - 1]))) --e;
  return s.substr(b, e - b);
}

bool validName(const std::string& s) {
  if (s.empty() || s.size() > 64) return false;
  for (char c : s) {
    unsigned char u = static_cast<unsigned char>(c);
    if (std::isspace(u) || !std::isprint(u) || c == ',' || c == ';') return false;
  }
  return true;
}

}  // namespace

std::vector<std::string> splitList(const std::string& text, char separator) {
  std::vector<std::string> out;
  size_t start = 0;
  while (start <= text.size()) {
    size_t end = text.find(separator, start);
    if (end == std::string::npos) end = text.size();
    std::string item = trim(text.substr(start, end - start));
    if (!item.empty()) out.push_back(item);
    start = end + 1;
  }
  return out;
}

bool parseInterfaceFilter(const std::string& text, InterfaceFilter* out, std::string* error) {
  InterfaceFilter f;
  std::string s = trim(text);
  if (!s.empty() && s[0] == '^') {
    f.exclude = true;
    s = s.substr(1);
  }
  if (!s.empty() && s[0] == '=') {
    f.exact = true;
    s = s.substr(1);
  }
  for (std::string item : splitList(s)) {
    size_t colon = item.find(':');
    if (colon != std::string::npos) {
      // NCCL's "prefix:port": the port must be a number; it selects nothing here.
      std::string port = item.substr(colon + 1);
      if (port.empty() || !std::all_of(port.begin(), port.end(),
                                       [](char c) { return std::isdigit(static_cast<unsigned char>(c)); })) {
        if (error) *error = "bad port in '" + item + "'";
        return false;
      }
      item = item.substr(0, colon);
    }
    if (!validName(item)) {
      if (error) *error = "bad interface name '" + item + "'";
      return false;
    }
    f.names.push_back(item);
  }
  if (f.names.empty() && (f.exact || !text.empty()) && !f.exclude) {
    if (error) *error = "no interface names in '" + text + "'";
    return false;
  }
  *out = std::move(f);
  return true;
}

bool interfaceMatches(const InterfaceFilter& filter, const std::string& name) {
  bool listed = false;
  for (const std::string& n : filter.names) {
    if (filter.exact ? name == n : name.compare(0, n.size(), n) == 0) {
      listed = true;
      break;
    }
  }
  return filter.exclude ? !listed : listed;
}

bool isDefaultExcluded(const std::string& name) {
  for (const char* prefix : {"lo", "docker", "virbr"}) {
    if (name.compare(0, std::char_traits<char>::length(prefix), prefix) == 0) return true;
  }
  return false;
}

bool parseGroupSpec(const std::string& text, GroupSpec* out, std::string* error) {
  GroupSpec spec;
  std::string s = trim(text);
  if (s.empty() || s == "all") {
    spec.kind = GroupSpec::Kind::kAllInOne;
  } else if (s == "per-rail") {
    spec.kind = GroupSpec::Kind::kPerRail;
  } else {
    spec.kind = GroupSpec::Kind::kExplicit;
    size_t start = 0;
    while (start <= s.size()) {
      size_t end = s.find(';', start);
      if (end == std::string::npos) end = s.size();
      std::string group = trim(s.substr(start, end - start));
      start = end + 1;
      if (group.empty()) {
        if (end == s.size() && !spec.groups.empty()) break;  // tolerate a trailing ';'
        if (error) *error = "empty group in '" + text + "'";
        return false;
      }
      std::vector<std::string> names;
      for (const std::string& raw : splitList(group)) {
        if (!validName(raw)) {
          if (error) *error = "bad rail name '" + raw + "'";
          return false;
        }
        names.push_back(raw);
      }
      if (names.empty()) {
        if (error) *error = "empty group in '" + text + "'";
        return false;
      }
      spec.groups.push_back(std::move(names));
    }
  }
  *out = std::move(spec);
  return true;
}

bool resolveGroups(const GroupSpec& spec, const std::vector<std::string>& railNames,
                   std::vector<std::vector<int>>* devices, std::vector<std::string>* unused,
                   std::string* error) {
  devices->clear();
  if (unused) unused->clear();
  int n = int(railNames.size());
  if (n == 0) return true;
  if (spec.kind == GroupSpec::Kind::kAllInOne) {
    std::vector<int> all(n);
    for (int i = 0; i < n; ++i) all[i] = i;
    devices->push_back(std::move(all));
    return true;
  }
  if (spec.kind == GroupSpec::Kind::kPerRail) {
    for (int i = 0; i < n; ++i) devices->push_back({i});
    return true;
  }
  std::vector<bool> used(n, false);
  for (const auto& group : spec.groups) {
    std::vector<int> rails;
    for (const std::string& name : group) {
      auto it = std::find(railNames.begin(), railNames.end(), name);
      if (it == railNames.end()) {
        if (error) *error = "group names unknown rail '" + name + "'";
        devices->clear();
        return false;
      }
      int idx = int(it - railNames.begin());
      if (used[idx]) {
        if (error) *error = "rail '" + name + "' is in two groups";
        devices->clear();
        return false;
      }
      used[idx] = true;
      rails.push_back(idx);
    }
    devices->push_back(std::move(rails));
  }
  if (unused) {
    for (int i = 0; i < n; ++i) {
      if (!used[i]) unused->push_back(railNames[i]);
    }
  }
  return true;
}

}  // namespace autopilot::net::core
