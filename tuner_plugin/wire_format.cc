#include "tuner_plugin/wire_format.h"

#include <fcntl.h>
#include <sys/random.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

#include "common/clock.h"

namespace autopilot::tuner::wire {

static_assert(__BYTE_ORDER__ == __ORDER_LITTLE_ENDIAN__, "the wire format is little-endian");

void randomBytes(void* out, size_t size) {
  uint8_t* p = static_cast<uint8_t*>(out);
  size_t got = 0;
  while (got < size) {
    ssize_t n = getrandom(p + got, size - got, 0);
    if (n > 0) {
      got += size_t(n);
      continue;
    }
    if (n < 0 && errno == EINTR) continue;
    break;
  }
  if (got < size) {
    // No getrandom (very old kernels): fall back to hashing what varies per process.
    uint64_t seed[3] = {monotonicNs(), uint64_t(getpid()), uint64_t(uintptr_t(out))};
    Digest d = Sha256::hash(seed, sizeof(seed));
    for (size_t i = got; i < size; ++i) p[i] = d[i % d.size()];
  }
}

Digest jobKey(uint64_t commId, int nRanks, int nNodes, const std::string& secret) {
  Writer w;
  const char label[] = "nccl-autopilot tuner v1";
  w.bytes(label, sizeof(label) - 1);
  w.u64(commId);
  w.i32(nRanks);
  w.i32(nNodes);
  return HmacSha256::mac(secret.data(), secret.size(), w.str().data(), w.str().size());
}

Digest helloMac(const Digest& key, const Nonce leader, const Nonce follower, int32_t rank,
                uint32_t flags) {
  Writer w;
  w.bytes("hello", 5);
  w.bytes(leader, kNonceSize);
  w.bytes(follower, kNonceSize);
  w.i32(rank);
  w.u32(flags);
  return HmacSha256::mac(key.data(), key.size(), w.str().data(), w.str().size());
}

Digest welcomeMac(const Digest& key, const Nonce leader, const Nonce follower) {
  Writer w;
  w.bytes("welcome", 7);
  w.bytes(follower, kNonceSize);
  w.bytes(leader, kNonceSize);
  return HmacSha256::mac(key.data(), key.size(), w.str().data(), w.str().size());
}

Digest sessionKey(const Digest& key, const Nonce leader, const Nonce follower) {
  Writer w;
  w.bytes("session", 7);
  w.bytes(leader, kNonceSize);
  w.bytes(follower, kNonceSize);
  return HmacSha256::mac(key.data(), key.size(), w.str().data(), w.str().size());
}

Digest channelKey(const Digest& jobKey, const char* purpose) {
  return HmacSha256::mac(jobKey.data(), jobKey.size(), purpose, std::strlen(purpose));
}

std::string challengeBody(const Nonce leader) {
  Writer w;
  w.u8(kChallenge);
  w.u32(kProtocolVersion);
  w.bytes(leader, kNonceSize);
  return std::move(w.str());
}

bool readChallenge(Reader* r, uint32_t* version, Nonce leader) {
  return r->u32(version) && r->bytes(leader, kNonceSize);
}

std::string helloBody(const Digest& key, const Nonce leader, Nonce follower, int32_t rank,
                      uint32_t flags) {
  randomBytes(follower, kNonceSize);
  Digest mac = helloMac(key, leader, follower, rank, flags);
  Writer w;
  w.u8(kHello);
  w.bytes(follower, kNonceSize);
  w.i32(rank);
  w.u32(flags);
  w.bytes(mac.data(), mac.size());
  return std::move(w.str());
}

bool readHello(Reader* r, const Digest& key, const Nonce leader, Nonce follower, int32_t* rank,
               uint32_t* flags, bool* authentic) {
  uint8_t mac[32];
  if (!r->bytes(follower, kNonceSize) || !r->i32(rank) || !r->u32(flags) ||
      !r->bytes(mac, sizeof(mac))) {
    return false;
  }
  Digest expected = helloMac(key, leader, follower, *rank, *flags);
  *authentic = equalConstantTime(mac, expected.data(), sizeof(mac));
  return true;
}

std::string welcomeBody(const Digest& key, const Nonce leader, const Nonce follower) {
  Digest mac = welcomeMac(key, leader, follower);
  Writer w;
  w.u8(kWelcome);
  w.bytes(mac.data(), mac.size());
  return std::move(w.str());
}

bool readWelcome(Reader* r, const Digest& key, const Nonce leader, const Nonce follower,
                 bool* authentic) {
  uint8_t mac[32];
  if (!r->bytes(mac, sizeof(mac))) return false;
  Digest expected = welcomeMac(key, leader, follower);
  *authentic = equalConstantTime(mac, expected.data(), sizeof(mac));
  return true;
}

void Writer::raw(const void* p, size_t n) { out_.append(static_cast<const char*>(p), n); }

bool Reader::raw(void* out, size_t n) {
  if (n > n_ - pos_) return false;
  std::memcpy(out, p_ + pos_, n);
  pos_ += n;
  return true;
}

std::string frame(const std::string& body) {
  Writer w;
  w.u32(uint32_t(body.size()));
  w.bytes(body.data(), body.size());
  return std::move(w.str());
}

Digest SecureSession::mac(bool fromLeader, uint8_t type, uint64_t seq, const char* payload,
                          size_t n) const {
  HmacSha256 h(key_.data(), key_.size());
  uint8_t head[10];
  head[0] = fromLeader ? 'L' : 'F';
  head[1] = type;
  std::memcpy(head + 2, &seq, 8);
  h.update(head, sizeof(head));
  h.update(payload, n);
  return h.finish();
}

std::string SecureSession::seal(uint8_t type, const std::string& payload) {
  uint64_t seq = ++sendSeq_;
  Writer w;
  w.u8(type);
  w.u64(seq);
  w.bytes(payload.data(), payload.size());
  Digest d = mac(leaderSide_, type, seq, payload.data(), payload.size());
  w.bytes(d.data(), kFrameMacSize);
  return std::move(w.str());
}

bool SecureSession::open(const std::string& body, uint8_t* type, std::string* payload) {
  if (body.size() < 1 + 8 + kFrameMacSize) return false;
  uint64_t seq;
  std::memcpy(&seq, body.data() + 1, 8);
  if (seq != recvSeq_ + 1) return false;
  size_t n = body.size() - 1 - 8 - kFrameMacSize;
  const char* p = body.data() + 9;
  Digest d = mac(!leaderSide_, uint8_t(body[0]), seq, p, n);
  if (!equalConstantTime(d.data(), reinterpret_cast<const uint8_t*>(p + n), kFrameMacSize)) {
    return false;
  }
  recvSeq_ = seq;
  *type = uint8_t(body[0]);
  payload->assign(p, n);
  return true;
}

void encodeTable(const DecisionTable& table, Writer* w) {
  // Sparse: only the contexts the tuner acts on (usually a few dozen of the 960).
  uint32_t n = 0;
  for (const ContextDecision& d : table.entries) n += !d.untouched();
  w->u32(n);
  for (int ctx = 0; ctx < kNumContexts; ++ctx) {
    const ContextDecision& d = table.entries[ctx];
    if (d.untouched()) continue;
    w->u16(uint16_t(ctx));
    w->u8(uint8_t(d.primary));
    w->u8(uint8_t(d.explore));
    w->u8(d.period);
    w->u8(d.budget);
    w->u16(d.generation);
    w->u8(d.primaryChannels);
    w->u8(d.exploreChannels);
  }
}

bool decodeTable(Reader* r, DecisionTable* table) {
  *table = DecisionTable{};
  uint32_t n;
  if (!r->u32(&n) || n > uint32_t(kNumContexts)) return false;
  int previous = -1;
  for (uint32_t i = 0; i < n; ++i) {
    uint16_t ctx, generation;
    uint8_t primary, explore, period, budget, primaryChannels, exploreChannels;
    if (!r->u16(&ctx) || !r->u8(&primary) || !r->u8(&explore) || !r->u8(&period) ||
        !r->u8(&budget) || !r->u16(&generation) || !r->u8(&primaryChannels) ||
        !r->u8(&exploreChannels)) {
      return false;
    }
    if (int(ctx) <= previous || ctx >= kNumContexts) return false;  // sorted, unique, in range
    previous = ctx;
    ContextDecision& d = table->entries[ctx];
    d.primary = int8_t(primary);
    d.explore = int8_t(explore);
    d.period = period;
    d.budget = budget;
    d.generation = generation;
    d.primaryChannels = primaryChannels;
    d.exploreChannels = exploreChannels;
    if (d.primary < -1 || d.primary >= kNumArms || d.explore < -1 || d.explore >= kNumArms) {
      return false;
    }
    // A halved arm carries its count, and only a halved arm carries one.
    auto countFits = [](int arm, uint8_t n) {
      return arm >= 0 && armHalvesChannels(arm) ? n > 0 : n == 0;
    };
    if (!countFits(d.primary, d.primaryChannels) || !countFits(d.explore, d.exploreChannels))
      return false;
    if (d.explore >= 0 && (d.period == 0 || d.budget == 0)) return false;
    if (d.untouched()) return false;
  }
  return r->remaining() == 0;
}

}  // namespace autopilot::tuner::wire
