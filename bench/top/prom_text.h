// A reader of the Prometheus text exposition format (version 0.0.4), for `autopilot top`: the
// files our profiler writes, or any node_exporter textfile. Malformed lines are skipped and
// counted (the first one is described), never fatal; the input is bounded by the caller.
#pragma once

#include <cstddef>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace autopilot::top {

struct Sample {
  std::string name;
  std::vector<std::pair<std::string, std::string>> labels;  // in file order, values unescaped
  double value = 0;
  // The value of label `key`, or nullptr.
  const std::string* label(std::string_view key) const;
  // Name and labels as one key (what identifies a series within one file).
  std::string seriesKey() const;
};

struct Exposition {
  std::vector<Sample> samples;
  size_t badLines = 0;
  std::string firstError;  // "line N: what" for the first bad line
};

// Parses `text`; at most `maxSamples` samples are kept (later ones count as bad lines).
Exposition parseExposition(std::string_view text, size_t maxSamples = 1000000);

}  // namespace autopilot::top
