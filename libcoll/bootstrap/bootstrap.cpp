// Choosing a bootstrap from the environment, and the singleton bootstrap
// used when no launcher started this process.
#include "bootstrap/bootstrap.hpp"

#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string_view>
#include <system_error>

#include "error.hpp"
#include "job_secret.hpp"

extern char** environ;

namespace coll {
namespace {

// A job of one: allgather hands back the caller's own blob.
class SingletonBootstrap final : public Bootstrap {
 public:
  // A job of one has no peer to prove anything to: its secret is only
  // there so that no bootstrap hands a transport an empty one.
  SingletonBootstrap()
      : job_id_("single" + std::to_string(static_cast<long>(::getpid()))),
        secret_(secure_random_bytes(job_secret::kSecretBytes, "a singleton's job secret")) {}

  const char* name() const override { return "singleton"; }
  int rank() const override { return 0; }
  int size() const override { return 1; }
  std::string job_id() const override { return job_id_; }
  const std::string& secret() const override { return secret_; }

  // The only member is this rank, alive.
  std::vector<std::optional<std::string>> survivor_round(uint64_t key,
                                                         const std::vector<int>& members,
                                                         const std::string& mine,
                                                         double /*timeout_s*/) override {
    if (members != std::vector<int>{0})
      fail(COLL_ERR_INVALID_ARG,
           "survivors' round %llu of a job of one: members must be {0}, not %zu ranks "
           "starting at %d",
           static_cast<unsigned long long>(key), members.size(),
           members.empty() ? -1 : members.front());
    return {mine};
  }

 protected:
  std::vector<std::string> exchange(const std::string& mine, double /*timeout_s*/) override {
    return {mine};
  }

