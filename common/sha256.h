// SHA-256 (FIPS 180-4) and HMAC-SHA256 (RFC 2104), implemented here so that the library keeps
// no link-time dependency (it must load on a bare machine). Used to authenticate the tuner's
// control channel, and to name communicators in exports (comm_tag.h); not on any hot path.
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>

namespace autopilot {

using Digest = std::array<uint8_t, 32>;

class Sha256 {
 public:
  Sha256();
  void update(const void* data, size_t size);
  Digest finish();  // the object must not be updated afterwards

  static Digest hash(const void* data, size_t size);

 private:
  void block(const uint8_t* p);
  uint32_t h_[8];
  uint8_t buf_[64];
  size_t bufLen_ = 0;
  uint64_t totalBytes_ = 0;
};

class HmacSha256 {
 public:
  HmacSha256(const void* key, size_t keySize);
  void update(const void* data, size_t size) { inner_.update(data, size); }
  Digest finish();

  static Digest mac(const void* key, size_t keySize, const void* data, size_t size);

 private:
  Sha256 inner_;
  uint8_t outerPad_[64];
};

// Constant-time comparison of the first n bytes.
bool equalConstantTime(const uint8_t* a, const uint8_t* b, size_t n);

}  // namespace autopilot
