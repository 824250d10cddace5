// Messages between the demo's parent process and its rank processes, over one SOCK_SEQPACKET
// socketpair per rank (message boundaries preserved; the fd survives entering a network
// namespace, so the bootstrap never touches the rails under test).
#pragma once

#include <sys/socket.h>

#include <cstdint>
#include <cstring>

namespace autopilot::demo::wire {

enum class Type : uint32_t {
  kHandle = 1,     // rank -> parent: my listen handle for `peer`; parent -> rank: `peer`'s for you
  kReady = 2,      // rank -> parent: connected, about to run
  kIteration = 3,  // rank -> parent: one collective done
  kError = 4,      // rank -> parent: a fatal error (text)
  kStop = 5,       // parent -> rank: stop after `atIteration`
  kGo = 6,         // parent -> rank: start the workload
};

struct Header {
  Type type;
  int32_t rank;
};

struct Handle {
  Header h;
  int32_t peer;
  char handle[128];
};

struct Iteration {
  Header h;
  uint64_t iteration;
  uint64_t endNs;  // CLOCK_MONOTONIC (shared by every namespace of the machine)
  uint64_t durationNs;
  int32_t kind;            // demo::CollectiveKind
  int32_t algo;            // NCCL algorithm index chosen
  int32_t proto;           // NCCL protocol index chosen
  int32_t nChannels;       // tuner's channel cap (0 = NCCL's own)
  int32_t ncclCell;        // algo * protocols + proto NCCL's own table picks (before the tuner)
  int32_t stepKiB;         // the step the tuner's chunk size set, KiB (0 = the protocol's own)
  uint64_t tunerBytes;     // getCollInfo's nBytes
  uint64_t busBytes;       // bytes for bus bandwidth (nccl-tests convention)
  uint64_t wrongElements;  // result check: 0 when every element was exact
  uint64_t decisionHash;   // running hash of every decision so far
};

struct Error {
  Header h;
  char text[256];
};

struct Stop {
  Header h;
  uint64_t atIteration;
};

template <typename T>
bool sendMsg(int fd, const T& msg) {
  return send(fd, &msg, sizeof(msg), MSG_NOSIGNAL) == ssize_t(sizeof(msg));
}

}  // namespace autopilot::demo::wire
