#include "job_secret.hpp"

#include <sys/random.h>

#include <cerrno>
#include <cstring>
#include <system_error>

namespace coll::job_secret {
namespace {

// FIPS 180-4, 4.2.2: the first 32 bits of the fractional parts of the cube
// roots of the first 64 primes.
constexpr uint32_t kRound[64] = {
    0x428a2f98, 0x71374491, 0xb5c0fbcf, 0xe9b5dba5, 0x3956c25b, 0x59f111f1, 0x923f82a4, 0xab1c5ed5,
    0xd807aa98, 0x12835b01, 0x243185be, 0x550c7dc3, 0x72be5d74, 0x80deb1fe, 0x9bdc06a7, 0xc19bf174,
    0xe49b69c1, 0xefbe4786, 0x0fc19dc6, 0x240ca1cc, 0x2de92c6f, 0x4a7484aa, 0x5cb0a9dc, 0x76f988da,
    0x983e5152, 0xa831c66d, 0xb00327c8, 0xbf597fc7, 0xc6e00bf3, 0xd5a79147, 0x06ca6351, 0x14292967,
    0x27b70a85, 0x2e1b2138, 0x4d2c6dfc, 0x53380d13, 0x650a7354, 0x766a0abb, 0x81c2c92e, 0x92722c85,
    0xa2bfe8a1, 0xa81a664b, 0xc24b8b70, 0xc76c51a3, 0xd192e819, 0xd6990624, 0xf40e3585, 0x106aa070,
    0x19a4c116, 0x1e376c08, 0x2748774c, 0x34b0bcb5, 0x391c0cb3, 0x4ed8aa4a, 0x5b9cca4f, 0x682e6ff3,
    0x748f82ee, 0x78a5636f, 0x84c87814, 0x8cc70208, 0x90befffa, 0xa4506ceb, 0xbef9a3f7, 0xc67178f2};

// 5.3.3: the first 32 bits of the fractional parts of the square roots of
// the first 8 primes.
constexpr uint32_t kInitial[8] = {0x6a09e667, 0xbb67ae85, 0x3c6ef372, 0xa54ff53a,
                                  0x510e527f, 0x9b05688c, 0x1f83d9ab, 0x5be0cd19};

constexpr uint32_t rotr(uint32_t x, int n) { return (x >> n) | (x << (32 - n)); }

class Sha256 {
 public:
  void update(std::string_view data) {
    for (unsigned char c : data) {
      block_[filled_++] = c;
      if (filled_ == 64) {
        compress();
        filled_ = 0;
      }
    }
    bits_ += uint64_t(data.size()) * 8;
  }
  Digest finish() {
    // 5.1.1: a 1 bit, zeros up to 56 mod 64 bytes, the length in bits.
    const uint64_t bits = bits_;
    const unsigned char one = 0x80, zero = 0;
    update(std::string_view(reinterpret_cast<const char*>(&one), 1));
    while (filled_ != 56) update(std::string_view(reinterpret_cast<const char*>(&zero), 1));
    unsigned char length[8];
    for (int i = 0; i < 8; ++i) length[i] = uint8_t(bits >> (56 - 8 * i));
    update(std::string_view(reinterpret_cast<const char*>(length), 8));
    Digest out;
    for (int i = 0; i < 8; ++i)
      for (int j = 0; j < 4; ++j) out[size_t(4 * i + j)] = uint8_t(state_[i] >> (24 - 8 * j));
    return out;
  }

 private:
  // 6.2.2: one 512-bit block.
  void compress() {
    uint32_t w[64];
    for (int t = 0; t < 16; ++t)
      w[t] = uint32_t(block_[4 * t]) << 24 | uint32_t(block_[4 * t + 1]) << 16 |
             uint32_t(block_[4 * t + 2]) << 8 | uint32_t(block_[4 * t + 3]);
    for (int t = 16; t < 64; ++t) {
      const uint32_t s0 = rotr(w[t - 15], 7) ^ rotr(w[t - 15], 18) ^ (w[t - 15] >> 3);
      const uint32_t s1 = rotr(w[t - 2], 17) ^ rotr(w[t - 2], 19) ^ (w[t - 2] >> 10);
      w[t] = w[t - 16] + s0 + w[t - 7] + s1;
    }
    uint32_t a = state_[0], b = state_[1], c = state_[2], d = state_[3];
    uint32_t e = state_[4], f = state_[5], g = state_[6], h = state_[7];
    for (int t = 0; t < 64; ++t) {
      const uint32_t t1 = h + (rotr(e, 6) ^ rotr(e, 11) ^ rotr(e, 25)) + ((e & f) ^ (~e & g)) +
                          kRound[t] + w[t];
      const uint32_t t2 = (rotr(a, 2) ^ rotr(a, 13) ^ rotr(a, 22)) + ((a & b) ^ (a & c) ^ (b & c));
      h = g;
      g = f;
      f = e;
      e = d + t1;
      d = c;
      c = b;
      b = a;
      a = t1 + t2;
    }
    state_[0] += a;
    state_[1] += b;
    state_[2] += c;
    state_[3] += d;
    state_[4] += e;
    state_[5] += f;
    state_[6] += g;
    state_[7] += h;
  }

