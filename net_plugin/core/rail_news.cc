#include "net_plugin/core/rail_news.h"

namespace autopilot::net::core {

RailNews& RailNews::instance() {
  static RailNews news;
  return news;
}

void RailNews::failed(int id, uint64_t nowNs) {
  if (!valid(id)) return;
  // The time first: a reader that sees the new count reads this failure's time (or a later one).
  failedAtNs_[id].store(nowNs, std::memory_order_relaxed);
  failures_[id].fetch_add(1, std::memory_order_release);
}

void RailNews::rejoined(int id) {
  if (valid(id)) rejoins_[id].fetch_add(1, std::memory_order_release);
}

uint32_t RailNews::failures(int id) const {
  return valid(id) ? failures_[id].load(std::memory_order_acquire) : 0;
}

uint64_t RailNews::failedAtNs(int id) const {
  return valid(id) ? failedAtNs_[id].load(std::memory_order_relaxed) : 0;
}

uint32_t RailNews::rejoins(int id) const {
  return valid(id) ? rejoins_[id].load(std::memory_order_acquire) : 0;
}

void RailNewsWatch::start(const RailNews* news, int id) {
  news_ = news;
  id_ = id;
  failures_ = news_ != nullptr ? news_->failures(id) : 0;
  rejoins_ = news_ != nullptr ? news_->rejoins(id) : 0;
}

bool RailNewsWatch::failedSinceLook(uint64_t* atNs) {
  if (news_ == nullptr) return false;
  uint32_t now = news_->failures(id_);
  if (now == failures_) return false;
  failures_ = now;
  *atNs = news_->failedAtNs(id_);
  return true;
}

bool RailNewsWatch::rejoinedSinceLook() {
  if (news_ == nullptr) return false;
  uint32_t now = news_->rejoins(id_);
  if (now == rejoins_) return false;
  rejoins_ = now;
  return true;
}

}  // namespace autopilot::net::core
