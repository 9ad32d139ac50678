// The out-of-band bootstrap: an allgather the caller hands to coll_init_oob
// (a framework's own rendezvous - torch's Store, a key-value service - where
// no launcher of libcoll's started the job; UCC's ucc_oob_coll is the
// model). The callback moves equal-sized blobs; libcoll's blobs are not
// equal-sized, so each exchange is two rounds: the lengths, then every blob
// padded to the longest.
//
// What libcoll cannot do here: bound the time. The callback blocks in the
// caller's rendezvous, whose own timeout is the only one (timeout_s is
// ignored); a rank that never calls leaves the others in the callback.
#include <coll/coll.h>

#include <cstdint>
#include <cstring>
#include <string>
#include <vector>

#include "bootstrap/bootstrap.hpp"
#include "error.hpp"
#include "job_secret.hpp"

namespace coll {
namespace {

// A blob larger than this is no bootstrap blob of libcoll's: a rank that
// says so has a callback that did not move what it was given.
constexpr uint64_t kMaxBlobBytes = uint64_t(1) << 26;

class OobBootstrap final : public Bootstrap {
 public:
  explicit OobBootstrap(const coll_oob_t& oob) : oob_(oob) {}

  const char* name() const override { return "oob"; }
  int rank() const override { return oob_.rank; }
  int size() const override { return oob_.size; }
  std::string job_id() const override { return job_id_; }
  const std::string& secret() const override { return secret_; }

  // Rank 0's secret and a job id from rank 0's nonce: the same on every
  // rank, and no other job's (shared-memory segment names carry it).
  void agree_on_job(double timeout_s) {
    const std::string nonce = rank() == 0 ? secure_random_bytes(8, "the job's id") : "";
    const std::vector<std::string> all = allgather(nonce, timeout_s);
    if (all[0].size() != 8)
      fail(COLL_ERR_INTERNAL, "oob bootstrap: rank 0's job id came as %zu bytes, not 8",
           all[0].size());
    static const char kHex[] = "0123456789abcdef";
    job_id_ = "oob_";
    for (unsigned char c : all[0]) {
      job_id_ += kHex[c >> 4];
      job_id_ += kHex[c & 15];
    }
    secret_ = secret_from_rank0(*this, timeout_s);
  }

 protected:
  std::vector<std::string> exchange(const std::string& mine, double /*timeout_s*/) override {
    const size_t n = static_cast<size_t>(size());
    std::vector<uint64_t> lengths(n);
    const uint64_t my_length = mine.size();
    call(&my_length, lengths.data(), sizeof my_length);
    uint64_t longest = 0;
    for (size_t r = 0; r < n; ++r) {
      if (lengths[r] > kMaxBlobBytes)
        fail(COLL_ERR_INVALID_ARG,
             "oob bootstrap: rank %zu says its blob is %llu bytes (over %llu): the allgather "
             "callback did not move what it was given",
             r, static_cast<unsigned long long>(lengths[r]),
             static_cast<unsigned long long>(kMaxBlobBytes));
      if (lengths[r] > longest) longest = lengths[r];
    }
    if (longest == 0) return std::vector<std::string>(n);
    std::string padded = mine;
    padded.resize(longest);
    std::string all(longest * n, '\0');
    call(padded.data(), all.data(), longest);
    std::vector<std::string> blobs(n);
    for (size_t r = 0; r < n; ++r) blobs[r] = all.substr(r * longest, lengths[r]);
    if (blobs[static_cast<size_t>(rank())] != mine)
      fail(COLL_ERR_INVALID_ARG,
           "oob bootstrap: the allgather callback did not put this rank's (%d) bytes at "
           "recvbuf + rank * bytes",
           rank());
    return blobs;
  }

 private:
  void call(const void* send, void* recv, size_t bytes) {
    ++round_;
    const int status = oob_.allgather(send, recv, bytes, oob_.state);
    if (status == COLL_SUCCESS) return;
    // The callback's own status where it is one of libcoll's; anything
    // else is a peer the rendezvous could not reach.
    const int passed = status > COLL_SUCCESS && status <= COLL_ERR_INTERNAL ? status
                                                                            : COLL_ERR_PEER_LOST;
    fail(passed, "oob bootstrap: the allgather callback failed (returned %d) in round %llu",
         status, static_cast<unsigned long long>(round_));
  }

  coll_oob_t oob_;
  std::string job_id_ = "oob_unset";
  std::string secret_;
  uint64_t round_ = 0;
};

}  // namespace

std::unique_ptr<Bootstrap> make_oob_bootstrap(const coll_oob_t& oob, double timeout_s) {
  auto bootstrap = std::make_unique<OobBootstrap>(oob);
  bootstrap->agree_on_job(timeout_s);
  return bootstrap;
}

}  // namespace coll
