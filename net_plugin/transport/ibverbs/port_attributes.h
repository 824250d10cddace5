// Pure decisions about an HCA port, unit-tested without hardware: which GID a RoCE port's
// connections use, and the port's nominal speed.
#pragma once

#include <cstdint>
#include <vector>

namespace autopilot::net::ib {

enum class GidType : uint8_t { kUnknown, kIb, kRoceV1, kRoceV2 };

struct GidEntry {
  int index = 0;
  uint8_t raw[16] = {};
  GidType type = GidType::kUnknown;
};

// ::ffff:a.b.c.d
bool isIpv4Mapped(const uint8_t gid[16]);
bool isZeroGid(const uint8_t gid[16]);
// fe80::/10
bool isLinkLocalGid(const uint8_t gid[16]);

// The GID index for a RoCE port: `configured` when >= 0 and present (non-zero) in the table;
// otherwise RoCE v2 with an IPv4-mapped address, then RoCE v2 with a global IPv6 address, then
// any RoCE v2 entry, then the first non-zero entry of unknown type (providers that do not
// report types), then the first non-zero entry. -1 when the table has no usable entry.
int chooseGidIndex(const std::vector<GidEntry>& table, int configured);

// Nominal port speed in Mbit/s from ibv_port_attr's active_speed (IB_SPEED_* bit) and
// active_width (IB_WIDTH_* bit); 0 when either is unknown.
int portSpeedMbps(uint8_t activeSpeed, uint8_t activeWidth);

}  // namespace autopilot::net::ib
