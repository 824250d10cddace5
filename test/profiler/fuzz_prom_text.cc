// libFuzzer target: `autopilot top`'s reader of Prometheus text files (any file in the folder it
// is pointed at, whoever wrote it). Bounded, never a crash, and what it keeps is well formed.
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <string_view>

#include "bench/top/prom_text.h"

using namespace autopilot::top;

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  std::string_view text(reinterpret_cast<const char*>(data), size);
  Exposition e = parseExposition(text, 64);
  if (e.samples.size() > 64) __builtin_trap();
  if ((e.badLines > 0) != !e.firstError.empty()) __builtin_trap();
  for (const Sample& s : e.samples) {
    if (s.name.empty() || s.name.size() > size) __builtin_trap();
    for (const auto& [key, value] : s.labels) {
      if (key.empty() || value.size() > size) __builtin_trap();
    }
    (void)s.seriesKey();
  }
  return 0;
}
