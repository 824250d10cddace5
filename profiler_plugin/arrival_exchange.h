// The profiler's arrival exchange: each rank of a communicator sends rank 0 when it arrived at
// its collectives, rank 0 estimates every host's clock offset, names the ranks that keep the
// others waiting, and (NCCL_AUTOPILOT_STRAGGLER_REPORT=all) sends its report back to every rank.
//
// Channel. The design of the tuner's control channel and its code (tuner_plugin/
// control_channel.h, wire_format.h): a rendezvous of its own (socket path arrivals-<commId>, or
// the 1024 TCP ports above the tuner's), the same authenticated handshake with a key derived
// for this channel, sealed frames afterwards. It runs on the library's control-channel thread
// (tuner_plugin/tuner_service.h), also when the tuner plugin is not loaded: never on NCCL's
// threads. The profiler's service thread only appends arrivals to a bounded buffer and copies
// the latest report, each under this object's mutex, briefly.
//
// Messages after the handshake (payloads of sealed frames):
//   follower -> leader  kArrivals  rails total, rails unhealthy, records lost, then up to
//                                  kMaxBatch (function, sequence number, arrival ns,
//                                  duration ns) records
//   leader -> follower  kProbe     t1
//   follower -> leader  kEcho      t1, t2, t3 (clock_offset.h)
//   leader -> follower  kReport    the window's table, worst ranks first
//   either              kBye       orderly finalize
// Arrival is the host clock when NCCL handed the collective to the profiler (its Coll start:
// the rank's enqueue, docs/stragglers.md says what that measures), plus a test skew.
//
// Faults: a peer that leaves (bye, EOF, silence past the peer timeout, a frame that fails its
// MAC) is dropped and no longer waited for; a follower reconnects with backoff while its
// communicator lives. Nothing here blocks, and every buffer is bounded.
#pragma once

#include <poll.h>

#include <cstdint>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "common/sha256.h"
#include "profiler_plugin/arrival_analyzer.h"
#include "profiler_plugin/clock_offset.h"
#include "tuner_plugin/control_channel.h"
#include "tuner_plugin/tuner_service.h"

namespace autopilot::profiler {

struct ExchangeConfig {
  uint64_t commId = 0;
  std::string label;  // the communicator's name in logs
  int rank = 0;
  int nRanks = 2;
  tuner::Endpoint endpoint;
  Digest key{};
  ArrivalConfig analysis;
  bool reportAll = false;   // every rank keeps rank 0's report (else rank 0 only)
  int64_t clockSkewNs = 0;  // tests: added to this process's clock in the exchange
  uint64_t sendIntervalNs = 250'000'000;
  uint64_t probeIntervalNs = 250'000'000;
  uint64_t handshakeTimeoutNs = 2'000'000'000;
  uint64_t peerTimeoutNs = 30'000'000'000;
};

// What the exports show: rank 0's view of the last closed window.
struct ArrivalReport {
  struct Rank {
    int rank = -1;
    bool present = false, named = false, clockKnown = false;
    double windowLagNs = 0, windowMaxLagNs = 0, windowLateFraction = 0;
    uint64_t compared = 0, late = 0;
    double sinceWallSeconds = 0;  // T: start of the current late streak (Unix time)
    double streakLateLagNs = 0, streakLateFraction = 0;
    int64_t clockOffsetNs = 0;
    uint64_t clockErrorNs = 0;
    int railsTotal = -1, railsUnhealthy = -1;  // -1: not reported
  };
  bool valid = false;  // this rank holds a report
  uint64_t windows = 0;
  uint64_t matched = 0, unmatched = 0;
  std::vector<Rank> ranks;  // worst first when received from rank 0; by rank on rank 0
};

struct ExchangeCounters {
  uint64_t recorded = 0;       // arrivals this rank recorded
  uint64_t dropped = 0;        // ... lost because the buffer was full (never sent)
  uint64_t sent = 0;           // follower: arrivals sent to rank 0
  uint64_t awaitingClock = 0;  // rank 0: arrivals dropped before their host's clock was known
  uint64_t rejected = 0;       // rank 0: connections that failed the handshake
};

class ArrivalExchange final : public tuner::ServiceClient {
 public:
  static constexpr size_t kBufferSize = 4096;  // arrivals waiting to be sent or analysed
  static constexpr size_t kMaxBatch = 512;     // records per kArrivals frame
  static constexpr size_t kMaxReportRanks = 512;

