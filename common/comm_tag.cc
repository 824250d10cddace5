#include "common/comm_tag.h"

#include <cstdio>

#include "common/sha256.h"

namespace autopilot {

std::string commTag(uint64_t commId) {
  uint8_t bytes[8];
  for (int i = 0; i < 8; ++i) bytes[i] = uint8_t(commId >> (8 * i));  // fixed byte order
  Digest d = Sha256::hash(bytes, sizeof(bytes));
  char out[17];
  for (int i = 0; i < 8; ++i) std::snprintf(out + 2 * i, 3, "%02x", d[size_t(i)]);
  return std::string(out, 16);
}

}  // namespace autopilot