 private:
  std::string job_id_;
  std::string secret_;
};

std::unique_ptr<Bootstrap> announce(std::unique_ptr<Bootstrap> bootstrap) {
  if (bootstrap_debug_enabled())
    std::fprintf(stderr, "libcoll: bootstrap %s: rank %d of %d, job id %s\n", bootstrap->name(),
                 bootstrap->rank(), bootstrap->size(), bootstrap->job_id().c_str());
  return bootstrap;
}

// The job size a launcher announces in its own variables, or 0 when it
// names none: Open MPI's mpirun sets OMPI_COMM_WORLD_SIZE, Slurm's srun
// SLURM_NTASKS (SLURM_NPROCS in older releases).
long launcher_job_size(const char** variable) {
  for (const char* name : {"OMPI_COMM_WORLD_SIZE", "SLURM_NTASKS", "SLURM_NPROCS"}) {
    const char* text = std::getenv(name);
    if (!text || !*text) continue;
    char* end = nullptr;
    long size = std::strtol(text, &end, 10);
    if (*end == '\0' && size > 0) {
      *variable = name;
      return size;
    }
  }
  return 0;
}

}  // namespace

std::vector<std::string> Bootstrap::allgather(const std::string& mine, double timeout_s) {
  if (failure_) std::rethrow_exception(failure_);
  try {
    return exchange(mine, timeout_s);
  } catch (const Error&) {
    failure_ = std::current_exception();
    throw;
  }
}

// Only a launcher that reaps the ranks knows for certain which died.
std::vector<std::optional<std::string>> Bootstrap::survivor_round(
    uint64_t key, const std::vector<int>& /*members*/, const std::string& /*mine*/,
    double /*timeout_s*/) {
  fail(COLL_ERR_INVALID_ARG,
       "survivors' round %llu needs collrun's bootstrap; this job's is %s (start it with "
       "collrun)",
       static_cast<unsigned long long>(key), name());
}

std::string secure_random_bytes(size_t n, const char* what) {
  try {
    return job_secret::random_bytes(n);
  } catch (const std::system_error& e) {
    fail(COLL_ERR_NO_RESOURCES, "no random bytes for %s: %s", what, e.what());
  }
}

std::string secret_from_rank0(Bootstrap& boot, double timeout_s) {
  const std::string mine =
      boot.rank() == 0 ? secure_random_bytes(job_secret::kSecretBytes, "the job secret") : "";
  const std::vector<std::string> all = boot.allgather(mine, timeout_s);
  if (all.empty() || all[0].size() != job_secret::kSecretBytes)
    fail(COLL_ERR_INTERNAL, "%s bootstrap: rank 0's job secret came as %zu bytes, not %zu (job %s)",
         boot.name(), all.empty() ? size_t(0) : all[0].size(), job_secret::kSecretBytes,
         boot.job_id().c_str());
  return all[0];
}

const char* env_or_null(const char* name) {
  const char* value = std::getenv(name);
  return (value && *value) ? value : nullptr;
}

long long launcher_integer(const char* name, long long min, long long max, const char* announcing,
                           const char* launcher) {
  const char* text = env_or_null(name);
  if (!text)
    fail(COLL_ERR_INVALID_ARG, "%s is set but %s is not: was this process started by %s?",
         announcing, name, launcher);
  errno = 0;
  char* end = nullptr;
  long long value = std::strtoll(text, &end, 10);
  if (errno != 0 || end == text || *end != '\0' || value < min || value > max)
    fail(COLL_ERR_INVALID_ARG, "%s='%s' is not an integer in [%lld, %lld]", name, text, min, max);
  return value;
}

std::string job_id_from_launcher_name(const char* prefix, std::string_view name) {
  std::string id = prefix;
  for (char c : name.substr(0, 64)) {
    bool ok = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9');
    id += ok ? c : '_';
  }
  return id;
}

bool bootstrap_debug_enabled() {
  const char* value = std::getenv("COLL_BOOTSTRAP_DEBUG");
  return value && *value && std::strcmp(value, "0") != 0;
}

bool environment_names_pmix_server() {
  if (std::getenv("PMIX_RANK") || std::getenv("PMIX_NAMESPACE")) return true;
  // PMIX_SERVER_URI, PMIX_SERVER_URI2, PMIX_SERVER_URI21, PMIX_SERVER_URI4...
  for (char** entry = environ; entry && *entry; ++entry)
    if (std::string_view(*entry).starts_with("PMIX_SERVER_URI")) return true;
  return false;
}

std::unique_ptr<Bootstrap> make_singleton_bootstrap() {
  return std::make_unique<SingletonBootstrap>();
}

std::unique_ptr<Bootstrap> make_bootstrap_from_environment(double timeout_s) {
  bool pmix_named = environment_names_pmix_server();
#ifdef COLL_HAVE_PMIX
  if (pmix_named)
    if (auto bootstrap = make_pmix_bootstrap(timeout_s)) return announce(std::move(bootstrap));
  const char* why_not_pmix = "PMIx_Init failed (COLL_BOOTSTRAP_DEBUG=1 shows why)";
#else
  const char* why_not_pmix = "libcoll was built without PMIx (meson setup -Dpmix=enabled)";
#endif
  if (auto bootstrap = make_collrun_bootstrap(timeout_s)) return announce(std::move(bootstrap));
  if (auto bootstrap = make_pmi_bootstrap(timeout_s)) return announce(std::move(bootstrap));
  // Hydra's -pmi-port mode names a server to dial (PMI_PORT, PMI_ID)
  // instead of handing over a socket, and not the job's size: whether this
  // rank is alone cannot be known, so refuse rather than risk a world of one.
  if (std::getenv("PMI_PORT"))
    fail(COLL_ERR_INVALID_ARG,
         "PMI_PORT is set (mpirun.mpich -pmi-port?): that mode is not supported; without it "
         "Hydra hands each rank a socket in PMI_FD, which libcoll uses");
  if (pmix_named) {
    // Going on alone would give every rank a world of one and silently
    // wrong results; refuse when the launcher says the job is bigger.
    const char* variable = nullptr;
    long job_size = launcher_job_size(&variable);
    if (job_size > 1)
      fail(COLL_ERR_INVALID_ARG,
           "a PMIx launcher started this process in a job of %ld (%s) but %s; "
           "start the job with collrun instead",
           job_size, variable, why_not_pmix);
    if (bootstrap_debug_enabled())
      std::fprintf(stderr, "libcoll: PMIx not used: %s\n", why_not_pmix);
  }
  return announce(make_singleton_bootstrap());
}

}  // namespace coll
