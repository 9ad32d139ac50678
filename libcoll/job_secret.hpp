// The job secret: what proves that a process belongs to a job (issue 15).
//
// collrun makes 256 random bits per job (getrandom) and hands them to its
// ranks in COLL_JOB_SECRET, as 64 hex digits: in a local rank's
// environment, and to a remote rank through its launch agent's standard
// input, never on a command line (ps shows those to every user). A
// process's environment is readable by its own user and root only.
//
// The secret never travels itself: a rank's bootstrap hello carries
// HMAC-SHA256(secret, what it says || the nonce collrun sent on that
// connection), so a hello seen on the wire cannot be replayed on another
// connection, and collrun's welcome carries one over the rank's nonce, so
// a rank knows it talks to its own collrun. Comparisons take the same time
// whatever the bytes (no early exit), and no message prints a secret, a
// nonce or a proof.
//
// SHA-256 as FIPS 180-4 defines it and HMAC as RFC 2104 does, written here
// so that libcoll needs no crypto library; checked against the standards'
// test vectors (tests/unit/job_secret_test.cpp).
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>

namespace coll::job_secret {

inline constexpr const char* kEnv = "COLL_JOB_SECRET";
inline constexpr size_t kSecretBytes = 32;  // 256 bits
inline constexpr size_t kNonceBytes = 32;
using Digest = std::array<uint8_t, 32>;

Digest sha256(std::string_view data);
Digest hmac_sha256(std::string_view key, std::string_view message);

// Whether a and b (n bytes each) are equal, in a time that does not depend
// on where they differ.
bool equal(const uint8_t* a, const uint8_t* b, size_t n);

// n random bytes from getrandom(2); throws std::system_error when the
// kernel has none to give (a secret must never be guessable). (No
// coll::Error here: collrun compiles this file without libcoll.)
std::string random_bytes(size_t n);

// A new secret, as its 64 hex digits.
std::string make();

// The secret in hex (COLL_JOB_SECRET) as its bytes; false when text is not
// 64 hex digits.
bool decode(std::string_view text, std::string* bytes);

// The proof that the holder of `secret` says `statement` on the connection
// whose peer sent `nonce`. `role` keeps a rank's proof from ever being
// valid as collrun's and the other way round.
Digest prove(std::string_view secret, std::string_view role, std::string_view nonce,
             std::string_view statement);

}  // namespace coll::job_secret
