#include "bench/demo/collectives.h"

#include <sched.h>

#include <algorithm>
#include <array>
#include <cstring>

namespace autopilot::demo {
namespace {

// Step size and depth of each protocol. Small steps and deep pipelines start moving data
// sooner (latency); large steps amortise per-transfer overhead (bandwidth).
const Protocol kProtocols[kNumDemoProtocols] = {
    {"LL", 16 << 10, 8},
    {"LL128", 128 << 10, 4},
    {"Simple", 256 << 10, 8},
};

struct Range {
  size_t begin;
  size_t end;
  size_t size() const { return end - begin; }
};

// Balanced split of `count` elements into `parts` contiguous segments.
Range segmentOf(size_t count, int parts, int index) {
  return Range{count * size_t(index) / size_t(parts), count * size_t(index + 1) / size_t(parts)};
}

// Piece `slice` (of `elems` elements each) of a segment.
Range sliceOf(Range seg, size_t elems, size_t slice) {
  size_t b = std::min(seg.end, seg.begin + slice * elems);
  size_t e = std::min(seg.end, b + elems);
  return Range{b, e};
}

size_t ceilDiv(size_t a, size_t b) { return b == 0 ? 0 : (a + b - 1) / b; }

int mod(int a, int n) { return ((a % n) + n) % n; }

}  // namespace

const char* algorithmName(Algorithm a) { return a == Algorithm::kTree ? "Tree" : "Ring"; }

const Protocol& protocolByIndex(int proto) {
  return kProtocols[std::clamp(proto, 0, kNumDemoProtocols - 1)];
}

const char* collectiveName(CollectiveKind c) {
  switch (c) {
    case CollectiveKind::kBroadcast:
      return "Broadcast";
    case CollectiveKind::kAllGather:
      return "AllGather";
    case CollectiveKind::kReduceScatter:
      return "ReduceScatter";
    case CollectiveKind::kAllReduce:
      return "AllReduce";
  }
  return "?";
}

size_t tunerBytes(const CollectiveCall& call, int nRanks) {
  size_t bytes = call.count * sizeof(float);
  // NCCL's getCollInfo sees the total size: per-rank count times nRanks for these two.
  if (call.kind == CollectiveKind::kAllGather || call.kind == CollectiveKind::kReduceScatter) {
    bytes *= size_t(nRanks);
  }
  return bytes;
}

size_t bufferElements(const CollectiveCall& call, int nRanks) {
  if (call.kind == CollectiveKind::kAllGather || call.kind == CollectiveKind::kReduceScatter) {
    return call.count * size_t(nRanks);
  }
  return call.count;
}

bool CollectiveEngine::supports(CollectiveKind kind, Algorithm algorithm) {
  if (algorithm == Algorithm::kRing) return true;
  return kind == CollectiveKind::kAllReduce || kind == CollectiveKind::kBroadcast;
}

CollectiveEngine::CollectiveEngine(Transport& transport)
    : transport_(transport), rank_(transport.rank()), nRanks_(transport.nRanks()) {
  size_t most = 0;
  for (const Protocol& p : kProtocols) {
    most = std::max(most, size_t(p.depth) * (p.stepBytes / sizeof(float)) * 2);  // tree: 2 children
  }
  scratch_.assign(most, 0.0f);
}

void CollectiveEngine::run(const CollectiveCall& call, float* data) {
  Protocol p = protocolByIndex(call.protocol);
  // Only ever smaller: the scratch space is sized for the protocols' own steps.
  if (call.stepBytes >= sizeof(float) && call.stepBytes < p.stepBytes) p.stepBytes = call.stepBytes;
  if (nRanks_ == 1 || call.count == 0) return;
  switch (call.kind) {
    case CollectiveKind::kAllReduce:
      if (call.algorithm == Algorithm::kTree) {
        treeAllReduce(data, call.count, p);
      } else {
        ringAllReduce(data, call.count, p);
      }
      break;
    case CollectiveKind::kBroadcast:
      if (call.algorithm == Algorithm::kTree) {
        treeBroadcast(data, call.count, call.root, p);
      } else {
        ringBroadcast(data, call.count, call.root, p);
      }
      break;
    case CollectiveKind::kAllGather:
      ringAllGather(data, call.count, p);
      break;
    case CollectiveKind::kReduceScatter:
      ringReduceScatter(data, call.count, p);
      break;
  }
}

// ---------------------------------------------------------------------------------- executor
//
// A tiny dataflow executor. Ops are listed in the canonical order; an op is posted once its
// dependencies completed (and their reductions ran) and every earlier op on the same
// connection was posted. Completion of a receive may add its scratch data into the output.

namespace {

struct Flow {
  bool isSend;
  int peer;
  void* buf;
  size_t bytes;
  int dep[3] = {-1, -1, -1};
  float* reduceInto = nullptr;  // receive: add buf into reduceInto after completion
  int state = 0;                // 0 waiting, 1 posted, 2 done
  void* request = nullptr;
  int prevOnConnection = -1;
};

void runFlows(Transport& t, std::vector<Flow>& flows) {
  // Link each op to the previous op of its connection (peer, direction).
  for (size_t i = 0; i < flows.size(); ++i) {
    for (size_t j = i; j-- > 0;) {
      if (flows[j].peer == flows[i].peer && flows[j].isSend == flows[i].isSend) {
        flows[i].prevOnConnection = int(j);
        break;
      }
    }
  }
  size_t remaining = flows.size();
  int idle = 0;
  while (remaining > 0) {
    bool progressed = false;
    for (size_t i = 0; i < flows.size(); ++i) {
      Flow& f = flows[i];
      if (f.state == 0) {
        bool ready = f.prevOnConnection < 0 || flows[f.prevOnConnection].state >= 1;
        for (int d : f.dep) ready = ready && (d < 0 || flows[d].state == 2);
        if (!ready) continue;
        f.request = f.isSend ? t.isend(f.peer, f.buf, f.bytes) : t.irecv(f.peer, f.buf, f.bytes);
        if (f.request != nullptr) {
          f.state = 1;
          progressed = true;
        }
      } else if (f.state == 1) {
        if (!t.test(f.request)) continue;
        if (f.reduceInto != nullptr) {
          const float* src = static_cast<const float*>(f.buf);
          size_t n = f.bytes / sizeof(float);
          for (size_t k = 0; k < n; ++k) f.reduceInto[k] += src[k];
        }
        f.state = 2;
        --remaining;
        progressed = true;
      }
    }
    if (progressed) {
      idle = 0;
    } else if (++idle > 64) {
      sched_yield();  // other rank processes share the cores
    }
  }
}

}  // namespace

// ------------------------------------------------------------------------------------- ring

void CollectiveEngine::ringReduceScatter(float* data, size_t count, const Protocol& p) {
  // Segment r of data is rank r's output. Step s: send segment (rank-s-1), receive segment
  // (rank-s-2) from the previous rank and add it in; after N-1 steps segment `rank` is complete.
  const int n = nRanks_, next = mod(rank_ + 1, n), prev = mod(rank_ - 1, n);
  const size_t elems = std::max<size_t>(1, p.stepBytes / sizeof(float));
  const size_t slices = ceilDiv(count, elems);
  const int steps = n - 1;
  for (size_t g = 0; g < slices; g += size_t(p.depth)) {
    size_t inGroup = std::min(slices - g, size_t(p.depth));
    std::vector<Flow> flows;
    std::vector<int> lastRecv(inGroup, -1);
    for (int s = 0; s < steps; ++s) {
      for (size_t k = 0; k < inGroup; ++k) {
        Range sendSeg{size_t(mod(rank_ - s - 1, n)) * count,
                      size_t(mod(rank_ - s - 1, n) + 1) * count};
        Range recvSeg{size_t(mod(rank_ - s - 2, n)) * count,
                      size_t(mod(rank_ - s - 2, n) + 1) * count};
        Range sr = sliceOf(sendSeg, elems, g + k), rr = sliceOf(recvSeg, elems, g + k);
        Flow send{true, next, data + sr.begin, sr.size() * sizeof(float)};
        send.dep[0] = lastRecv[k];  // sends the piece reduced by the previous step
        Flow recv{false, prev, scratch_.data() + k * elems, rr.size() * sizeof(float)};
        recv.dep[0] = lastRecv[k];  // scratch slot free again
        recv.reduceInto = data + rr.begin;
        flows.push_back(send);
        flows.push_back(recv);
        lastRecv[k] = int(flows.size()) - 1;
      }
    }
    runFlows(transport_, flows);
  }
}

void CollectiveEngine::ringAllGather(float* data, size_t count, const Protocol& p) {
  // Block r is rank r's input. Step s: send block (rank-s), receive block (rank-s-1) in place.
  const int n = nRanks_, next = mod(rank_ + 1, n), prev = mod(rank_ - 1, n);
  const size_t elems = std::max<size_t>(1, p.stepBytes / sizeof(float));
  const size_t slices = ceilDiv(count, elems);
  for (size_t g = 0; g < slices; g += size_t(p.depth)) {
    size_t inGroup = std::min(slices - g, size_t(p.depth));
    std::vector<Flow> flows;
    std::vector<int> lastRecv(inGroup, -1);
    for (int s = 0; s < n - 1; ++s) {
      for (size_t k = 0; k < inGroup; ++k) {
        int sb = mod(rank_ - s, n), rb = mod(rank_ - s - 1, n);
        Range sr = sliceOf(Range{size_t(sb) * count, size_t(sb + 1) * count}, elems, g + k);
        Range rr = sliceOf(Range{size_t(rb) * count, size_t(rb + 1) * count}, elems, g + k);
        Flow send{true, next, data + sr.begin, sr.size() * sizeof(float)};
        send.dep[0] = lastRecv[k];  // forwards what arrived in the previous step
        Flow recv{false, prev, data + rr.begin, rr.size() * sizeof(float)};
        flows.push_back(send);
        flows.push_back(recv);
        lastRecv[k] = int(flows.size()) - 1;
      }
    }
    runFlows(transport_, flows);
  }
}

void CollectiveEngine::ringAllReduce(float* data, size_t count, const Protocol& p) {
  // Reduce-scatter then all-gather over N balanced segments; rank r owns segment r after the
  // first phase. Steps 0..N-2 reduce, N-1..2N-3 gather.
  const int n = nRanks_, next = mod(rank_ + 1, n), prev = mod(rank_ - 1, n);
  const size_t elems = std::max<size_t>(1, p.stepBytes / sizeof(float));
  size_t maxSeg = 0;
  for (int r = 0; r < n; ++r) maxSeg = std::max(maxSeg, segmentOf(count, n, r).size());
  const size_t slices = ceilDiv(maxSeg, elems);
  for (size_t g = 0; g < slices; g += size_t(p.depth)) {
    size_t inGroup = std::min(slices - g, size_t(p.depth));
    std::vector<Flow> flows;
    std::vector<int> lastRecv(inGroup, -1);
    std::vector<std::vector<int>> rsSend(size_t(n), std::vector<int>(inGroup, -1));
    for (int s = 0; s < 2 * (n - 1); ++s) {
      bool reducing = s < n - 1;
      int t = reducing ? s : s - (n - 1);
      int sendSegIdx = reducing ? mod(rank_ - t - 1, n) : mod(rank_ - t, n);
      int recvSegIdx = reducing ? mod(rank_ - t - 2, n) : mod(rank_ - t - 1, n);
      for (size_t k = 0; k < inGroup; ++k) {
        Range sr = sliceOf(segmentOf(count, n, sendSegIdx), elems, g + k);
        Range rr = sliceOf(segmentOf(count, n, recvSegIdx), elems, g + k);
        if (sr.size() > 0) {
          Flow send{true, next, data + sr.begin, sr.size() * sizeof(float)};
          send.dep[0] = lastRecv[k];
          flows.push_back(send);
          if (reducing) rsSend[size_t(t)][k] = int(flows.size()) - 1;
        }
        if (rr.size() > 0) {
          Flow recv{false, prev, nullptr, rr.size() * sizeof(float)};
          recv.dep[0] = lastRecv[k];
          if (reducing) {
            recv.buf = scratch_.data() + k * elems;
            recv.reduceInto = data + rr.begin;
          } else {
            recv.buf = data + rr.begin;
            recv.dep[1] = rsSend[size_t(t)][k];  // that region left in reduce step t
          }
          flows.push_back(recv);
          lastRecv[k] = int(flows.size()) - 1;
        }
      }
    }
    runFlows(transport_, flows);
  }
}

void CollectiveEngine::ringBroadcast(float* data, size_t count, int root, const Protocol& p) {
  // A pipelined chain root -> root+1 -> ... -> root-1.
  const int n = nRanks_, next = mod(rank_ + 1, n), prev = mod(rank_ - 1, n);
  const bool isRoot = rank_ == root, isLast = next == root;
  const size_t elems = std::max<size_t>(1, p.stepBytes / sizeof(float));
  const size_t chunks = ceilDiv(count, elems);
  for (size_t g = 0; g < chunks; g += size_t(p.depth)) {
    size_t inGroup = std::min(chunks - g, size_t(p.depth));
    std::vector<Flow> flows;
    for (size_t k = 0; k < inGroup; ++k) {
      Range r = sliceOf(Range{0, count}, elems, g + k);
      int recvIdx = -1;
      if (!isRoot) {
        flows.push_back(Flow{false, prev, data + r.begin, r.size() * sizeof(float)});
        recvIdx = int(flows.size()) - 1;
      }
      if (!isLast) {
        Flow send{true, next, data + r.begin, r.size() * sizeof(float)};
        send.dep[0] = recvIdx;
        flows.push_back(send);
      }
    }
    runFlows(transport_, flows);
  }
}

// ------------------------------------------------------------------------------------- tree

namespace {
// Binary tree over ranks relabelled so that `root` is vertex 0.
struct TreeLinks {
  int parent = -1;
  int children[2] = {-1, -1};
};
TreeLinks treeLinks(int rank, int n, int root) {
  TreeLinks l;
  int v = mod(rank - root, n);
  if (v > 0) l.parent = mod((v - 1) / 2 + root, n);
  for (int c = 0; c < 2; ++c) {
    int cv = 2 * v + 1 + c;
    if (cv < n) l.children[c] = mod(cv + root, n);
  }
  return l;
}
}  // namespace

void CollectiveEngine::treeAllReduce(float* data, size_t count, const Protocol& p) {
  // Reduce up to rank 0, then broadcast down, pipelined chunk by chunk.
  const TreeLinks links = treeLinks(rank_, nRanks_, 0);
  const size_t elems = std::max<size_t>(1, p.stepBytes / sizeof(float));
  const size_t chunks = ceilDiv(count, elems);
  for (size_t g = 0; g < chunks; g += size_t(p.depth)) {
    size_t inGroup = std::min(chunks - g, size_t(p.depth));
    std::vector<Flow> flows;
    std::vector<int> upSend(inGroup, -1);
    std::vector<std::array<int, 2>> childRecv(inGroup, {-1, -1});
    for (size_t k = 0; k < inGroup; ++k) {  // up
      Range r = sliceOf(Range{0, count}, elems, g + k);
      for (int c = 0; c < 2; ++c) {
        if (links.children[c] < 0) continue;
        Flow recv{false, links.children[c], scratch_.data() + (size_t(c) * p.depth + k) * elems,
                  r.size() * sizeof(float)};
        recv.reduceInto = data + r.begin;
        flows.push_back(recv);
        childRecv[k][size_t(c)] = int(flows.size()) - 1;
      }
      if (links.parent >= 0) {
        Flow send{true, links.parent, data + r.begin, r.size() * sizeof(float)};
        send.dep[0] = childRecv[k][0];
        send.dep[1] = childRecv[k][1];
        flows.push_back(send);
        upSend[k] = int(flows.size()) - 1;
      }
    }
    for (size_t k = 0; k < inGroup; ++k) {  // down
      Range r = sliceOf(Range{0, count}, elems, g + k);
      int ready[2] = {childRecv[k][0], childRecv[k][1]};  // root: fully reduced
      int downRecv = -1;
      if (links.parent >= 0) {
        Flow recv{false, links.parent, data + r.begin, r.size() * sizeof(float)};
        recv.dep[0] = upSend[k];  // the chunk went up before the result overwrites it
        flows.push_back(recv);
        downRecv = int(flows.size()) - 1;
      }
      for (int c = 0; c < 2; ++c) {
        if (links.children[c] < 0) continue;
        Flow send{true, links.children[c], data + r.begin, r.size() * sizeof(float)};
        if (downRecv >= 0) {
          send.dep[0] = downRecv;
        } else {
          send.dep[0] = ready[0];
          send.dep[1] = ready[1];
        }
        flows.push_back(send);
      }
    }
    runFlows(transport_, flows);
  }
}

void CollectiveEngine::treeBroadcast(float* data, size_t count, int root, const Protocol& p) {
  const TreeLinks links = treeLinks(rank_, nRanks_, root);
  const size_t elems = std::max<size_t>(1, p.stepBytes / sizeof(float));
  const size_t chunks = ceilDiv(count, elems);
  for (size_t g = 0; g < chunks; g += size_t(p.depth)) {
    size_t inGroup = std::min(chunks - g, size_t(p.depth));
    std::vector<Flow> flows;
    for (size_t k = 0; k < inGroup; ++k) {
      Range r = sliceOf(Range{0, count}, elems, g + k);
      int recvIdx = -1;
      if (links.parent >= 0) {
        flows.push_back(Flow{false, links.parent, data + r.begin, r.size() * sizeof(float)});
        recvIdx = int(flows.size()) - 1;
      }
      for (int c = 0; c < 2; ++c) {
        if (links.children[c] < 0) continue;
        Flow send{true, links.children[c], data + r.begin, r.size() * sizeof(float)};
        send.dep[0] = recvIdx;
        flows.push_back(send);
      }
    }
    runFlows(transport_, flows);
  }
}

}  // namespace autopilot::demo
