#include "bench/replay/forced_arm_csv.h"

#include <cerrno>
#include <cmath>
#include <cstdlib>
#include <fstream>
#include <map>

#include "common/abi/nccl_abi.h"

namespace autopilot::replay {
namespace {

bool parseNumber(const std::string& text, double* out) {
  if (text.empty()) return false;
  char* end = nullptr;
  errno = 0;
  double v = std::strtod(text.c_str(), &end);
  if (errno != 0 || end == text.c_str() || *end != '\0' || !std::isfinite(v) || v < 0) {
    return false;
  }
  *out = v;
  return true;
}

}  // namespace

std::vector<std::string> splitCsvLine(const std::string& line) {
  std::vector<std::string> fields(1);
  bool quoted = false;
  for (size_t i = 0; i < line.size(); ++i) {
    char c = line[i];
    if (quoted) {
      if (c == '"' && i + 1 < line.size() && line[i + 1] == '"') {
        fields.back().push_back('"');
        ++i;
      } else if (c == '"') {
        quoted = false;
      } else {
        fields.back().push_back(c);
      }
    } else if (c == '"') {
      quoted = true;
    } else if (c == ',') {
      fields.emplace_back();
    } else if (c != '\r') {
      fields.back().push_back(c);
    }
  }
  return fields;
}

int splitForcedChannels(std::string* system) {
  static const std::string kSuffix = "; channels forced to ";
  size_t at = system->rfind(kSuffix);
  if (at == std::string::npos) return 0;
  std::string digits = system->substr(at + kSuffix.size());
  while (!digits.empty() && (digits.back() == ' ' || digits.back() == '\r')) digits.pop_back();
  if (digits.empty() || digits.size() > 3 ||
      digits.find_first_not_of("0123456789") != std::string::npos) {
    return -1;
  }
  int n = std::stoi(digits);
  if (n < 1 || n > kMaxForcedChannels) return -1;
  system->resize(at);
  return n;
}

int collectiveFunc(const std::string& name) {
  if (name == "broadcast") return abi::kFuncBroadcast;
  if (name == "reduce") return abi::kFuncReduce;
  if (name == "all_gather") return abi::kFuncAllGather;
  if (name == "reduce_scatter") return abi::kFuncReduceScatter;
  if (name == "all_reduce") return abi::kFuncAllReduce;
  return -1;
}

bool readForcedArmCsv(const std::string& path, std::vector<ForcedArmRow>* rows, int* skipped,
                      std::string* error) {
  std::ifstream in(path);
  if (!in) {
    *error = "cannot open " + path;
    return false;
  }
  std::string line;
  if (!std::getline(in, line)) {
    *error = path + ": empty file";
    return false;
  }
  std::map<std::string, size_t> col;
  std::vector<std::string> header = splitCsvLine(line);
  for (size_t i = 0; i < header.size(); ++i) col[header[i]] = i;
  for (const char* required :
       {"system", "collective", "arm_algo", "arm_proto", "size_bytes", "time_us_out_of_place",
        "algbw_GBps", "busbw_GBps", "time_us_in_place"}) {
    if (!col.count(required)) {
      *error = path + ": missing column " + required;
      return false;
    }
  }
  *skipped = 0;
  while (std::getline(in, line)) {
    if (line.empty() || line == "\r") continue;
    std::vector<std::string> f = splitCsvLine(line);
    if (f.size() < header.size()) {
      ++*skipped;
      continue;
    }
    ForcedArmRow r;
    r.system = f[col["system"]];
    r.channels = splitForcedChannels(&r.system);
    if (r.channels < 0) {
      ++*skipped;
      continue;
    }
    r.collective = f[col["collective"]];
    r.armAlgo = f[col["arm_algo"]];
    r.armProto = f[col["arm_proto"]];
    double size;
    if (!parseNumber(f[col["size_bytes"]], &size) || size < 1 || size > 1e18) {
      ++*skipped;
      continue;
    }
    r.sizeBytes = uint64_t(size);
    double v;
    if (parseNumber(f[col["time_us_out_of_place"]], &v) && v > 0) r.timeOutOfPlaceUs = v;
    if (parseNumber(f[col["time_us_in_place"]], &v) && v > 0) r.timeInPlaceUs = v;
    if (parseNumber(f[col["algbw_GBps"]], &v) && v > 0) r.algbwGBps = v;
    if (parseNumber(f[col["busbw_GBps"]], &v) && v > 0) r.busbwGBps = v;
    if (r.timeOutOfPlaceUs < 0 && r.timeInPlaceUs < 0 && r.algbwGBps < 0 && r.busbwGBps < 0) {
      ++*skipped;
      continue;
    }
    rows->push_back(std::move(r));
  }
  return true;
}

}  // namespace autopilot::replay
