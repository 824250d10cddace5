// The name our exports give a communicator (Prometheus labels, file names, trace and Inspector
// files): the first 8 bytes of SHA-256 over NCCL's commId, as 16 hex digits. Exports are
// collected and shared by operators; without a secret file the tuner's rendezvous key is
// derived from the commId, so exports never carry the commId itself. This is hygiene only:
// NCCL's own INFO log prints the commId, which is why only a secret file authenticates
// (README, "Security and failure model").
#pragma once

#include <cstdint>
#include <string>

namespace autopilot {

std::string commTag(uint64_t commId);

}  // namespace autopilot
