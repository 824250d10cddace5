#include "net_plugin/transport/ibverbs/port_attributes.h"

namespace autopilot::net::ib {

bool isIpv4Mapped(const uint8_t gid[16]) {
  for (int i = 0; i < 10; ++i) {
    if (gid[i] != 0) return false;
  }
  return gid[10] == 0xff && gid[11] == 0xff;
}

bool isZeroGid(const uint8_t gid[16]) {
  for (int i = 0; i < 16; ++i) {
    if (gid[i] != 0) return false;
  }
  return true;
}

bool isLinkLocalGid(const uint8_t gid[16]) { return gid[0] == 0xfe && (gid[1] & 0xc0) == 0x80; }

int chooseGidIndex(const std::vector<GidEntry>& table, int configured) {
  if (configured >= 0) {
    for (const GidEntry& e : table) {
      if (e.index == configured && !isZeroGid(e.raw)) return configured;
    }
  }
  // Each pass is one preference level; the first entry that qualifies wins.
  auto first = [&](auto&& wanted) {
    for (const GidEntry& e : table) {
      if (!isZeroGid(e.raw) && wanted(e)) return e.index;
    }
    return -1;
  };
  int i =
      first([](const GidEntry& e) { return e.type == GidType::kRoceV2 && isIpv4Mapped(e.raw); });
  if (i < 0) {
    i = first(
        [](const GidEntry& e) { return e.type == GidType::kRoceV2 && !isLinkLocalGid(e.raw); });
  }
  if (i < 0) i = first([](const GidEntry& e) { return e.type == GidType::kRoceV2; });
  if (i < 0) i = first([](const GidEntry& e) { return e.type == GidType::kUnknown; });
  if (i < 0) i = first([](const GidEntry&) { return true; });
  return i;
}

int portSpeedMbps(uint8_t activeSpeed, uint8_t activeWidth) {
  int laneMbps = 0;
  switch (activeSpeed) {
    case 1:
      laneMbps = 2500;
      break;  // SDR
    case 2:
      laneMbps = 5000;
      break;  // DDR
    case 4:
      laneMbps = 10000;
      break;  // QDR
    case 8:
      laneMbps = 10000;
      break;  // FDR10
    case 16:
      laneMbps = 14000;
      break;  // FDR
    case 32:
      laneMbps = 25000;
      break;  // EDR
    case 64:
      laneMbps = 50000;
      break;  // HDR
    case 128:
      laneMbps = 100000;
      break;  // NDR
    default:
      return 0;
  }
  int lanes = 0;
  switch (activeWidth) {
    case 1:
      lanes = 1;
      break;
    case 2:
      lanes = 4;
      break;
    case 4:
      lanes = 8;
      break;
    case 8:
      lanes = 12;
      break;
    case 16:
      lanes = 2;
      break;
    default:
      return 0;
  }
  return laneMbps * lanes;
}

}  // namespace autopilot::net::ib
