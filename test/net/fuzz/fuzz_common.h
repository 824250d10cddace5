// Helpers for the net fuzzers: the checksum the wire formats use, so that half of the inputs
// get a valid checksum and reach the field checks behind it.
#pragma once

#include <cstddef>
#include <cstdint>

namespace autopilot::fuzz {

inline uint32_t fnv32(const uint8_t* p, size_t n) {
  uint32_t h = 2166136261u;
  for (size_t i = 0; i < n; ++i) {
    h ^= p[i];
    h *= 16777619u;
  }
  return h;
}

inline void put32(uint8_t* p, uint32_t v) {
  for (int i = 0; i < 4; ++i) p[i] = uint8_t(v >> (8 * i));
}

// Writes a valid checksum of [0, at) at `at`.
inline void fixChecksum(uint8_t* buf, size_t at) { put32(buf + at, fnv32(buf, at)); }

}  // namespace autopilot::fuzz
