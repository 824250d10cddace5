// One simulated run on SimGrid's flow-level network model (S4U API).
//
// The platform: every NIC is a SimGrid host with a full-duplex link to its leaf switch (a
// star zone per leaf); leaves meet at the spine through one full-duplex uplink each. A
// rail-optimized fabric has one leaf per rail (NIC r of every node on leaf r); a plain
// fat-tree has one leaf per `nodes_per_leaf` nodes. NVLink inside a node is not part of the
// simulated network: the tensor-parallel collectives that use it are timed with the
// alpha-beta formula (NIC faults do not touch them).
//
// A connection (one GPU's send side towards a peer node, as NCCL opens one per channel and
// peer) stripes its messages over the node's NICs: NIC r of the sender to NIC r of the
// receiver, every chunk a SimGrid transfer. What decides the split and reacts to faults is the
// policy under test:
//  - ours: the net plugin's own RailStriper (measured mode), RailHealth with its
//    FailureDetector, DegradationDetector and FailbackScheduler, driven exactly as the TCP
//    transport drives them (progress = bytes moving, a failed rail's chunks re-sent elsewhere,
//    re-connection attempts when the failback scheduler says so);
//  - static: the same striper in equal-split mode with no failure detection, what stock NCCL's
//    merged NIC does; a transfer stuck on a dead link stops the job;
//  - nccl-2.30: equal split; a rail with no progress for the RC retry budget is failed over
//    (equal split over the rest), one failed device per communicator, failback once repaired.
// Time is SimGrid's clock, in nanoseconds, handed to the policy classes as their `nowNs`.
#include "bench/sim/sim_engine.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <deque>
#include <map>
#include <memory>
#include <random>
#include <set>
#include <simgrid/s4u.hpp>
#include <string>
#include <vector>

#include "model/cost_model.h"
#include "model/topology_description.h"
#include "net_plugin/core/comm_config.h"
#include "net_plugin/core/engine_timing.h"
#include "net_plugin/core/rail_health.h"
#include "net_plugin/core/rail_striper.h"
#include "net_plugin/transport/tcp/recovery_timing.h"
#include "tuner_plugin/bandit_policy.h"
#include "tuner_plugin/decision.h"

namespace sg4 = simgrid::s4u;

