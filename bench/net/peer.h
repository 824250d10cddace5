// Processes for driving the net plugin from both ends, as NCCL's proxies on two nodes would:
// fork()ed children connected by socket pairs (the connection handle and phase signals travel
// over them, like NCCL's bootstrap). Used by the net tests and `autopilot netbench`.
#pragma once

#include <sys/types.h>

#include <cstdint>
#include <functional>
#include <string>

namespace autopilot::bench {

// One end of a socket pair between two processes. Every receive has a deadline, so a peer
// that died can never hang the other.
class Channel {
 public:
  Channel() = default;
  explicit Channel(int fd) : fd_(fd) {}
  Channel(Channel&& o) noexcept : fd_(o.fd_) { o.fd_ = -1; }
  Channel& operator=(Channel&& o) noexcept;
  Channel(const Channel&) = delete;
  ~Channel();
  bool send(const void* data, size_t len);
  bool recv(void* data, size_t len, int timeoutMs);
  bool sendLine(const std::string& line);
  bool recvLine(std::string* line, int timeoutMs);
  // Waits for `expected`; false on timeout, EOF or another line.
  bool expect(const std::string& expected, int timeoutMs);
  // True when a message (or EOF) is waiting, without blocking.
  bool readable() const;
  int fd() const { return fd_; }
  void close();

 private:
  int fd_ = -1;
};

void channelPair(Channel* a, Channel* b);

// Runs `body` in a forked child and returns its pid; the child exits with body's result.
pid_t spawn(const std::function<int()>& body);
// Waits for the child; on timeout kills it (SIGKILL) and returns -1. Returns the exit code, or
// 128 + signal when it died from a signal.
int waitChild(pid_t pid, int timeoutMs);

// Deterministic test data: the byte at `offset` of a buffer seeded `seed`.
void fillPattern(void* buf, size_t len, uint64_t seed);
// Returns the offset of the first byte that differs from the pattern, or -1 when all match.
int64_t checkPattern(const void* buf, size_t len, uint64_t seed);

// Cheaper checking for benchmarks, where a full pass over every byte would compete with the
// transfer for the CPU: one 8-byte word per 4 KiB, encoding the message and the offset. The
// receiver poisons those words before posting a buffer again, so a chunk that never landed,
// landed at the wrong place, or came from another message is still caught.
inline constexpr size_t kStampStride = 4096;
void stampWords(void* buf, size_t len, uint64_t message);
bool checkStamps(const void* buf, size_t len, uint64_t message);
void poisonStamps(void* buf, size_t len);

}  // namespace autopilot::bench