  explicit ArrivalExchange(const ExchangeConfig& config);
  ~ArrivalExchange() override;
  ArrivalExchange(const ArrivalExchange&) = delete;
  ArrivalExchange& operator=(const ArrivalExchange&) = delete;

  // Registers with the control-channel thread. False when it cannot run (no thread, no listen).
  bool start();
  // Unregisters (returns once the thread no longer touches this object), says goodbye, closes.
  void stop();
  // A forked child: forget the parent's sockets without writing to them or unlinking anything.
  void abandon();

  // The profiler's service thread.
  void recordArrival(int func, uint64_t seq, uint64_t hostStartNs, uint64_t durationNs);
  ArrivalReport report() const;
  ExchangeCounters counters() const;

  // tuner::ServiceClient (the control-channel thread).
  void collectFds(std::vector<pollfd>* fds) override;
  void handleEvents(const pollfd* fds, size_t count, uint64_t nowNs) override;
  uint64_t step(uint64_t nowNs) override;

 private:
  struct Peer;
  struct Record {
    uint64_t seq;
    uint64_t arrivalNs;
    uint64_t durationNs;
    int8_t func;
  };
  bool leader() const { return config_.rank == 0; }
  uint64_t clockNow() const;
  size_t takeRecords(Record* out, size_t max);
  void acceptAll(uint64_t nowNs);
  void connect(uint64_t nowNs);
  bool onFrame(Peer& p, const std::string& body, uint64_t nowNs);
  bool onHandshake(Peer& p, const std::string& body, uint64_t nowNs);
  bool onArrivals(Peer& p, const std::string& payload, uint64_t nowNs);
  bool onReport(const std::string& payload);
  bool sendSealed(Peer& p, uint8_t type, const std::string& payload);
  void dropPeer(size_t index, const char* why, bool orderly);
  void sendBatch(Peer& p, uint64_t nowNs);
  void closeWindow(const std::vector<ArrivalChange>& changes);

  ExchangeConfig config_;
  bool registered_ = false;
  bool abandoned_ = false;

  // Control-channel thread only.
  tuner::Fd listen_;
  std::vector<std::unique_ptr<Peer>> peers_;  // leader: followers; follower: at most one
  size_t fdBase_ = 0, fdCount_ = 0;
  std::vector<Peer*> fdPeers_;
  std::vector<std::string> frames_;
  uint64_t nextConnectNs_ = 0, backoffNs_ = 10'000'000;
  std::unique_ptr<ArrivalAnalyzer> analyzer_;  // leader
  std::vector<ClockOffsetEstimator> clocks_;   // leader: per rank
  std::vector<int> railsTotal_, railsUnhealthy_;
  std::vector<Record> batch_;
  std::vector<ArrivalChange> changes_;

  // Shared with the profiler's service thread.
  mutable std::mutex mu_;
  std::vector<Record> buffer_;  // ring of kBufferSize
  size_t head_ = 0, size_ = 0;
  ArrivalReport report_;
  ExchangeCounters counters_;
};

// Reads the NCCL_AUTOPILOT_STRAGGLER_* parameters for a communicator; nullptr (with an INFO line
// saying why) when the exchange is off or cannot run for it.
std::unique_ptr<ArrivalExchange> makeArrivalExchange(uint64_t commId, const std::string& label,
                                                     int rank, int nRanks, int nNodes);

}  // namespace autopilot::profiler
