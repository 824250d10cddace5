// Helpers for the net fuzzers: the checksum the wire formats use, so that half of the inputs
// get a valid checksum and reach the field checks behind it.
#pragma once

#include <cstddef>
#include <cstdint>

#include "net_plugin/core/wire_bytes.h"

namespace autopilot::fuzz {

using net::core::bytes::fnv32;
using net::core::bytes::put32;

// Writes a valid checksum of [0, at) at `at`.
inline void fixChecksum(uint8_t* buf, size_t at) { put32(buf + at, fnv32(buf, at)); }

}  // namespace autopilot::fuzz
