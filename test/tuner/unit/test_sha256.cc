// SHA-256 and HMAC-SHA256 against the published test vectors (FIPS 180-4 examples, RFC 4231).
#include <catch2/catch.hpp>
#include <string>

#include "common/sha256.h"

using namespace autopilot;

namespace {
std::string hex(const Digest& d) {
  static const char* k = "0123456789abcdef";
  std::string s;
  for (uint8_t b : d) {
    s += k[b >> 4];
    s += k[b & 15];
  }
  return s;
}
}  // namespace

TEST_CASE("SHA-256 test vectors", "[sha256]") {
  CHECK(hex(Sha256::hash("", 0)) ==
        "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855");
  CHECK(hex(Sha256::hash("abc", 3)) ==
        "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad");
  std::string two = "abcdbcdecdefdefgefghfghighijhijkijkljklmklmnlmnomnopnopq";
  CHECK(hex(Sha256::hash(two.data(), two.size())) ==
        "248d6a61d20638b8e5c026930c3e6039a33ce45964ff2167f6ecedd419db06c1");
  Sha256 s;
  std::string a(1000, 'a');
  for (int i = 0; i < 1000; ++i) s.update(a.data(), a.size());  // one million 'a', in pieces
  CHECK(hex(s.finish()) == "cdc76e5c9914fb9281a1c7e284d73e67f1809a48a497200e046d39ccc7112cd0");
}

TEST_CASE("HMAC-SHA256 test vectors (RFC 4231)", "[sha256]") {
  std::string key1(20, '\x0b');
  CHECK(hex(HmacSha256::mac(key1.data(), key1.size(), "Hi There", 8)) ==
        "b0344c61d8db38535ca8afceaf0bf12b881dc200c9833da726e9376c2e32cff7");
  std::string data2 = "what do ya want for nothing?";
  CHECK(hex(HmacSha256::mac("Jefe", 4, data2.data(), data2.size())) ==
        "5bdcc146bf60754e6a042426089575c75a003f089d2739839dec58b964ec3843");
  std::string key6(131, '\xaa');  // longer than a block: hashed first
  std::string data6 = "Test Using Larger Than Block-Size Key - Hash Key First";
  CHECK(hex(HmacSha256::mac(key6.data(), key6.size(), data6.data(), data6.size())) ==
        "60e431591ee0b67f0d8a26aacbf5b77f8e0bc6213728c5140546040f0ee37f54");
  uint8_t x[4] = {1, 2, 3, 4}, y[4] = {1, 2, 3, 5};
  CHECK(equalConstantTime(x, x, 4));
  CHECK_FALSE(equalConstantTime(x, y, 4));
  CHECK(equalConstantTime(x, y, 3));
}
