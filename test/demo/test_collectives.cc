// The demo's collectives compute exact results for every algorithm, protocol, rank count and
// awkward size, over an in-memory transport that refuses posts and delays completions at random.
#include <catch2/catch.hpp>
#include <thread>

#include "bench/demo/collectives.h"
#include "test/demo/memory_transport.h"

using namespace autopilot::demo;
using testing::MemoryFabric;
using testing::MemoryTransport;

namespace {

// Small integers keep float sums exact whatever the reduction order.
float inputValue(int rank, size_t i) { return float((rank + 1) * 3 + int(i % 97)); }

std::vector<float> makeInput(const CollectiveCall& call, int rank, int n) {
  std::vector<float> data(bufferElements(call, n), -1.0f);
  if (call.kind == CollectiveKind::kAllGather) {
    for (size_t i = 0; i < call.count; ++i)
      data[size_t(rank) * call.count + i] = inputValue(rank, i);
  } else if (call.kind == CollectiveKind::kBroadcast) {
    if (rank == call.root) {
      for (size_t i = 0; i < call.count; ++i) data[i] = inputValue(rank, i);
    }
  } else {
    for (size_t i = 0; i < data.size(); ++i) data[i] = inputValue(rank, i);
  }
  return data;
}

void checkOutput(const CollectiveCall& call, int rank, int n, const std::vector<float>& data) {
  auto sumAt = [n](size_t i) {
    float s = 0;
    for (int r = 0; r < n; ++r) s += inputValue(r, i);
    return s;
  };
  size_t bad = 0;
  switch (call.kind) {
    case CollectiveKind::kAllReduce:
      for (size_t i = 0; i < call.count; ++i) bad += data[i] != sumAt(i);
      break;
    case CollectiveKind::kBroadcast:
      for (size_t i = 0; i < call.count; ++i) bad += data[i] != inputValue(call.root, i);
      break;
    case CollectiveKind::kAllGather:
      for (int r = 0; r < n; ++r)
        for (size_t i = 0; i < call.count; ++i)
          bad += data[size_t(r) * call.count + i] != inputValue(r, i);
      break;
    case CollectiveKind::kReduceScatter:
      for (size_t i = 0; i < call.count; ++i) {
        size_t at = size_t(rank) * call.count + i;
        bad += data[at] != sumAt(at);
      }
      break;
  }
  INFO("rank " << rank << " " << collectiveName(call.kind) << " " << algorithmName(call.algorithm)
               << " " << protocolByIndex(call.protocol).name << " count " << call.count);
  CHECK(bad == 0);
}

void runEverywhere(const CollectiveCall& call, int n) {
  MemoryFabric fabric(n);
  std::vector<std::vector<float>> buffers;
  for (int r = 0; r < n; ++r) buffers.push_back(makeInput(call, r, n));
  std::vector<std::thread> threads;
  std::vector<std::string> errors(static_cast<size_t>(n));
  for (int r = 0; r < n; ++r) {
    threads.emplace_back([&, r] {
      try {
        MemoryTransport t(fabric, r, n, 1234u + unsigned(r));
        CollectiveEngine engine(t);
        engine.run(call, buffers[size_t(r)].data());
      } catch (const std::exception& e) {
        errors[size_t(r)] = e.what();
      }
    });
  }
  for (auto& t : threads) t.join();
  for (int r = 0; r < n; ++r) {
    INFO(errors[size_t(r)]);
    REQUIRE(errors[size_t(r)].empty());
    checkOutput(call, r, n, buffers[size_t(r)]);
  }
}

}  // namespace

TEST_CASE("collectives are exact for every algorithm, protocol and size", "[demo][collectives]") {
  const CollectiveKind kinds[] = {CollectiveKind::kAllReduce, CollectiveKind::kBroadcast,
                                  CollectiveKind::kAllGather, CollectiveKind::kReduceScatter};
  const size_t counts[] = {1, 3, 4097, 70000, 300001};
  for (int n : {2, 3, 4, 5}) {
    for (CollectiveKind kind : kinds) {
      for (Algorithm algo : {Algorithm::kRing, Algorithm::kTree}) {
        if (!CollectiveEngine::supports(kind, algo)) continue;
        for (int proto = 0; proto < kNumDemoProtocols; ++proto) {
          for (size_t count : counts) {
            CollectiveCall call{kind, algo, proto, count, n > 2 ? 1 : 0};
            runEverywhere(call, n);
          }
        }
      }
    }
  }
}

TEST_CASE("tuner-visible sizes follow NCCL's conventions", "[demo][collectives]") {
  CollectiveCall ag{CollectiveKind::kAllGather, Algorithm::kRing, 2, 1000};
  CollectiveCall ar{CollectiveKind::kAllReduce, Algorithm::kRing, 2, 1000};
  CHECK(tunerBytes(ag, 4) == 16000);
  CHECK(tunerBytes(ar, 4) == 4000);
  CHECK(bufferElements(ag, 4) == 4000);
  CHECK_FALSE(CollectiveEngine::supports(CollectiveKind::kAllGather, Algorithm::kTree));
}
