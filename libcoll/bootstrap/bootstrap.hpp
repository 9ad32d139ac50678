// Bootstrap: how ranks find each other before any window exists. It carries
// only setup data (addresses, keys, host names); after setup every byte
// moves by one-sided writes through a Transport.
#pragma once

#include <cstddef>
#include <cstdint>
#include <exception>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include <coll/coll.h>

namespace coll {

class Bootstrap {
 public:
  virtual ~Bootstrap() = default;

  virtual const char* name() const = 0;  // "collrun", "pmix", "pmi", "singleton"
  virtual int rank() const = 0;
  virtual int size() const = 0;
  // A string that names this job and no other running one on this host:
  // used in names of shared-memory segments so that a launcher can clean up.
  virtual std::string job_id() const = 0;
  // The job's secret (job_secret.hpp): job_secret::kSecretBytes bytes that
  // every rank of this job holds and no other process does. What a
  // transport's connections prove (tcp); never printed. collrun hands it to
  // its ranks (COLL_JOB_SECRET), PMIx carries rank 0's through its
  // key-value store, a singleton makes its own.
  virtual const std::string& secret() const = 0;

  // Collective over all ranks: every rank passes its blob, every rank gets
  // all blobs indexed by rank. Bounded by timeout_s; throws coll::Error
  // (COLL_ERR_TIMEOUT, COLL_ERR_PEER_LOST, ...) on failure. A failure is
  // sticky: the ranks are out of step after it, so every later call throws
  // the same error and exchanges nothing.
  std::vector<std::string> allgather(const std::string& mine, double timeout_s);

  void barrier(double timeout_s) { allgather(std::string(), timeout_s); }

  // A round among `members` (world ranks, strictly increasing, this rank
  // among them) that survives their deaths: every member that calls it
  // passes the same key and members and its blob, and gets, for each
  // member in order, that member's blob or nullopt where the member is
  // dead (ended before sending its blob). Every caller gets the same
  // answer. A member still alive that has not joined after timeout_s is
  // killed by the launcher and counted dead, so the answer stays the same
  // for everyone (a silent member is a failed one). Rounds are independent
  // of allgather's: a failed allgather does not fail them, and they do not
  // make allgather's failures go away. Throws coll::Error:
  // COLL_ERR_INVALID_ARG when members differ between callers of one key
  // (naming both lists' sizes and a rank that differs) or the backend has no
  // such rounds (the default: "needs collrun's bootstrap; this job's is
  // <name>"); COLL_ERR_PEER_LOST when the launcher itself is gone;
  // COLL_ERR_TIMEOUT if no answer within 2 * timeout_s + 5 s.
  virtual std::vector<std::optional<std::string>> survivor_round(uint64_t key,
                                                                 const std::vector<int>& members,
                                                                 const std::string& mine,
                                                                 double timeout_s);

  // Whether a barrier after a rank's death ends promptly - completed among
  // the living or failed at once - instead of waiting for the dead until
  // the timeout: a launcher that reaps its ranks knows (collrun). Context::
  // finalize meets the others at its barrier after a death only then.
  virtual bool barrier_survives_deaths() const { return false; }

  // coll_finalize is done with the job: tells the launcher, where it
  // listens (collrun's kLeaving), that this rank finalized. Best effort,
  // never throws: the rank is leaving either way.
  virtual void leave() noexcept {}

 protected:
  // One round of allgather, as the backend runs it.
  virtual std::vector<std::string> exchange(const std::string& mine, double timeout_s) = 0;

 private:
  std::exception_ptr failure_;
};

// n bytes from getrandom(2) for a secret or a nonce (job_secret::
// random_bytes in libcoll's error model): COLL_ERR_NO_RESOURCES, naming
// `what`, when the kernel has none to give.
std::string secure_random_bytes(size_t n, const char* what);

// The job's secret as rank 0 makes it and boot's allgather carries it to
// every rank (the PMIx and PMI bootstraps: their servers' key-value stores
// are the job's). Throws COLL_ERR_INTERNAL when rank 0's is not
// job_secret::kSecretBytes long.
std::string secret_from_rank0(Bootstrap& boot, double timeout_s);

// The helpers the backends share to read what their launcher set.
// getenv(name), with an empty value taken as unset (nullptr).
const char* env_or_null(const char* name);
// The integer in [min, max] that variable `name` holds. A launcher's
// variable `announcing` being set is what chose this bootstrap, so a
// missing `name` says that this process was not started by `launcher`;
// COLL_ERR_INVALID_ARG for a missing, malformed or out-of-range value.
long long launcher_integer(const char* name, long long min, long long max, const char* announcing,
                           const char* launcher);
// A job id (Bootstrap::job_id) from the name a launcher gives its job:
// prefix, then the name's first 64 characters with anything but a letter
// or a digit made '_' (it becomes part of shared-memory segment names).
std::string job_id_from_launcher_name(const char* prefix, std::string_view name);

// Chooses from the environment: PMIx server, then collrun (COLL_BOOTSTRAP
// set), then a PMI-1 server (PMI_FD set: mpirun.mpich), then a singleton.
std::unique_ptr<Bootstrap> make_bootstrap_from_environment(double timeout_s);

std::unique_ptr<Bootstrap> make_singleton_bootstrap();
// The caller's allgather (coll_init_oob; oob_bootstrap.cpp), checked by
// the caller: rank in [0, size), allgather set. Agrees on the job's id and
// secret through it before it returns.
std::unique_ptr<Bootstrap> make_oob_bootstrap(const coll_oob_t& oob, double timeout_s);
// nullptr when COLL_BOOTSTRAP is not set.
std::unique_ptr<Bootstrap> make_collrun_bootstrap(double timeout_s);

// True when PMIX_RANK, PMIX_NAMESPACE or a PMIX_SERVER_URI* variable is set:
// a PMIx launcher (mpirun, srun --mpi=pmix) started this process.
bool environment_names_pmix_server();
// COLL_BOOTSTRAP_DEBUG=1: say on stderr which bootstrap ran, and why one
// was passed over.
bool bootstrap_debug_enabled();
// nullptr when the environment names no PMIx server or PMIx_Init fails.
// Defined only when libcoll is built with PMIx (COLL_HAVE_PMIX).
std::unique_ptr<Bootstrap> make_pmix_bootstrap(double timeout_s);

// True when PMI_FD is set: a PMI-1 launcher (MPICH's Hydra: mpirun.mpich,
// mpiexec.hydra) started this process.
bool environment_names_pmi_server();
// nullptr when the environment names no PMI-1 server; throws when it
// names one that cannot be used (PMI_RANK or PMI_SIZE missing, PMI_FD not
// an open socket, the server refusing).
std::unique_ptr<Bootstrap> make_pmi_bootstrap(double timeout_s);

}  // namespace coll
