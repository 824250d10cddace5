// PendingConnects: the connections in progress of one NCCL context, for every transport. NCCL
// calls connect() again with the same handle buffer until it completes; the transport keeps a
// token in the handle's last bytes (which belong to the connecting side) and finds its
// in-progress state here. Tokens are random, so a handle from another context, or a fresh copy,
// never finds a stranger's connection; 0 means "none".
#pragma once

#include <cstdint>
#include <memory>
#include <mutex>
#include <random>
#include <unordered_map>

namespace autopilot::net::core {

template <typename Connector>
class PendingConnects {
 public:
  Connector* find(uint64_t token) {
    std::lock_guard<std::mutex> lock(mutex_);
    auto it = connectors_.find(token);
    return it == connectors_.end() ? nullptr : it->second.get();
  }
  uint64_t add(std::unique_ptr<Connector> c) {
    std::lock_guard<std::mutex> lock(mutex_);
    uint64_t token = 0;
    while (token == 0 || connectors_.count(token)) token = random_();
    connectors_.emplace(token, std::move(c));
    return token;
  }
  void remove(uint64_t token) {
    std::lock_guard<std::mutex> lock(mutex_);
    connectors_.erase(token);
  }

 private:
  std::mutex mutex_;  // v8-v10 share one context between communicators (several threads)
  std::unordered_map<uint64_t, std::unique_ptr<Connector>> connectors_;
  std::mt19937_64 random_{std::random_device{}()};
};

}  // namespace autopilot::net::core