namespace autopilot::sim {

bool simgridAvailable() { return true; }

namespace {

using net::core::FailureDetector;
using net::core::RailHealth;
using net::core::RailHealthConfig;
using net::core::RailMode;
using net::core::RailStriper;
using net::core::StripingPolicy;

constexpr double kDeadRate = 1.0;  // bytes/s of a link that is down (a trickle SimGrid can re-rate)
constexpr double kProgressBytes =
    64 * 1024;  // bytes moved that count as progress (far above a dead link's trickle)
constexpr double kPollS = 0.010;  // ours: how often a waiting sender checks its rails
// Ours: degradation verdicts as often as the engines (engine_timing.h), a re-joined rail's first
// share as the transports give it (CommConfig), and on the TCP fabric the transport's recovery
// periods (recovery_timing.h: a rail that moved nothing for kTcpSampleNs while this host's own
// link is down fails at once; one lost that way is re-connected at the first kLinkCheckNs check
// that finds the link back, not at its failback backoff, which grows to 2 s over an outage).
using net::core::kEvaluateNs;
using net::tcp::kLinkCheckNs;
using net::tcp::kTcpSampleNs;
const double kRejoinShare = net::core::CommConfig{}.rejoinShare;

// RunSpec::Split::kSustainedRates: how a connection measures each rail's sustained rate. A sample
// is what the rail held when a piece was placed, plus the piece, over the time until the piece
// arrived: the rail's rate over a busy period. A shaper's bucket (tbf's, 128 KiB in the demo)
// lets a rail that idled deliver that much at once, and a rail at a tenth of 250 Mbit/s has it
// full again after 42 ms: so a sample lowers the estimate at once, but raises it only when it
// covers more than a bucket could explain. A rail left out of a split (its piece would be too
// small) is measured by copies of 256 KiB, which hold no message back; such a copy raises the
// estimate only when the rail came back near its peers (a heal), not by the bucket's share.
struct SustainedRate {
  static constexpr double kAlpha = 0.5;                   // weight of a new sample
  static constexpr uint64_t kRaiseMinBytes = 256u << 10;  // a sample this large may raise it
  // A rail left out of a split gets a copy of this size once no sample of kRaiseMinBytes came
  // back from it for this long; the copy raises its estimate only to this share of its best
  // peer's or above, and is dropped when it has not landed by the timeout.
  static constexpr uint64_t kProbeBytes = 256u << 10;
  static constexpr double kProbeEveryS = 0.25;
  static constexpr double kProbeHealFraction = 0.6;
  static constexpr double kProbeTimeoutS = 2.0;
};

// Stops the run (the job hangs on a dead link): unwinds every actor of the simulation.
struct JobStopped {};

struct World {
  RunSpec spec;
  int nodes = 0, nics = 0;
  std::vector<sg4::Host*> nicHost;        // node * nics + r
  std::vector<sg4::Mailbox*> nicMailbox;  // node * nics + r: what that NIC receives
  std::vector<sg4::SplitDuplexLink*> nicLink;
  std::vector<sg4::SplitDuplexLink*> uplink;  // per leaf
  std::vector<double> nicFactor;              // rate left per NIC (1 healthy, 0 down)
  std::vector<uint64_t> nicRepairs;           // times each NIC came back from down
  // FabricSpec::shaperBurstBytes: per NIC, the bucket's tokens as of tokensAtS, and the
  // transfers of queued chunks on its egress now.
  std::vector<double> nicTokens, nicTokensAtS;
  std::vector<int> nicSending;
  double uplinkRate = 0;
  uint64_t transfers = 0;
  std::vector<double> windowBusBytes;  // RunSpec::windowEdgesS
  bool stopped = false;
  double stopAtS = 0;
  double firstDownS = -1;     // onset of the first down-type fault
  double lastFailoverS = -1;  // latest first-failover of a connection after that onset
  uint64_t railFailures = 0, railRejoins = 0;
  uint64_t splitMessages = 0, splitMismatches = 0;  // RunSpec::split
  // nccl-2.30: failed devices per communicator.
  std::map<int, std::set<int>> ncclFailed;
};
World* W = nullptr;
const bool gTrace = std::getenv("AUTOPILOT_SIM_TRACE") != nullptr;
void (*gStopHook)(const RunResult&) = nullptr;

uint64_t nowNs() { return uint64_t(std::llround(sg4::Engine::get_clock() * 1e9)); }
double nowS() { return sg4::Engine::get_clock(); }

void setNicRate(int node, int r, double factor) {
  int i = node * W->nics + r;
  if (gTrace)
    std::fprintf(stderr, "t=%.4f node %d nic %d rate x%g\n", sg4::Engine::get_clock(), node, r,
                 factor);
  if (W->nicFactor[i] <= 0 && factor > 0) W->nicRepairs[i]++;
  W->nicFactor[i] = factor;
  double rate = factor <= 0 ? kDeadRate : W->spec.fabric.nicBytesPerSec * factor;
  W->nicLink[i]->get_link_up()->set_bandwidth(rate);
  W->nicLink[i]->get_link_down()->set_bandwidth(rate);
}

bool nicUp(int node, int r) { return W->nicFactor[node * W->nics + r] > 0; }

void buildPlatform() {
  const FabricSpec& f = W->spec.fabric;
  W->nodes = f.nodes;
  W->nics = f.nicsPerNode;
  int leaves = f.railOptimized ? f.nicsPerNode : (f.nodes + f.nodesPerLeaf - 1) / f.nodesPerLeaf;
  auto leafOf = [&](int node, int r) { return f.railOptimized ? r : node / f.nodesPerLeaf; };
  int perLeaf = f.railOptimized ? f.nodes : f.nodesPerLeaf * f.nicsPerNode;
  W->uplinkRate = f.uplinkBytesPerSec > 0 ? f.uplinkBytesPerSec : f.nicBytesPerSec * perLeaf;

  auto* root = sg4::create_full_zone("fabric");
  std::vector<sg4::NetZone*> zone(leaves);
  std::vector<simgrid::kernel::routing::NetPoint*> gw(leaves);
  W->nicHost.assign(size_t(f.nodes) * f.nicsPerNode, nullptr);
  W->nicLink.assign(size_t(f.nodes) * f.nicsPerNode, nullptr);
  W->nicFactor.assign(size_t(f.nodes) * f.nicsPerNode, 1.0);
  W->nicRepairs.assign(size_t(f.nodes) * f.nicsPerNode, 0);
  W->nicTokens.assign(size_t(f.nodes) * f.nicsPerNode, f.shaperBurstBytes);
  W->nicTokensAtS.assign(size_t(f.nodes) * f.nicsPerNode, 0.0);
  W->nicSending.assign(size_t(f.nodes) * f.nicsPerNode, 0);
  for (int l = 0; l < leaves; ++l) {
    zone[l] = sg4::create_star_zone("leaf" + std::to_string(l));
    zone[l]->set_parent(root);
    gw[l] = zone[l]->create_router("leaf" + std::to_string(l) + "-switch");
    zone[l]->add_route(gw[l], nullptr, nullptr, nullptr, {}, true);
  }
  for (int n = 0; n < f.nodes; ++n) {
    for (int r = 0; r < f.nicsPerNode; ++r) {
      int l = leafOf(n, r);
      std::string name = "n" + std::to_string(n) + "-nic" + std::to_string(r);
      sg4::Host* h = zone[l]->create_host(name, 1e9);
      sg4::SplitDuplexLink* link = zone[l]->create_split_duplex_link(name, f.nicBytesPerSec);
      link->set_latency(f.nicLatencyS);
      zone[l]->add_route(h->get_netpoint(), nullptr, nullptr, nullptr,
                         {sg4::LinkInRoute(link, sg4::LinkInRoute::Direction::UP)}, true);
      W->nicHost[size_t(n) * f.nicsPerNode + r] = h;
      W->nicLink[size_t(n) * f.nicsPerNode + r] = link;
    }
  }
  W->uplink.resize(leaves);
  for (int l = 0; l < leaves; ++l) {
    zone[l]->seal();
    W->uplink[l] = root->create_split_duplex_link("uplink" + std::to_string(l), W->uplinkRate);
    W->uplink[l]->set_latency(f.uplinkLatencyS);
  }
  for (int a = 0; a < leaves; ++a) {
    for (int b = 0; b < leaves; ++b) {
      if (a == b) continue;
      root->add_route(zone[a]->get_netpoint(), zone[b]->get_netpoint(), gw[a], gw[b],
                      {sg4::LinkInRoute(W->uplink[a], sg4::LinkInRoute::Direction::UP),
                       sg4::LinkInRoute(W->uplink[b], sg4::LinkInRoute::Direction::DOWN)},
                      false);
    }
  }
  root->seal();
}

sg4::Host* anyHost() { return W->nicHost[0]; }

// A transfer between two NICs. SimGrid's host-to-host comms (Comm::sendto_async) are detached,
// and the engine keeps every detached comm in one list that it scans linearly at each
// completion: with thousands of transfers in flight that scan was most of the wall time (a
// 1,024-GPU run spent minutes in it). A mailbox comm is kept by the actors at its two ends
// instead. The comm runs between the sender's host and the receiving actor's host, so the
// sender moves to the source NIC's host first, and each NIC's mailbox has a permanent receiver
// on the NIC's host (receiverActor) that starts every comm at once and drains what arrived.
sg4::CommPtr startTransfer(int srcNode, int dstNode, int rail, uint64_t bytes) {
  static int payload;  // comms carry no data: only their size is simulated
  sg4::Host* from = W->nicHost[size_t(srcNode) * W->nics + rail];
  if (sg4::this_actor::get_host() != from) sg4::this_actor::set_host(from);
  W->transfers++;
  return W->nicMailbox[size_t(dstNode) * W->nics + rail]->put_async(&payload, bytes);
}

void receiverActor(sg4::Mailbox* mailbox) {
  mailbox->set_receiver(sg4::Actor::self());
  for (;;) {
    try {
      mailbox->get<int>();
    } catch (const simgrid::Exception&) {
      // A transfer the sender cancelled (a failed rail's, or a restart's): nothing to drain.
    }
  }
}

// ---------------------------------------------------------------------------------------------
// Connections.

// A chunk queued on a rail of a connection (RunSpec::sliceBytes: several messages of one
// connection in flight). A TCP connection's byte stream, like a queue pair's send queue, is
// FIFO: a chunk leaves after the ones posted on the same rail of the connection before it.
// SimGrid's flow model would instead share the link between all of them, so that a
// connection's messages all finished together and no slice ever got ahead. The rail's wire
// actor (wireActor) sends them one at a time.
struct WireJob {
  uint64_t bytes = 0;  // what is left to send (set again before a restart)
  sg4::CommPtr comm;   // once started
  bool done = false, cancelled = false, restart = false;
  // Its last byte left the wire; done follows after RunSpec::hostDelayS, and never comes first.
  bool sent = false;
  sg4::SemaphorePtr notify;  // the owning message's: released when done
};

struct Flight {
  sg4::CommPtr comm;  // direct: the transfer, started when the chunk was placed
  int rail;
  uint64_t bytes;
  double lastRemaining;
  uint64_t repairs;  // repairs of its two NICs when it was (re)started
  uint64_t epoch;    // the rail's failures on its connection when it was started
  std::shared_ptr<WireJob> job = nullptr;  // queued instead (see WireJob)
  uint64_t placedNs = 0, aheadBytes = 0;   // SustainedRate: when, and what the rail held then
};

double remainingOf(const Flight& f) {
  if (!f.job) return f.comm->get_remaining();
  if (f.job->sent) return 0;
  return f.job->comm ? f.job->comm->get_remaining() : double(f.job->bytes);
}

// Whether the flight moved at least kProgressBytes since it last did (the kernel's
// acknowledged-bytes counter, as each policy's progress check reads it); remembers where it stands.
bool advanced(Flight& f) {
  const double rem = remainingOf(f);
  if (rem > f.lastRemaining - kProgressBytes) return false;
  f.lastRemaining = rem;
  return true;
}

// A queued chunk that must not be sent (any more): its wire actor drops it.
void cancelJob(WireJob& job) {
  job.cancelled = true;
  if (job.comm && !job.done) job.comm->cancel();
}

void cancelFlight(const Flight& f) {
  if (!f.job) {
    f.comm->cancel();
    return;
  }
  cancelJob(*f.job);
}

uint64_t repairsOf(const struct Conn& c, int rail);

struct Conn {
  int src = 0, dst = 0;
  int comm = 0;  // communicator (nccl-2.30: one failed device per communicator)
  std::unique_ptr<RailStriper> striper;
  std::unique_ptr<RailHealth> health;  // ours
  uint64_t nextEvaluateNs = 0;
  bool failedOver = false;  // a first failover after the first down onset was recorded
  // Per rail, over every message in flight on the connection (the demo's pipelined slices put
  // several there at once): bytes held, and failures so far. A failure re-sends every chunk
  // the rail held, whichever message it belongs to, as the transport does.
  std::vector<uint64_t> held;
  std::vector<uint64_t> epoch;
  // RunSpec::Split::kSustainedRates, per rail: the estimate (0: none yet), when a sample of at
  // least SustainedRate::kRaiseMinBytes last came back, and whether a copy is out measuring it.
  std::vector<double> sustained;
  std::vector<double> lastLongSampleS;
  std::vector<bool> probeOut;
  // ours on TCP: the rail failed with this host's own link down (see kTcpSampleNs), and when
  // its link was last checked since.
  std::vector<bool> lostLocalLink;
  std::vector<uint64_t> linkCheckNs;
  // Queued mode (WireJob): per rail, the chunks waiting for the wire and their actor's wake-up.
  struct Wire {
    std::deque<std::shared_ptr<WireJob>> queue;
    sg4::SemaphorePtr work;
    // RunSpec::hostDelayS: chunks that left the wire, with when they count as arrived (in
    // order: one wire sends one chunk at a time), and their actor's wake-up.
    std::deque<std::pair<std::shared_ptr<WireJob>, double>> landing;
    sg4::SemaphorePtr landed;
  };
  std::vector<Wire> wires;  // empty until first used
  // nccl-2.30
  std::vector<uint64_t> lastProgressNs;
  std::vector<bool> ncclDown;
  std::vector<double> healthySinceS;
};

std::vector<std::unique_ptr<Conn>> gConns;

uint64_t repairsOf(const Conn& c, int rail) {
  return W->nicRepairs[size_t(c.src) * W->nics + rail] +
         W->nicRepairs[size_t(c.dst) * W->nics + rail];
}

Conn* makeConn(int src, int dst, int comm) {
  auto c = std::make_unique<Conn>();
  c->src = src;
  c->dst = dst;
  c->comm = comm;
  int k = W->nics;
  RailStriper::Config sc;
  sc.policy =
      W->spec.policy == PolicyKind::kOurs ? StripingPolicy::kMeasured : StripingPolicy::kEqualSplit;
  sc.initialBandwidth = W->spec.fabric.nicBytesPerSec;
  sc.maxBandwidth = W->spec.fabric.nicBytesPerSec * 4;
  // As the ibverbs transport does; the TCP transport leaves it off.
  if (W->spec.fabric.rdma) sc.loneSampleMinBytes = RailStriper::kRdmaLoneSampleMinBytes;
  if (W->spec.windowBytes > 0) {
    sc.windowBytes = W->spec.windowBytes;
    sc.startWindowBytes = std::max<uint64_t>(sc.startWindowBytes, W->spec.windowBytes / 4);
  }
  c->striper = std::make_unique<RailStriper>(sc);
  c->striper->reset(k);
  uint64_t t = nowNs();
  for (int r = 0; r < k; ++r) {
    c->striper->setMode(r, RailMode::kActive);
    c->striper->setBandwidth(r, W->spec.fabric.nicBytesPerSec);
  }
  if (W->spec.policy == PolicyKind::kOurs) {
    c->health = std::make_unique<RailHealth>();
    std::vector<RailHealth::RailInfo> info(k);
    for (int r = 0; r < k; ++r) info[r].name = "nic" + std::to_string(r);
    c->health->init(uint64_t(gConns.size()), "send", info, RailHealthConfig{}, t);
    for (int r = 0; r < k; ++r) c->health->connected(r, t);
  }
  c->held.assign(k, 0);
  c->sustained.assign(k, 0);
  c->lastLongSampleS.assign(k, 0);
  c->probeOut.assign(k, false);
  c->epoch.assign(k, 0);
  c->lostLocalLink.assign(k, false);
  c->linkCheckNs.assign(k, 0);
  c->lastProgressNs.assign(k, t);
  c->ncclDown.assign(k, false);
  c->healthySinceS.assign(k, 0);
  gConns.push_back(std::move(c));
  return gConns.back().get();
}

// A chunk's size for a message: the simulation's granularity (chunksPerRail per usable rail),
// never below 256 KiB so that a step of a large collective stays a few transfers per rail.
// As the plugin's chunk plan, the count is per usable rail: a message splits evenly over the
// rails that carry data.
uint64_t chunkBytes(uint64_t bytes, int chunksPerRail, int usableRails) {
  uint64_t c = bytes / uint64_t(std::max(1, chunksPerRail * usableRails));
  if (W->spec.pluginChunks) {
    // The plugin's chunk plan: whole below 128 KiB, else 64 KiB .. 1 MiB.
    if (bytes < (128u << 10)) return bytes;
    return std::clamp<uint64_t>(c, 64u << 10, 1u << 20);
  }
  return std::max<uint64_t>(c, 256u << 10);
}

// The job hangs (or gives up): nothing of it runs any more. Every other actor is killed (they
// wait on each other and would never finish), this one unwinds.
void stopJob() {
  W->stopped = true;
  W->stopAtS = nowS();
  if (gStopHook) {
    RunResult r;
    r.ok = true;
    r.stopped = true;
    r.stopAtS = W->stopAtS;
    r.transfers = W->transfers;
    r.railFailures = W->railFailures;
    r.railRejoins = W->railRejoins;
    r.splitMessages = W->splitMessages;
    r.splitMismatches = W->splitMismatches;
    r.windowBusBytes = W->windowBusBytes;
    gStopHook(r);  // does not return (the child reports and exits)
  }
  sg4::Actor::kill_all();
  throw JobStopped{};
}

void noteFailover(Conn& c) {
  if (W->firstDownS >= 0 && !c.failedOver && nowS() >= W->firstDownS) {
    c.failedOver = true;
    W->lastFailoverS = std::max(W->lastFailoverS, nowS());
  }
}

// Cancels this message's transfers on rails that failed since they started (the failure may
// have been noticed while another message of the connection was waiting) and puts their bytes
// back at the front of the queue.
void reclaim(Conn& c, std::vector<Flight>& flights, std::vector<sg4::CommPtr>& comms,
             std::deque<uint64_t>& pending) {
  for (size_t i = 0; i < flights.size();) {
    const Flight& f = flights[i];
    // A queued chunk that arrived before the failure is a completion, not a re-send.
    if (f.epoch == c.epoch[size_t(f.rail)] || (f.job && f.job->done)) {
      ++i;
      continue;
    }
    cancelFlight(f);
    c.held[size_t(f.rail)] -= f.bytes;
    pending.push_front(f.bytes);
    if (!f.job) comms.erase(comms.begin() + long(i));  // direct mode: in step with flights
    flights.erase(flights.begin() + long(i));
  }
}

// A rail of the connection failed: every chunk on it, of any message, is sent again.
void failRail(Conn& c, std::vector<Flight>& flights, std::vector<sg4::CommPtr>& comms,
              std::deque<uint64_t>& pending, int rail) {
  c.epoch[size_t(rail)]++;
  reclaim(c, flights, comms, pending);
}

// Ours: what SendComm::checkHealth does each time the proxy thread comes by.
void oursMaintain(Conn& c, std::vector<Flight>& flights, std::vector<sg4::CommPtr>& comms,
                  std::deque<uint64_t>& pending) {
  uint64_t t = nowNs();
  RailHealth& h = *c.health;
  RailStriper& s = *c.striper;
  // Progress: bytes moving on a transfer (the kernel's acknowledged-bytes counter).
  for (Flight& f : flights) {
    if (advanced(f)) h.failure(f.rail).onProgress(t);
  }
  const bool tcp = !W->spec.fabric.rdma;
  auto failHere = [&](int r, const char* why) {
    h.fail(r, t, why);
    if (gTrace)
      std::fprintf(stderr, "t=%.4f conn %d->%d rail %d failed (%s, stalled %.3f s)\n", nowS(),
                   c.src, c.dst, r, why, h.failure(r).stalledForNs(t) * 1e-9);
    s.onRailLost(r);
    s.setMode(r, RailMode::kDown);
    failRail(c, flights, comms, pending, r);
    W->railFailures++;
    noteFailover(c);
  };
  for (int r = 0; r < W->nics; ++r) {
    if (!h.live(r)) {
      if (c.lostLocalLink[size_t(r)] && t - c.linkCheckNs[size_t(r)] >= kLinkCheckNs) {
        c.linkCheckNs[size_t(r)] = t;
        if (nicUp(c.src, r)) {
          c.lostLocalLink[size_t(r)] = false;
          h.failback(r).retryNow(t);
        }
      }
      if (h.failback(r).due(t)) {
        h.failback(r).onAttemptStarted();
        // A re-connection and handshake over the rail's two NICs: it succeeds when both work.
        if (nicUp(c.src, r) && nicUp(c.dst, r)) {
          double peers[RailStriper::kMaxRails];
          int n = 0;
          for (int o = 0; o < W->nics; ++o) {
            if (o != r && h.live(o)) peers[n++] = s.bandwidth(o);
          }
          double start = W->spec.fabric.nicBytesPerSec;
          if (n > 0) {
            std::nth_element(peers, peers + n / 2, peers + n);
            start = peers[n / 2] * kRejoinShare;
          }
          h.rejoin(r, t);
          if (gTrace)
            std::fprintf(stderr, "t=%.4f conn %d->%d rail %d rejoined\n", nowS(), c.src, c.dst, r);
          s.setMode(r, h.mode(r));
          s.setBandwidth(r, start);
          W->railRejoins++;
        } else {
          h.failback(r).onAttemptFailed(t);
        }
      }
      continue;
    }
    FailureDetector& fd = h.failure(r);
    const uint64_t held = c.held[size_t(r)];
    fd.setOutstanding(held > 0, t);
    if (held == 0) continue;
    if (tcp && !nicUp(c.src, r) && fd.stalledForNs(t) > kTcpSampleNs) {
      failHere(r, "this host's link is down");
      c.lostLocalLink[size_t(r)] = true;
      c.linkCheckNs[size_t(r)] = t;
      continue;
    }
    double bw = s.bandwidth(r);
    if (fd.failed(t, held, bw) && !h.stallBlamesRail(r, t)) {
      // As the transport does: ask the peer for a sign of life over another live rail (a small
      // control message); its answer is evidence that the peer consumes data, so the stall is
      // this rail's. A silent peer leaves every rail to peerStallNs.
      for (int q = 0; q < W->nics; ++q) {
        if (q == r || !h.live(q)) continue;
        sg4::CommPtr ping = startTransfer(c.src, c.dst, q, 64);
        try {
          ping->wait_for(kPollS);
          t = nowNs();
          h.failure(q).onProgress(t);
        } catch (const simgrid::TimeoutException&) {
          ping->cancel();
          t = nowNs();
        }
        break;
      }
    }
    if (fd.failed(t, held, bw) && h.stallBlamesRail(r, t)) failHere(r, "no progress");
  }
  if (t >= c.nextEvaluateNs) {
    c.nextEvaluateNs = t + kEvaluateNs;
    double bw[RailStriper::kMaxRails];
    uint64_t samples[RailStriper::kMaxRails];
    for (int r = 0; r < W->nics; ++r) {
      bw[r] = s.bandwidth(r);
      samples[r] = s.busySamples(r);
    }
    h.evaluate(t, bw, samples);
    for (int r = 0; r < W->nics; ++r) s.setMode(r, h.mode(r));
  }
}

// NCCL 2.30: a rail whose transfers made no progress for the RC retry budget gets a completion
// error and fails over; a repaired NIC is re-admitted.
void ncclMaintain(Conn& c, std::vector<Flight>& flights, std::vector<sg4::CommPtr>& comms,
                  std::deque<uint64_t>& pending) {
  uint64_t t = nowNs();
  const NcclResilConfig& cfg = W->spec.nccl;
  for (Flight& f : flights) {
    if (advanced(f)) c.lastProgressNs[f.rail] = t;
  }
  for (int r = 0; r < W->nics; ++r) {
    if (c.ncclDown[r]) {
      bool up = nicUp(c.src, r) && nicUp(c.dst, r);
      if (!up) {
        c.healthySinceS[r] = -1;
      } else if (c.healthySinceS[r] < 0) {
        c.healthySinceS[r] = nowS();
      } else if (nowS() - c.healthySinceS[r] >= cfg.failbackS) {
        c.ncclDown[r] = false;
        c.striper->setMode(r, RailMode::kActive);
        W->railRejoins++;
      }
      continue;
    }
    if (c.held[size_t(r)] == 0) {
      c.lastProgressNs[r] = t;
      continue;
    }
    if (double(t - c.lastProgressNs[r]) * 1e-9 >= cfg.detectS) {
      // One failed device per communicator: a second one is beyond what it recovers from.
      std::set<int>& failed = W->ncclFailed[c.comm];
      int dev = (nicUp(c.src, r) ? c.dst : c.src) * W->nics + r;
      failed.insert(dev);
      if (failed.size() > 1) stopJob();
      c.ncclDown[r] = true;
      c.healthySinceS[r] = -1;
      c.striper->onRailLost(r);
      c.striper->setMode(r, RailMode::kDown);
      failRail(c, flights, comms, pending, r);
      W->railFailures++;
      noteFailover(c);
    }
  }
}

// Sends the chunks queued on one rail of a connection, one at a time (WireJob). A daemon: it
// waits for work for the rest of the run.
void wireActor(Conn* c, int rail) {
  Conn::Wire& w = c->wires[size_t(rail)];
  const size_t nic = size_t(c->src) * size_t(W->nics) + size_t(rail);
  const double burst = W->spec.fabric.shaperBurstBytes;
  for (;;) {
    w.work->acquire();
    std::shared_ptr<WireJob> job = w.queue.front();
    w.queue.pop_front();
    while (!job->cancelled) {
      // The shaper's bucket (FabricSpec::shaperBurstBytes): what an idle NIC saved up leaves
      // at once, the rest at the NIC's rate. A NIC that is sending keeps its bucket empty.
      uint64_t atOnce = 0;
      if (burst > 0 && nicUp(c->src, rail)) {
        double& tokens = W->nicTokens[nic];
        if (W->nicSending[nic] == 0) {
          const double rate = W->spec.fabric.nicBytesPerSec * W->nicFactor[nic];
          tokens = std::min(burst, tokens + rate * (nowS() - W->nicTokensAtS[nic]));
        }
        atOnce = uint64_t(std::min(tokens, double(job->bytes)));
        tokens -= double(atOnce);
        W->nicTokensAtS[nic] = nowS();
      }
      W->nicSending[nic]++;
      job->comm = startTransfer(c->src, c->dst, rail, job->bytes - atOnce);
      bool ok = false;
      try {
        job->comm->wait();
        ok = true;
      } catch (const simgrid::Exception&) {
        // Cancelled: dropped (its rail failed), or restarted (its link came back).
      }
      W->nicSending[nic]--;
      if (job->bytes > atOnce) W->nicTokens[nic] = 0;  // what went at the rate drained it
      W->nicTokensAtS[nic] = nowS();
      if (ok) {
        job->sent = true;
        if (W->spec.hostDelayS <= 0) {
          job->done = true;
          job->notify->release();
        } else {
          // The wire is free for the next chunk meanwhile.
          w.landing.emplace_back(job, nowS() + W->spec.hostDelayS);
          w.landed->release();
        }
        break;
      }
      if (!job->restart) break;
      job->restart = false;
    }
  }
}

// RunSpec::hostDelayS: marks the connection's chunks on `rail` arrived once their hosts' part is
// over.
void landingActor(Conn* c, int rail) {
  Conn::Wire& w = c->wires[size_t(rail)];
  for (;;) {
    w.landed->acquire();
    auto [job, atS] = w.landing.front();
    w.landing.pop_front();
    if (atS > nowS()) sg4::this_actor::sleep_until(atS);
    if (job->cancelled) continue;
    job->done = true;
    job->notify->release();
  }
}

std::shared_ptr<WireJob> queueOnWire(Conn& c, int rail, uint64_t bytes,
                                     const sg4::SemaphorePtr& notify) {
  if (c.wires.empty()) {
    c.wires.resize(size_t(W->nics));
    for (int r = 0; r < W->nics; ++r) {
      c.wires[size_t(r)].work = sg4::Semaphore::create(0);
      c.wires[size_t(r)].landed = sg4::Semaphore::create(0);
      Conn* conn = &c;
      sg4::Host* host = W->nicHost[size_t(c.src) * W->nics + r];
      sg4::Actor::create("wire", host, [conn, r]() { wireActor(conn, r); })->daemonize();
      if (W->spec.hostDelayS > 0) {
        sg4::Actor::create("landing", host, [conn, r]() { landingActor(conn, r); })->daemonize();
      }
    }
  }
  auto job = std::make_shared<WireJob>();
  job->bytes = bytes;
  job->notify = notify;
  c.wires[size_t(rail)].queue.push_back(job);
  c.wires[size_t(rail)].work->release();
  return job;
}

// SustainedRate: a sample of `bytes` moved in `elapsedNs` on `rail`; `probe`: by a copy.
void noteSustainedSample(Conn& c, int rail, uint64_t bytes, uint64_t elapsedNs, bool probe) {
  if (elapsedNs == 0) return;
  const double v = double(bytes) * 1e9 / double(elapsedNs);
  double& e = c.sustained[size_t(rail)];
  bool take = e <= 0 || v < e;  // a first sample, or a lower one
  if (!take && probe) {
    double peer = 0;
    for (int q = 0; q < W->nics; ++q) {
      if (q != rail) peer = std::max(peer, c.sustained[size_t(q)]);
    }
    take = v >= SustainedRate::kProbeHealFraction * peer;
  }
  if (!take && !probe) take = bytes >= SustainedRate::kRaiseMinBytes;
  if (take) e = e <= 0 ? v : (1 - SustainedRate::kAlpha) * e + SustainedRate::kAlpha * v;
  if (probe || bytes >= SustainedRate::kRaiseMinBytes) c.lastLongSampleS[size_t(rail)] = nowS();
}

// SustainedRate: a copy of SustainedRate::kProbeBytes queued on `rail`, measured when it lands;
// it holds no message back, and is dropped if it has not landed in kProbeTimeoutS (its rail
// failed).
void sendProbeCopy(Conn& c, int rail) {
  const uint64_t bytes = SustainedRate::kProbeBytes;
  c.probeOut[size_t(rail)] = true;
  const uint64_t ahead = c.held[size_t(rail)];
  c.held[size_t(rail)] += bytes;
  const uint64_t placedNs = nowNs();
  sg4::SemaphorePtr landed = sg4::Semaphore::create(0);
  std::shared_ptr<WireJob> job = queueOnWire(c, rail, bytes, landed);
  Conn* conn = &c;
  sg4::Actor::create("probe", anyHost(), [conn, rail, job, landed, ahead, placedNs, bytes]() {
    const bool timedOut = landed->acquire_timeout(SustainedRate::kProbeTimeoutS);
    conn->held[size_t(rail)] -= bytes;
    conn->probeOut[size_t(rail)] = false;
    if (timedOut) {
      cancelJob(*job);
      return;
    }
    noteSustainedSample(*conn, rail, ahead + bytes, nowNs() - placedNs, true);
  })->daemonize();
}

// RunSpec::split: `bytes` split over the connection's usable rails in proportion to their rates,
// so that every rail used finishes what it holds and its piece at the same time (water-filling);
// (bytes, rail) pieces, none when no rail is usable. kSustainedRates also sends its copies.
std::vector<std::pair<uint64_t, int>> splitAtRates(Conn& c, const RailStriper& s, uint64_t bytes) {
  const bool trueRates = W->spec.split == RunSpec::Split::kTrueRates;
  const uint64_t minPiece = W->spec.splitMinPieceBytes;
  std::vector<std::pair<uint64_t, int>> out;
  std::vector<int> rails;
  std::vector<double> rate(size_t(W->nics), 0.0);
  for (int r = 0; r < W->nics; ++r) {
    if (s.mode(r) == RailMode::kDown) continue;
    if (trueRates) {
      if (!nicUp(c.src, r) || !nicUp(c.dst, r)) continue;
      rate[size_t(r)] =
          W->spec.fabric.nicBytesPerSec * std::min(W->nicFactor[size_t(c.src * W->nics + r)],
                                                   W->nicFactor[size_t(c.dst * W->nics + r)]);
    } else {
      // Until its first sample a rail counts at the nominal rate.
      const double e = c.sustained[size_t(r)];
      rate[size_t(r)] = e > 0 ? e : W->spec.fabric.nicBytesPerSec;
    }
    rails.push_back(r);
  }
  auto busyUntil = [&](int r) { return double(c.held[size_t(r)]) / rate[size_t(r)]; };
  while (!rails.empty()) {
    std::sort(rails.begin(), rails.end(),
              [&](int a, int b) { return busyUntil(a) < busyUntil(b); });
    // The finish time T of the k rails that are free soonest: their rates times (T - when each
    // is free) add up to the message; more rails join while T passes their own free time.
    double num = double(bytes), den = 0, finish = 0;
    size_t k = 0;
    for (; k < rails.size(); ++k) {
      num += double(c.held[size_t(rails[k])]);
      den += rate[size_t(rails[k])];
      finish = num / den;
      if (k + 1 == rails.size() || finish <= busyUntil(rails[k + 1])) break;
    }
    rails.resize(k + 1);
    std::vector<uint64_t> piece(rails.size());
    uint64_t sum = 0;
    size_t smallest = 0;
    for (size_t i = 0; i < rails.size(); ++i) {
      const double v = (finish - busyUntil(rails[i])) * rate[size_t(rails[i])];
      piece[i] = std::min(bytes, uint64_t(std::max(0.0, v)));
      sum += piece[i];
      if (piece[i] < piece[smallest]) smallest = i;
    }
    if (rails.size() > 1 && piece[smallest] < std::min(minPiece, bytes)) {
      rails.erase(rails.begin() + long(smallest));
      continue;
    }
    // Rounding: the first rail (free soonest) takes the difference.
    if (sum < bytes) piece[0] += bytes - sum;
    for (size_t i = 0; sum > bytes && i < piece.size(); ++i) {
      const uint64_t cut = std::min(piece[i], sum - bytes);
      piece[i] -= cut;
      sum -= cut;
    }
    uint64_t placed = 0;
    for (size_t i = 0; i < rails.size(); ++i) {
      if (piece[i] > 0) out.emplace_back(piece[i], rails[i]);
      placed += piece[i];
    }
    // Counted for the reproduction checks: a split that lost or added bytes would still let
    // the message complete.
    W->splitMessages++;
    if (placed != bytes) W->splitMismatches++;
    break;
  }
  if (!trueRates && !out.empty()) {
    for (int r = 0; r < W->nics; ++r) {
      if (s.mode(r) == RailMode::kDown || c.probeOut[size_t(r)]) continue;
      bool inSplit = false;
      for (const auto& p : out) inSplit = inSplit || p.second == r;
      if (inSplit || nowS() - c.lastLongSampleS[size_t(r)] < SustainedRate::kProbeEveryS) continue;
      // Behind what the rail already holds; no piece of this message waits for the copy.
      sendProbeCopy(c, r);
    }
  }
  return out;
}

// Sends `bytes` over the connection and returns when every chunk has arrived.
void sendMessage(Conn& c, uint64_t bytes, int chunksPerRail) {
  if (bytes == 0) return;
  const PolicyKind policy = W->spec.policy;
  int usable = 0;
  for (int r = 0; r < W->nics; ++r) usable += c.striper->mode(r) != RailMode::kDown;
  uint64_t chunk = chunkBytes(bytes, chunksPerRail, usable);
  std::deque<uint64_t> pending;
  for (uint64_t off = 0; off < bytes; off += chunk) pending.push_back(std::min(chunk, bytes - off));
  std::vector<Flight> flights;
  std::vector<sg4::CommPtr> comms;  // direct mode: flights' transfers, in the same order
  RailStriper& s = *c.striper;
  const bool queued = W->spec.sliceBytes > 0;
  const sg4::SemaphorePtr arrived = queued ? sg4::Semaphore::create(0) : nullptr;
  while (!pending.empty() || !flights.empty()) {
    if (W->stopped) throw JobStopped{};
    reclaim(c, flights, comms, pending);
    if (policy == PolicyKind::kOurs) oursMaintain(c, flights, comms, pending);
    if (policy == PolicyKind::kNcclResilient) ncclMaintain(c, flights, comms, pending);
    uint64_t t = nowNs();
    std::vector<std::pair<uint64_t, int>> known;  // RunSpec::split
    if (policy == PolicyKind::kOurs && W->spec.split != RunSpec::Split::kNone && !pending.empty()) {
      uint64_t left = 0;
      for (uint64_t b : pending) left += b;
      known = splitAtRates(c, s, left);
      if (!known.empty()) pending.clear();
    }
    for (size_t k = 0; !pending.empty() || k < known.size(); ++k) {
      uint64_t sz = 0;
      int r = -1;
      if (k < known.size()) {
        sz = known[k].first;
        r = known[k].second;
      } else {
        sz = pending.front();
        r = s.pick(sz, t, 0, sz == bytes);  // one chunk: the whole message, as in the plugin
        if (r < 0) break;
        pending.pop_front();
      }
      s.onAssigned(r, sz, t);
      if (c.health) c.health->failure(r).setOutstanding(true, t);
      if (c.held[size_t(r)] == 0) c.lastProgressNs[r] = t;
      c.held[size_t(r)] += sz;
      Flight f{nullptr, r, sz, double(sz), repairsOf(c, r), c.epoch[size_t(r)]};
      f.placedNs = t;
      f.aheadBytes = c.held[size_t(r)] - sz;
      if (queued) {
        f.job = queueOnWire(c, r, sz, arrived);
      } else {
        f.comm = startTransfer(c.src, c.dst, r, sz);
        comms.push_back(f.comm);
      }
      flights.push_back(f);
    }
    if (flights.empty()) {
      // No usable rail: wait for a re-connection.
      sg4::this_actor::sleep_for(kPollS);
      continue;
    }
    // A link that came back: SimGrid keeps a transfer started on the dead link at its old
    // rate, while TCP would retransmit; restart what is left of it on the same rail (transport
    // level, no policy involved).
    for (size_t i = 0; i < flights.size(); ++i) {
      Flight& f = flights[i];
      uint64_t rep = repairsOf(c, f.rail);
      if (rep == f.repairs || !nicUp(c.src, f.rail) || !nicUp(c.dst, f.rail)) continue;
      f.repairs = rep;
      if (f.job) {
        // Only the chunk on the wire is stuck; the ones queued behind it start afresh.
        if (f.job->sent || !f.job->comm) continue;
        const double rem = std::max(1.0, f.job->comm->get_remaining());
        f.job->bytes = uint64_t(rem);
        f.job->restart = true;
        f.job->comm->cancel();
        f.lastRemaining = rem;
        continue;
      }
      double rem = std::max(1.0, f.comm->get_remaining());
      f.comm->cancel();
      f.comm = startTransfer(c.src, c.dst, f.rail, uint64_t(rem));
      f.lastRemaining = rem;
      comms[i] = f.comm;
    }
    double timeout = -1;
    if (policy == PolicyKind::kOurs) timeout = kPollS;
    if (policy == PolicyKind::kNcclResilient) timeout = 0.25;
    if (policy == PolicyKind::kStatic) {
      // Without failover, a transfer that makes no progress for the transport's retry budget
      // errors the communicator: the job stops (a shorter outage only delays it).
      uint64_t tn = nowNs();
      for (Flight& f : flights) {
        if (advanced(f)) c.lastProgressNs[f.rail] = tn;
        if (double(tn - c.lastProgressNs[f.rail]) * 1e-9 >= W->spec.nccl.detectS) {
          if (gTrace) {
            std::fprintf(stderr, "t=%.4f conn %d->%d rail %d: no progress since %.4f, stop\n",
                         nowS(), c.src, c.dst, f.rail, c.lastProgressNs[f.rail] * 1e-9);
          }
          stopJob();
        }
      }
      timeout = 0.25;
    }
    ssize_t idx = -1;
    if (queued) {
      auto firstDone = [&]() -> ssize_t {
        for (size_t i = 0; i < flights.size(); ++i) {
          if (flights[i].job->done) return ssize_t(i);
        }
        return -1;
      };
      idx = firstDone();
      if (idx < 0) {
        // Each completion releases the semaphore once; completions taken without waiting
        // leave it ahead, which costs one more pass of this loop, nothing else.
        if (timeout < 0) {
          arrived->acquire();
        } else {
          arrived->acquire_timeout(timeout);
        }
        idx = firstDone();
      }
    } else {
      idx = sg4::Comm::wait_any_for(comms, timeout);
    }
    if (idx < 0) continue;
    Flight done = flights[size_t(idx)];
    flights.erase(flights.begin() + idx);
    if (!queued) comms.erase(comms.begin() + idx);
    uint64_t t2 = nowNs();
    c.held[size_t(done.rail)] -= done.bytes;
    s.onCompleted(done.rail, done.bytes, t2);
    if (W->spec.split == RunSpec::Split::kSustainedRates && t2 > done.placedNs) {
      noteSustainedSample(c, done.rail, done.aheadBytes + done.bytes, t2 - done.placedNs, false);
    }
    if (c.health) {
      c.health->failure(done.rail).onProgress(t2);
      if (c.held[size_t(done.rail)] == 0) c.health->failure(done.rail).setOutstanding(false, t2);
    }
    c.lastProgressNs[done.rail] = t2;
  }
}

// ---------------------------------------------------------------------------------------------
// Collectives. A ring is a list of connections, conn j from member j to member j+1: NCCL's ring
// steps, each member forwarding what it received in the previous step.

struct Ring {
  std::vector<Conn*> conns;
};

// Runs `steps` ring steps of `stepBytes` on every ring at once; returns when all are done.
void runRings(const std::vector<Ring>& rings, int steps, uint64_t stepBytes, int chunksPerRail) {
  size_t total = 0;
  for (const Ring& r : rings) total += r.conns.size();
  sg4::SemaphorePtr done = sg4::Semaphore::create(0);
  for (const Ring& ring : rings) {
    size_t n = ring.conns.size();
    auto sems = std::make_shared<std::vector<sg4::SemaphorePtr>>();
    for (size_t j = 0; j < n; ++j) sems->push_back(sg4::Semaphore::create(0));
    for (size_t j = 0; j < n; ++j) {
      Conn* c = ring.conns[j];
      sg4::Actor::create("ring", anyHost(), [=]() {
        try {
          for (int s = 0; s < steps; ++s) {
            if (s > 0) (*sems)[j]->acquire();
            sendMessage(*c, stepBytes, chunksPerRail);
            if (gTrace && j == 0) std::fprintf(stderr, "t=%.6f ring step %d done\n", nowS(), s);
            (*sems)[(j + 1) % n]->release();
          }
        } catch (const JobStopped&) {
        }
        done->release();
      });
    }
  }
  for (size_t i = 0; i < total; ++i) done->acquire();
  if (W->stopped) throw JobStopped{};
}

// The demo's collectives (bench/demo/collectives.cc, RunSpec::sliceBytes) over a path of
// connections: each connection's data in slices, `depth` slices at a time (a group), each slice
// through every step on its own: a member forwards slice k as soon as it has it, whatever the
// other slices do. A ring (`closed`: the last connection feeds the first) takes `steps` steps; a
// chain (broadcast) one step per connection, each after the connection before it.
//  - A connection posts its messages in one order, steps then slices within a step, as the
//    demo's ranks do (NCCL's net API matches receives to sends in posting order): a slice that
//    is ready waits until the one before it was posted.
//  - A rank runs its groups one after the other: it posts group g+1 once its own sends and
//    receives of group g are done. A send also waits for its receiver to post the matching
//    receive (the transport's clear-to-send). So connection p starts group g+1 once
//    connections p-1, p and p+1 finished group g.
void runSliced(const std::vector<std::vector<Conn*>>& paths, bool closed, int steps,
               uint64_t segBytes, uint64_t sliceBytes, int depth, int chunksPerRail) {
  const size_t slices = size_t(std::max<uint64_t>(1, (segBytes + sliceBytes - 1) / sliceBytes));
  const size_t groups = (slices + size_t(depth) - 1) / size_t(depth);
  auto inGroup = [=](size_t g) { return std::min(slices - g * size_t(depth), size_t(depth)); };
  sg4::SemaphorePtr done = sg4::Semaphore::create(0);
  size_t actors = 0;
  for (const std::vector<Conn*>& path : paths) {
    const size_t m = path.size();
    // The connections whose group-g work gates connection p's group g+1 (see above).
    auto neighbours = [=](size_t p) {
      std::vector<size_t> q;
      if (closed || p > 0) q.push_back((p + m - 1) % m);
      q.push_back(p);
      if ((closed || p + 1 < m) && (p + 1) % m != (p + m - 1) % m) q.push_back((p + 1) % m);
      return q;
    };
    // Per group g, connection p, slice k (index into the group):
    //  arrived: slice k reached the sender of connection p (previous step);
    //  start: counts the group g-1 slices done on p's neighbours;
    //  turn[g][p][i]: connection p may post its i-th message of group g.
    struct Sems {
      std::vector<std::vector<std::vector<sg4::SemaphorePtr>>> arrived, start, turn;
    };
    auto sem = std::make_shared<Sems>();
    for (auto* v : {&sem->arrived, &sem->start, &sem->turn}) v->resize(groups);
    for (size_t g = 0; g < groups; ++g) {
      const size_t n = inGroup(g);
      for (size_t p = 0; p < m; ++p) {
        auto make = [](size_t count) {
          std::vector<sg4::SemaphorePtr> v;
          for (size_t i = 0; i < count; ++i) v.push_back(sg4::Semaphore::create(0));
          return v;
        };
        sem->arrived[g].push_back(make(n));
        sem->start[g].push_back(make(n));
        sem->turn[g].push_back(make(size_t(steps) * n));
      }
    }
    for (size_t g = 0; g < groups; ++g) {
      const size_t n = inGroup(g);
      for (size_t p = 0; p < m; ++p) {
        // What gates this group here: every slice of the previous group on each neighbour.
        const size_t gate = g == 0 ? 0 : inGroup(g - 1) * neighbours(p).size();
        for (size_t k = 0; k < n; ++k) {
          const uint64_t first = (g * size_t(depth) + k) * sliceBytes;
          const uint64_t bytes = std::min(sliceBytes, segBytes - std::min(segBytes, first));
          Conn* c = path[p];
          ++actors;
          sg4::Actor::create("slice", anyHost(), [=]() {
            try {
              for (size_t i = 0; i < gate; ++i) sem->start[g][p][k]->acquire();
              const size_t posts = size_t(steps) * n;
              for (int st = 0; st < steps; ++st) {
                if (st > 0 || (!closed && p > 0)) sem->arrived[g][p][k]->acquire();
                const size_t i = size_t(st) * n + k;
                if (i > 0) sem->turn[g][p][i]->acquire();
                if (i + 1 < posts) sem->turn[g][p][i + 1]->release();
                sendMessage(*c, bytes, chunksPerRail);
                if (closed || p + 1 < m) sem->arrived[g][(p + 1) % m][k]->release();
              }
              if (g + 1 < groups) {
                // This slice is done on p: it counts towards the next group of every
                // connection p gates, which are p's own neighbours (the relation is symmetric
                // on a ring and on a chain).
                for (size_t q : neighbours(p)) {
                  for (size_t k2 = 0; k2 < inGroup(g + 1); ++k2)
                    sem->start[g + 1][q][k2]->release();
                }
              }
            } catch (const JobStopped&) {
            }
            done->release();
          });
        }
      }
    }
  }
  for (size_t i = 0; i < actors; ++i) done->acquire();
  if (W->stopped) throw JobStopped{};
}

// Every connection sends its bytes at once (pipeline sends, all-to-all).
void runPointToPoint(const std::vector<Conn*>& conns, uint64_t bytes, int chunksPerRail) {
  sg4::SemaphorePtr done = sg4::Semaphore::create(0);
  for (Conn* c : conns) {
    sg4::Actor::create("p2p", anyHost(), [=]() {
      try {
        sendMessage(*c, bytes, chunksPerRail);
      } catch (const JobStopped&) {
      }
      done->release();
    });
  }
  for (size_t i = 0; i < conns.size(); ++i) done->acquire();
  if (W->stopped) throw JobStopped{};
}

// Ring all-reduce = reduce-scatter (n-1 steps) + all-gather (n-1 steps), each step S/n.
void ringCollective(const std::vector<Ring>& rings, uint64_t bytes, const std::string& algo,
                    int chunksPerRail) {
  size_t n = rings.empty() ? 1 : rings[0].conns.size();
  if (n < 2) return;
  int steps = algo == "ring" ? int(2 * (n - 1)) : int(n - 1);
  if (W->spec.sliceBytes > 0) {
    std::vector<std::vector<Conn*>> paths;
    for (const Ring& r : rings) paths.push_back(r.conns);
    runSliced(paths, true, steps, bytes / n, W->spec.sliceBytes, std::max(1, W->spec.sliceDepth),
              chunksPerRail);
    return;
  }
  runRings(rings, steps, bytes / n, chunksPerRail);
}

// The demo's mix (RunSpec::cycleCollectives): `kind` as the demo's collective engine runs it
// with ring algorithms. Returns the call's bus bytes (nccl-tests' convention, as the demo's).
double demoCollective(const std::vector<Ring>& rings, const std::string& kind, uint64_t bytes,
                      int root, int chunksPerRail) {
  const size_t n = rings.empty() ? 1 : rings[0].conns.size();
  if (n < 2) return 0;
  const double nd = double(n);
  if (kind == "broadcast") {
    // A chain root -> root+1 -> ... -> root-1, the whole buffer in slices.
    std::vector<std::vector<Conn*>> paths;
    for (const Ring& r : rings) {
      std::vector<Conn*> chain;
      for (size_t h = 0; h + 1 < n; ++h) chain.push_back(r.conns[(size_t(root) + h) % n]);
      paths.push_back(chain);
    }
    runSliced(paths, false, 1, bytes, W->spec.sliceBytes, std::max(1, W->spec.sliceDepth),
              chunksPerRail);
    return double(bytes);
  }
  // all-reduce: reduce-scatter then all-gather (2(n-1) steps); all-gather and reduce-scatter:
  // n-1 steps; each step one rank's block of bytes/n.
  ringCollective(rings, bytes, kind == "allreduce" ? "ring" : "allgather", chunksPerRail);
  return (kind == "allreduce" ? 2 : 1) * (nd - 1) / nd * double(bytes);
}

// Tree all-reduce (NCCL's double binary tree, approximated by two pipelined binary trees over
// the members, each carrying half the data): pieces go up (reduce) then down (broadcast); a
// member forwards a piece once it has it from all its children.
void treeAllReduce(const std::vector<std::vector<int>>& groups,
                   std::map<std::pair<int, int>, Conn*>& edge, uint64_t bytes, int pieces,
                   int chunksPerRail) {
  sg4::SemaphorePtr done = sg4::Semaphore::create(0);
  size_t actors = 0;
  for (const std::vector<int>& members : groups) {
    int n = int(members.size());
    if (n < 2) continue;
    for (int tree = 0; tree < 2; ++tree) {
      // Tree `tree` over positions: parent(i) = (i-1)/2 on a rotated order so that the two
      // trees have different interior members.
      auto at = [&, n, tree](int pos) { return members[(pos + tree * (n / 2)) % n]; };
      uint64_t half = bytes / 2;
      uint64_t piece = std::max<uint64_t>(1, half / uint64_t(pieces));
      // Per position: semaphore counting pieces received from children (up) and from parent
      // (down).
      auto upSem = std::make_shared<std::vector<sg4::SemaphorePtr>>();
      auto downSem = std::make_shared<std::vector<sg4::SemaphorePtr>>();
      for (int i = 0; i < n; ++i) {
        upSem->push_back(sg4::Semaphore::create(0));
        downSem->push_back(sg4::Semaphore::create(0));
      }
      for (int i = 0; i < n; ++i) {
        int children = (2 * i + 1 < n) + (2 * i + 2 < n);
        Conn* toParent = i > 0 ? edge[{at(i), at((i - 1) / 2)}] : nullptr;
        std::vector<Conn*> toChildren;
        std::vector<int> childPos;
        for (int cpos : {2 * i + 1, 2 * i + 2}) {
          if (cpos < n) {
            toChildren.push_back(edge[{at(i), at(cpos)}]);
            childPos.push_back(cpos);
          }
        }
        // The up actor: piece p goes to the parent once every child delivered piece p.
        sg4::Actor::create("tree-up", anyHost(), [=]() {
          try {
            for (int p = 0; p < pieces; ++p) {
              for (int k = 0; k < children; ++k) (*upSem)[i]->acquire();
              if (toParent != nullptr) {
                sendMessage(*toParent, piece, chunksPerRail);
                (*upSem)[(i - 1) / 2]->release();
              } else {
                (*downSem)[0]->release();  // the root has the reduced piece
              }
            }
          } catch (const JobStopped&) {
          }
          done->release();
        });
        // The down actor: piece p goes to the children once it came from the parent.
        sg4::Actor::create("tree-down", anyHost(), [=]() {
          try {
            for (int p = 0; p < pieces; ++p) {
              (*downSem)[i]->acquire();
              for (size_t k = 0; k < toChildren.size(); ++k) {
                sendMessage(*toChildren[k], piece, chunksPerRail);
                (*downSem)[childPos[k]]->release();
              }
            }
          } catch (const JobStopped&) {
          }
          done->release();
        });
        actors += 2;
      }
    }
  }
  for (size_t i = 0; i < actors; ++i) done->acquire();
  if (W->stopped) throw JobStopped{};
}

// ---------------------------------------------------------------------------------------------
// Faults.

void faultActor(Fault f) {
  sg4::this_actor::sleep_for(f.onsetS);
  switch (f.kind) {
    case FaultKind::kGray:
      setNicRate(f.node, f.nic, f.factor);
      break;
    case FaultKind::kSpine: {
      sg4::SplitDuplexLink* l = W->uplink[size_t(f.nic) % W->uplink.size()];
      l->get_link_up()->set_bandwidth(W->uplinkRate * f.factor);
      l->get_link_down()->set_bandwidth(W->uplinkRate * f.factor);
      break;
    }
    case FaultKind::kDown:
      setNicRate(f.node, f.nic, 0);
      break;
    case FaultKind::kFailHeal:
      setNicRate(f.node, f.nic, 0);
      sg4::this_actor::sleep_for(f.durationS);
      setNicRate(f.node, f.nic, 1);
      break;
    case FaultKind::kFlap:
      for (;;) {
        setNicRate(f.node, f.nic, 0);
        sg4::this_actor::sleep_for(f.durationS);
        setNicRate(f.node, f.nic, 1);
        sg4::this_actor::sleep_for(std::max(0.0, f.periodS - f.durationS));
      }
  }
}

// ---------------------------------------------------------------------------------------------
// Workloads.

// The tuner's view of the DP all-reduce: NCCL's cost table for the declared topology as the
// prior, the bandit's decision per call, the simulated time as its measurement.
struct Tuner {
  std::unique_ptr<tuner::BanditPolicy> policy;
  tuner::ContextDecision current;
  std::unique_ptr<tuner::ExplorationCounters> counters;
  std::unique_ptr<tuner::model::CostModel> model;
  std::string lastChoice;
};

struct Dense {
  int tp = 8, pp = 1, dp = 1, ep = 1;
  std::vector<Ring> dpRings;
  std::vector<std::vector<int>> dpGroups;  // node lists (tree)
  std::map<std::pair<int, int>, Conn*> dpEdge;
  std::vector<Conn*> ppFwd, ppBwd;                   // by stage boundary, flattened
  std::vector<std::vector<Conn*>> ppFwdAt, ppBwdAt;  // [stage] -> conns leaving that stage
  std::vector<std::vector<Conn*>> a2aAt;             // [stage] -> all-to-all conns
  double fwdS = 0, bwdS = 0;                         // compute per micro-batch and stage (incl. TP)
  uint64_t actBytes = 0, a2aBytes = 0, gradBytes = 0;
};

double tpAllReduceS(uint64_t bytes, int tp) {
  const FabricSpec& f = W->spec.fabric;
  if (tp < 2) return 0;
  return 2.0 * (tp - 1) * f.nvlinkLatencyS +
         2.0 * (tp - 1) / tp * double(bytes) / f.nvlinkBytesPerSec;
}

Dense buildDense() {
  const RunSpec& s = W->spec;
  const ModelSpec& m = s.model;
  Dense d;
  int g = s.fabric.gpusPerNode;
  d.tp = std::min(m.tp, g);
  d.pp = std::max(1, std::min(m.pp, W->nodes));
  while (W->nodes % d.pp != 0) d.pp--;
  d.dp = W->nodes / d.pp;
  d.ep = s.workload == WorkloadKind::kMoe ? std::max(1, std::min(m.ep, d.dp)) : 1;
  while (d.dp % d.ep != 0) d.ep--;
  auto node = [&](int stage, int rep) { return stage * d.dp + rep; };
  // One ring per (stage, GPU): the GPUs of the same TP rank and stage in every replica. Each
  // GPU's connection is its own (NCCL opens one per peer), over all the node's NICs.
  for (int st = 0; st < d.pp; ++st) {
    std::vector<int> members;
    for (int rep = 0; rep < d.dp; ++rep) members.push_back(node(st, rep));
    for (int gpu = 0; gpu < g; ++gpu) {
      int comm = st * g + gpu;
      Ring ring;
      for (int rep = 0; rep < d.dp && d.dp > 1; ++rep) {
        ring.conns.push_back(makeConn(members[rep], members[(rep + 1) % d.dp], comm));
      }
      if (!ring.conns.empty()) d.dpRings.push_back(ring);
    }
    d.dpGroups.push_back(members);
  }
  d.ppFwdAt.resize(d.pp);
  d.ppBwdAt.resize(d.pp);
  d.a2aAt.resize(d.pp);
  for (int st = 0; st + 1 < d.pp; ++st) {
    for (int rep = 0; rep < d.dp; ++rep) {
      for (int gpu = 0; gpu < g; ++gpu) {
        int comm = 1000000 + st * g + gpu;
        d.ppFwdAt[st].push_back(makeConn(node(st, rep), node(st + 1, rep), comm));
        d.ppBwdAt[st + 1].push_back(makeConn(node(st + 1, rep), node(st, rep), comm));
      }
    }
  }
  if (d.ep > 1) {
    for (int st = 0; st < d.pp; ++st) {
      for (int grp = 0; grp < d.dp / d.ep; ++grp) {
        for (int gpu = 0; gpu < g; ++gpu) {
          int comm = 2000000 + (st * d.dp + grp) * g + gpu;
          for (int a = 0; a < d.ep; ++a) {
            for (int b = 0; b < d.ep; ++b) {
              if (a != b) {
                d.a2aAt[st].push_back(
                    makeConn(node(st, grp * d.ep + a), node(st, grp * d.ep + b), comm));
              }
            }
          }
        }
      }
    }
  }
  // Compute: 6 FLOPs per parameter and token (2 forward, 4 backward) on the active parameters,
  // split over the TP x PP GPUs of a replica.
  double tokens = double(m.microBatch) * m.seqLen;
  double flops = 6.0 * m.activeParams * tokens / (d.tp * d.pp);
  double rate = s.gpu.peakFlops * s.gpu.utilization;
  uint64_t actBytesFull = uint64_t(tokens * m.hidden * 2);  // bf16 activations
  int layersPerStage = std::max(1, m.layers / d.pp);
  // TP: two all-reduces of the activations per layer forward, two backward (Megatron).
  double tpS = 2.0 * layersPerStage * tpAllReduceS(actBytesFull, d.tp);
  d.fwdS = flops / 3 / rate + tpS;
  d.bwdS = flops * 2 / 3 / rate + tpS;
  d.actBytes = actBytesFull / uint64_t(d.tp);  // PP sends split over the TP ranks
  // All-to-all (MoE): each token's activations go to topK experts and come back, per layer;
  // one GPU's share, to each of the (ep - 1) other members; the layers of a stage are merged
  // into one exchange per micro-batch and direction.
  if (d.ep > 1) {
    double perLayer = double(actBytesFull) * m.topK / d.tp / d.ep;
    d.a2aBytes = uint64_t(2.0 * layersPerStage * perLayer);
  }
  // Gradients (bf16) of the parameters a GPU holds: dense ones over TP x PP; MoE experts also
  // over EP (approximated as one all-reduce over the replica ring).
  double held = m.totalParams / (d.tp * d.pp);
  if (d.ep > 1) {
    // total = shared + E * e, active = shared + topK * e.
    double perExpert = (m.totalParams - m.activeParams) / std::max(1, m.experts - m.topK);
    double experts = std::clamp(perExpert * m.experts, 0.0, m.totalParams);
    held = (m.totalParams - experts) / (d.tp * d.pp) + experts / (d.tp * d.pp * d.ep);
  }
  d.gradBytes = uint64_t(held * 2);
  if (d.dpGroups.empty()) d.dpGroups.push_back({});
  // Tree edges: both directions between every pair a binary tree may use.
  if (d.dp > 1) {
    for (const auto& members : d.dpGroups) {
      int n = int(members.size());
      for (int tree = 0; tree < 2; ++tree) {
        for (int i = 1; i < n; ++i) {
          int a = members[(i + tree * (n / 2)) % n],
              b = members[((i - 1) / 2 + tree * (n / 2)) % n];
          if (!d.dpEdge.count({a, b})) d.dpEdge[{a, b}] = makeConn(a, b, 3000000 + a);
          if (!d.dpEdge.count({b, a})) d.dpEdge[{b, a}] = makeConn(b, a, 3000000 + b);
        }
      }
    }
  }
  return d;
}

// The gradient all-reduce: ring, or tree when the tuner says so. Returns the time it took.
double dpAllReduce(Dense& d, Tuner* tuner, bool learn) {
  double t0 = nowS();
  const int chunks = W->spec.chunksPerRail;
  int cell = -1;
  int ctx = 0;
  if (tuner != nullptr && tuner->policy) {
    // As the plugin applies a decision table: a new decision resets the call counters, then
    // armForCall() says which arm this call plays (a cell: no channel arms are offered here;
    // -1: NCCL's own choice).
    tuner::ContextDecision dec = tuner->policy->decide(ctx);
    if (dec != tuner->current) {
      tuner->current = dec;
      tuner->counters->reset();
    }
    cell = tuner::armForCall(dec, ctx, tuner->counters.get());
    if (cell < 0) cell = tuner->policy->defaultCell(ctx);
  }
  bool tree = cell >= 0 && cell / abi::kNumProtocols == abi::kAlgoTree;
  if (d.dp > 1) {
    if (tree) {
      // The tree runs on one connection per node pair: scale to the GPUs of a node.
      uint64_t bytes = d.gradBytes * uint64_t(W->spec.fabric.gpusPerNode);
      treeAllReduce(d.dpGroups, d.dpEdge, bytes, 8, chunks);
    } else {
      ringCollective(d.dpRings, d.gradBytes, "ring", chunks);
    }
  }
  double dt = nowS() - t0;
  if (tuner != nullptr && tuner->policy && cell >= 0 && learn) {
    tuner->policy->observe(ctx, cell, dt * 1e6);
    tuner->lastChoice = tree ? "tree" : "ring";
  }
  return dt;
}

// One training step: GPipe-style forward ticks then backward ticks (each tick a micro-batch's
// compute on every busy stage, then the pipeline sends and all-to-alls of that tick), then the
// gradient all-reduce (not overlapped with compute, so the network is not hidden).
void trainingStep(Dense& d, Tuner* tuner, double* commS, double* computeS) {
  const int m = W->spec.model.microBatches;
  const int chunks = W->spec.chunksPerRail;
  for (int dir = 0; dir < 2; ++dir) {
    for (int tick = 0; tick < m + d.pp - 1; ++tick) {
      double c0 = nowS();
      sg4::this_actor::sleep_for(dir == 0 ? d.fwdS : d.bwdS);
      *computeS += nowS() - c0;
      double t0 = nowS();
      std::vector<Conn*> sends;
      for (int st = 0; st < d.pp; ++st) {
        int stage = dir == 0 ? st : d.pp - 1 - st;
        int mb = tick - st;
        if (mb < 0 || mb >= m) continue;
        if (d.ep > 1) sends.insert(sends.end(), d.a2aAt[stage].begin(), d.a2aAt[stage].end());
      }
      if (!sends.empty()) runPointToPoint(sends, d.a2aBytes, 1);
      sends.clear();
      for (int st = 0; st < d.pp; ++st) {
        int stage = dir == 0 ? st : d.pp - 1 - st;
        int mb = tick - st;
        if (mb < 0 || mb >= m) continue;
        const auto& out = dir == 0 ? d.ppFwdAt[stage] : d.ppBwdAt[stage];
        sends.insert(sends.end(), out.begin(), out.end());
      }
      if (!sends.empty()) runPointToPoint(sends, d.actBytes, chunks);
      *commS += nowS() - t0;
    }
  }
  *commS += dpAllReduce(d, tuner, true);
}

void setupTuner(Tuner* t, const Dense& d) {
  if (W->spec.policy != PolicyKind::kOurs || !W->spec.tuner || d.dp < 2) return;
  tuner::model::Topology topo;
  std::string err;
  if (!tuner::topologyFromJson(W->spec.fabric.topoText, "", &topo, &err)) return;
  // The DP communicator: one GPU per node, `dp` nodes.
  topo.nNodes = d.dp;
  topo.nRanks = d.dp;
  t->model = std::make_unique<tuner::model::CostModel>(topo);
  float table[abi::kNumAlgorithms][abi::kNumProtocols];
  t->model->fillTable(abi::kFuncAllReduce, d.gradBytes, 1, table);
  t->policy = std::make_unique<tuner::BanditPolicy>(tuner::PolicyConfig{});
  t->policy->setPrior(0, &table[0][0]);
  t->counters = std::make_unique<tuner::ExplorationCounters>();
  t->counters->reset();
}

}  // namespace

RunResult runOnce(const RunSpec& spec, void (*onStop)(const RunResult&)) {
  gStopHook = onStop;
  RunResult res;
  World world;
  world.spec = spec;
  W = &world;
  int argc = 1;
  char arg0[] = "autopilot-simulate";
  char* argv[] = {arg0, nullptr};
  sg4::Engine engine(&argc, argv);
  xbt_log_control_set("root.thresh:critical");
  engine.set_config("network/model:CM02");
  engine.set_config("network/TCP-gamma:1e15");
  engine.set_config("network/crosstraffic:0");
  buildPlatform();

  std::mt19937_64 rng(spec.seed);
  std::uniform_real_distribution<double> unit(0.0, 1.0);
  for (Fault f : spec.scenario.faults) {
    // Random onset (within the warm-up) and a random node for the faults that have them.
    if (f.node < 0) f.node = int(rng() % uint64_t(W->nodes));
    if (f.nic < 0) f.nic = int(rng() % uint64_t(W->nics));
    if (f.onsetS < 0) f.onsetS = (0.1 + 0.8 * unit(rng)) * spec.warmupS;
    if (f.kind == FaultKind::kDown || f.kind == FaultKind::kFailHeal ||
        f.kind == FaultKind::kFlap) {
      W->firstDownS = W->firstDownS < 0 ? f.onsetS : std::min(W->firstDownS, f.onsetS);
    }
    sg4::ActorPtr a = sg4::Actor::create("fault", anyHost(), [f]() { faultActor(f); });
    a->daemonize();
  }

  W->nicMailbox.resize(W->nicHost.size());
  for (size_t i = 0; i < W->nicHost.size(); ++i) {
    W->nicMailbox[i] = sg4::Mailbox::by_name("nic" + std::to_string(i));
    sg4::Actor::create("receiver", W->nicHost[i], [i]() {
      receiverActor(W->nicMailbox[i]);
    })->daemonize();
  }

  sg4::Actor::create("job", anyHost(), [&res, &spec]() {
    try {
      if (spec.workload == WorkloadKind::kAllReduce) {
        // A collective on rings over every node, one ring per GPU of a node (NCCL's channels
        // of a rail-aligned communicator), a warm-up call first.
        std::vector<Ring> rings;
        std::vector<int> members;
        for (int n = 0; n < W->nodes; ++n) members.push_back(n);
        for (int g = 0; g < spec.fabric.gpusPerNode; ++g) {
          Ring ring;
          for (int n = 0; n < W->nodes; ++n)
            ring.conns.push_back(makeConn(n, (n + 1) % W->nodes, g));
          rings.push_back(ring);
        }
        if (!spec.cycleBytes.empty() && spec.windowEdgesS.size() >= 2) {
          // The timeline: each collective's bus bytes count in the window it completes in.
          const std::vector<double>& edges = spec.windowEdgesS;
          W->windowBusBytes.assign(edges.size() - 1, 0.0);
          const double n = double(W->nodes);
          const size_t kinds = std::max<size_t>(1, spec.cycleCollectives.size());
          for (size_t i = 0; nowS() < edges.back(); ++i) {
            uint64_t bytes = spec.cycleBytes[(i / kinds) % spec.cycleBytes.size()];
            const double started = nowS();
            double busBytes = 0;
            if (spec.cycleCollectives.empty()) {
              ringCollective(rings, bytes, spec.algo, spec.chunksPerRail);
              busBytes = (spec.algo == "ring" ? 2 : 1) * (n - 1) / n * double(bytes);
            } else {
              const size_t item = i % (kinds * spec.cycleBytes.size());
              busBytes = demoCollective(rings, spec.cycleCollectives[i % kinds], bytes,
                                        int(item % size_t(W->nodes)), spec.chunksPerRail);
            }
            const double t = nowS();
            if (gTrace)
              std::fprintf(stderr, "COLL t=%.4f %s bytes %llu took %.4f s\n", t,
                           spec.cycleCollectives.empty() ? spec.algo.c_str()
                                                         : spec.cycleCollectives[i % kinds].c_str(),
                           (unsigned long long)bytes, t - started);
            for (size_t w = 0; w + 1 < edges.size(); ++w) {
              if (t >= edges[w] && t < edges[w + 1]) W->windowBusBytes[w] += busBytes;
            }
            if (spec.hostGapS > 0) sg4::this_actor::sleep_for(spec.hostGapS);
          }
          res.windowBusBytes = W->windowBusBytes;
          return;
        }
        double t0 = nowS();
        ringCollective(rings, spec.allReduceBytes, spec.algo, spec.chunksPerRail);
        res.warmupS = nowS() - t0;
        t0 = nowS();
        ringCollective(rings, spec.allReduceBytes, spec.algo, spec.chunksPerRail);
        res.stepS = res.commS = nowS() - t0;
      } else {
        Dense d = buildDense();
        Tuner tuner;
        setupTuner(&tuner, d);
        // Warm-up: one training step (every connection used once, the estimates settle;
        // random onsets fall here), so the measured step is the steady state that the
        // following steps repeat. First detections show in recoveryS.
        // A fault with a random onset falls in the first warm-up step; a second one lets every
        // connection meet it before the measured step.
        bool randomOnset = false;
        for (const Fault& f : spec.scenario.faults) randomOnset = randomOnset || f.onsetS < 0;
        double t0 = nowS();
        double commS = 0, computeS = 0;
        for (int i = 0; i < (randomOnset ? 2 : 1); ++i) trainingStep(d, &tuner, &commS, &computeS);
        res.warmupS = nowS() - t0;
        commS = computeS = 0;
        t0 = nowS();
        trainingStep(d, &tuner, &commS, &computeS);
        res.stepS = nowS() - t0;
        res.commS = commS;
        res.computeS = computeS;
        res.tunerChoice = tuner.lastChoice;
      }
    } catch (const JobStopped&) {
    }
  });
  engine.run();
  res.ok = true;
  res.stopped = W->stopped;
  res.stopAtS = W->stopAtS;
  res.transfers = W->transfers;
  res.railFailures = W->railFailures;
  res.railRejoins = W->railRejoins;
  res.splitMessages = W->splitMessages;
  res.splitMismatches = W->splitMismatches;
  if (W->firstDownS >= 0 && W->lastFailoverS >= 0) res.recoveryS = W->lastFailoverS - W->firstDownS;
  gConns.clear();
  W = nullptr;
  return res;
}

}  // namespace autopilot::sim