  uint32_t state_[8] = {kInitial[0], kInitial[1], kInitial[2], kInitial[3],
                        kInitial[4], kInitial[5], kInitial[6], kInitial[7]};
  unsigned char block_[64] = {};
  size_t filled_ = 0;
  uint64_t bits_ = 0;
};

std::string_view view(const Digest& d) {
  return std::string_view(reinterpret_cast<const char*>(d.data()), d.size());
}

}  // namespace

Digest sha256(std::string_view data) {
  Sha256 h;
  h.update(data);
  return h.finish();
}

Digest hmac_sha256(std::string_view key, std::string_view message) {
  // RFC 2104: a key longer than the block is hashed first; then
  // H((K ^ opad) || H((K ^ ipad) || message)).
  unsigned char k[64] = {};
  if (key.size() > 64) {
    const Digest kd = sha256(key);
    std::memcpy(k, kd.data(), kd.size());
  } else {
    std::memcpy(k, key.data(), key.size());
  }
  char inner_pad[64], outer_pad[64];
  for (int i = 0; i < 64; ++i) {
    inner_pad[i] = char(k[i] ^ 0x36);
    outer_pad[i] = char(k[i] ^ 0x5c);
  }
  Sha256 inner;
  inner.update(std::string_view(inner_pad, 64));
  inner.update(message);
  const Digest inner_digest = inner.finish();
  Sha256 outer;
  outer.update(std::string_view(outer_pad, 64));
  outer.update(view(inner_digest));
  return outer.finish();
}

bool equal(const uint8_t* a, const uint8_t* b, size_t n) {
  volatile uint8_t diff = 0;  // every byte is looked at
  for (size_t i = 0; i < n; ++i) diff = diff | uint8_t(a[i] ^ b[i]);
  return diff == 0;
}

std::string random_bytes(size_t n) {
  std::string out(n, '\0');
  size_t got = 0;
  while (got < n) {
    const ssize_t r = getrandom(out.data() + got, n - got, 0);
    if (r < 0 && errno == EINTR) continue;
    if (r <= 0) throw std::system_error(errno, std::generic_category(), "getrandom");
    got += size_t(r);
  }
  return out;
}

std::string make() {
  static const char kHex[] = "0123456789abcdef";
  const std::string bytes = random_bytes(kSecretBytes);
  std::string hex;
  for (unsigned char c : bytes) {
    hex += kHex[c >> 4];
    hex += kHex[c & 15];
  }
  return hex;
}

bool decode(std::string_view text, std::string* bytes) {
  if (text.size() != 2 * kSecretBytes) return false;
  auto nibble = [](char c) {
    if (c >= '0' && c <= '9') return c - '0';
    if (c >= 'a' && c <= 'f') return c - 'a' + 10;
    if (c >= 'A' && c <= 'F') return c - 'A' + 10;
    return -1;
  };
  std::string out;
  for (size_t i = 0; i < text.size(); i += 2) {
    const int hi = nibble(text[i]), lo = nibble(text[i + 1]);
    if (hi < 0 || lo < 0) return false;
    out += char(hi << 4 | lo);
  }
  *bytes = std::move(out);
  return true;
}

Digest prove(std::string_view secret, std::string_view role, std::string_view nonce,
             std::string_view statement) {
  // Length-prefixed parts: no two different (role, nonce, statement) give
  // the same message.
  std::string message;
  for (std::string_view part : {role, nonce, statement}) {
    const uint32_t n = uint32_t(part.size());
    message.append(reinterpret_cast<const char*>(&n), sizeof n);
    message.append(part);
  }
  return hmac_sha256(secret, message);
}

}  // namespace coll::job_secret
