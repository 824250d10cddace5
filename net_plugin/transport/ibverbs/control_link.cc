#include "net_plugin/transport/ibverbs/control_link.h"

#include "common/log.h"

namespace autopilot::net::ib {

void ControlLink::closedByPeer(uint64_t nowNs, uint64_t commId, const char* label,
                               const std::string& why) {
  close();
  closedNs_ = nowNs;
  AP_INFO(abi::subsys::kNet, "comm 0x%llx %s: %s", (unsigned long long)commId, label, why.c_str());
}

void ControlLink::attach(tcp::Fd fd) {
  fd_ = std::move(fd);
  outHead_ = outCount_ = 0;
  outOffset_ = inBytes_ = 0;
}

bool ControlLink::send(const wire::ControlMessage& m) {
  if (!up() || outCount_ == kQueue) return false;
  wire::encodeControl(m, out_[(outHead_ + outCount_) % kQueue]);
  outCount_++;
  return true;
}

void ControlLink::sendRailDown(uint64_t connectionId, int rail, uint32_t generation,
                               uint32_t writesPosted, uint32_t writesAcked, uint32_t writesLanded) {
  wire::ControlMessage m;
  m.type = wire::ControlType::kRailDown;
  m.connectionId = connectionId;
  m.rail = uint8_t(rail);
  m.generation = generation;
  m.writesPosted = writesPosted;
  m.writesAcked = writesAcked;
  m.writesLanded = writesLanded;
  send(m);
}

ControlLink::Status ControlLink::flush(std::string* error) {
  while (up() && outCount_ > 0) {
    tcp::IoResult r =
        tcp::writeSome(fd_.get(), out_[outHead_] + outOffset_, wire::kControlBytes - outOffset_);
    if (r.status == tcp::Io::kError) {
      *error = "control connection: write: " + tcp::errnoText(r.error);
      return Status::kError;
    }
    if (r.status != tcp::Io::kOk || r.bytes == 0) return Status::kOk;  // full: later
    outOffset_ += r.bytes;
    if (outOffset_ == wire::kControlBytes) {
      outOffset_ = 0;
      outHead_ = (outHead_ + 1) % kQueue;
      outCount_--;
    }
  }
  return Status::kOk;
}

bool ControlLink::receive(wire::ControlMessage* m, wire::DecodeError* decodeError, Status* status,
                          std::string* error) {
  *status = Status::kOk;
  while (up() && inBytes_ < wire::kControlBytes) {
    tcp::IoResult r = tcp::readSome(fd_.get(), in_ + inBytes_, wire::kControlBytes - inBytes_);
    if (r.status == tcp::Io::kClosed) {
      *status = Status::kClosed;
      *error = "the peer closed the control connection";
      return false;
    }
    if (r.status == tcp::Io::kError) {
      *status = Status::kError;
      *error = "control connection: read: " + tcp::errnoText(r.error);
      return false;
    }
    if (r.status != tcp::Io::kOk || r.bytes == 0) return false;
    inBytes_ += r.bytes;
  }
  if (inBytes_ < wire::kControlBytes) return false;
  inBytes_ = 0;
  *decodeError = wire::decodeControl(in_, wire::kControlBytes, m);
  return true;
}

}  // namespace autopilot::net::ib
