// The bootstraps: the collrun client against a scripted fake collrun (every
// error path, in-process), collrun's rendezvous server against malformed
// clients, the choice from the environment, and real jobs under collrun at
// several sizes (bootstrap_helper.cpp).
#include <arpa/inet.h>
#include <gtest/gtest.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cstdlib>
#include <functional>
#include <optional>
#include <regex>
#include <string>
#include <thread>
#include <vector>

#include "bootstrap/bootstrap.hpp"
#include "bootstrap/collrun_protocol.hpp"
#include "bootstrap/unique_fd.hpp"
#include "error.hpp"
#include "job_secret.hpp"
#include "run_process.hpp"

namespace collrun_test {
namespace {

namespace proto = coll::collrun_protocol;
using proto::MessageType;

// Sets environment variables for one test and restores them after.
class ScopedEnv {
 public:
  ScopedEnv& set(const char* name, const std::string& value) {
    remember(name);
    ::setenv(name, value.c_str(), 1);
    return *this;
  }
  ScopedEnv& unset(const char* name) {
    remember(name);
    ::unsetenv(name);
    return *this;
  }
  ~ScopedEnv() {
    for (auto it = saved_.rbegin(); it != saved_.rend(); ++it) {
      if (it->second)
        ::setenv(it->first.c_str(), it->second->c_str(), 1);
      else
        ::unsetenv(it->first.c_str());
    }
  }

 private:
  void remember(const char* name) {
    const char* old = std::getenv(name);
    saved_.emplace_back(name, old ? std::optional<std::string>(old) : std::nullopt);
  }
  std::vector<std::pair<std::string, std::optional<std::string>>> saved_;
};

// No launcher around: the test itself may run under one.
void clear_launcher_env(ScopedEnv& env) {
  for (const char* name :
       {"COLL_BOOTSTRAP", "COLL_RANK", "COLL_SIZE", "COLL_JOBID", "COLL_JOB_SECRET", "PMIX_RANK",
        "PMIX_NAMESPACE",
        "PMIX_SERVER_URI", "PMIX_SERVER_URI2", "PMIX_SERVER_URI21", "PMIX_SERVER_URI3",
        "PMIX_SERVER_URI4", "PMIX_SERVER_URI41", "OMPI_COMM_WORLD_SIZE", "SLURM_NTASKS",
        "SLURM_NPROCS"})
    env.unset(name);
}

// ---------------------------------------------------------------------------
// Frames on a blocking test socket, each wait bounded.

bool read_exactly(int fd, char* out, size_t length) {
  size_t got = 0;
  while (got < length) {
    pollfd p{fd, POLLIN, 0};
    if (::poll(&p, 1, 20000) <= 0) return false;
    ssize_t n = ::recv(fd, out + got, length - got, 0);
    if (n <= 0) return false;
    got += static_cast<size_t>(n);
  }
  return true;
}

struct Frame {
  uint32_t type = 0;
  std::string payload;
};

std::optional<Frame> read_frame(int fd) {
  char header[proto::kHeaderBytes];
  if (!read_exactly(fd, header, sizeof header)) return std::nullopt;
  proto::FrameHeader h = proto::parse_header(header);
  if (h.length > (uint64_t{64} << 20)) return std::nullopt;
  Frame frame{h.type, std::string(h.length, '\0')};
  if (!read_exactly(fd, frame.payload.data(), frame.payload.size())) return std::nullopt;
  return frame;
}

void write_bytes(int fd, const std::string& bytes) {
  size_t done = 0;
  while (done < bytes.size()) {
    ssize_t n = ::send(fd, bytes.data() + done, bytes.size() - done, MSG_NOSIGNAL);
    if (n <= 0) return;
    done += static_cast<size_t>(n);
  }
}

// A fake collrun: accepts one connection and runs `script` on it in a
// thread.
class FakeCollrun {
 public:
  explicit FakeCollrun(std::function<void(int fd)> script) {
    listener_.reset(::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0));
    sockaddr_in address{};
    address.sin_family = AF_INET;
    address.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    socklen_t length = sizeof address;
    EXPECT_EQ(::bind(listener_.get(), reinterpret_cast<sockaddr*>(&address), length), 0);
    EXPECT_EQ(::listen(listener_.get(), 4), 0);
    ::getsockname(listener_.get(), reinterpret_cast<sockaddr*>(&address), &length);
    port_ = ntohs(address.sin_port);
    thread_ = std::thread([this, script] {
      pollfd p{listener_.get(), POLLIN, 0};
      if (::poll(&p, 1, 20000) <= 0) return;
      coll::UniqueFd connection(::accept(listener_.get(), nullptr, nullptr));
      if (connection) script(connection.get());
    });
  }
  ~FakeCollrun() { thread_.join(); }

  std::string address() const { return "127.0.0.1:" + std::to_string(port_); }

 private:
  coll::UniqueFd listener_;
  int port_ = 0;
  std::thread thread_;
};

// The fake collrun's job secret (COLL_JOB_SECRET in the client's
// environment) and its bytes.
constexpr const char* kSecretHex = "00112233445566778899aabbccddeeff00112233445566778899aabbccddeeff";
std::string secret_bytes(const char* hex = kSecretHex) {
  std::string bytes;
  EXPECT_TRUE(coll::job_secret::decode(hex, &bytes));
  return bytes;
}
constexpr char kNonce[] = "0123456789abcdef0123456789abcdef";  // 32 bytes

std::string_view as_view(const coll::job_secret::Digest& d) {
  return std::string_view(reinterpret_cast<const char*>(d.data()), d.size());
}

// Sends the challenge; reads the hello and checks it (fields and proof);
// welcomes with a proof made with `secret` (the job's, unless a test
// plays a collrun that does not know it).
void welcome(int fd, const std::string& secret = secret_bytes()) {
  write_bytes(fd, proto::FrameWriter(MessageType::kChallenge)
                      .put_bytes(std::string_view(kNonce, proto::kNonceBytes))
                      .finish());
  std::optional<Frame> hello = read_frame(fd);
  ASSERT_TRUE(hello.has_value());
  ASSERT_EQ(hello->type, static_cast<uint32_t>(MessageType::kHello));
  proto::PayloadReader reader(hello->payload);
  uint32_t version = 0, rank = 0, size = 0;
  uint64_t epoch = 0, pid = 0;
  std::string_view job, rank_nonce, proof;
  ASSERT_TRUE(reader.get_u32(version) && reader.get_u32(rank) && reader.get_u32(size) &&
              reader.get_u64(epoch) && reader.get_u64(pid) && reader.get_bytes(job, 256) &&
              reader.get_bytes(rank_nonce, 32) && reader.get_bytes(proof, 32) && reader.done());
  EXPECT_EQ(version, proto::kVersion);
  EXPECT_EQ(rank, 0u);
  EXPECT_EQ(size, 2u);
  EXPECT_EQ(pid, static_cast<uint64_t>(::getpid()));
  EXPECT_EQ(job, "fakejob");
  const std::string statement =
      proto::hello_statement(version, rank, size, epoch, pid, job, rank_nonce);
  EXPECT_EQ(proof, as_view(coll::job_secret::prove(secret_bytes(), proto::kRankRole,
                                                   std::string_view(kNonce, 32), statement)))
      << "the hello's proof is not HMAC(secret, nonce, statement)";
  write_bytes(fd, proto::FrameWriter(MessageType::kWelcome)
                      .put_bytes(as_view(coll::job_secret::prove(secret, proto::kCollrunRole,
                                                                 rank_nonce, statement)))
                      .finish());
}

// Reads one round; returns its blob.
std::string read_round(int fd, uint64_t expected_round) {
  std::optional<Frame> frame = read_frame(fd);
  EXPECT_TRUE(frame.has_value());
  if (!frame) return {};
  EXPECT_EQ(frame->type, static_cast<uint32_t>(MessageType::kRound));
  proto::PayloadReader reader(frame->payload);
  uint64_t round = 0;
  std::string_view blob;
  EXPECT_TRUE(reader.get_u64(round) && reader.get_bytes(blob, proto::kMaxBlobBytes) &&
              reader.done());
  EXPECT_EQ(round, expected_round);
  return std::string(blob);
}

std::string result_frame(uint64_t round, const std::vector<std::string>& blobs) {
  proto::FrameWriter writer(MessageType::kResult);
  writer.put_u64(round).put_u32(static_cast<uint32_t>(blobs.size()));
  for (const std::string& blob : blobs) writer.put_bytes(blob);
  return writer.finish();
}

class CollrunClient : public ::testing::Test {
 protected:
  void SetUp() override { clear_launcher_env(env_); }

  void point_at(const FakeCollrun& fake) {
    env_.set("COLL_BOOTSTRAP", fake.address())
        .set("COLL_RANK", "0")
        .set("COLL_SIZE", "2")
        .set("COLL_JOBID", "fakejob")
        .set("COLL_JOB_SECRET", kSecretHex);
  }

  // Runs `body`, which must throw coll::Error; returns it.
  static coll::Error error_of(const std::function<void()>& body) {
    try {
      body();
    } catch (const coll::Error& error) {
      return error;
    }
    ADD_FAILURE() << "no coll::Error thrown";
    return coll::Error(COLL_SUCCESS, "");
  }

  ScopedEnv env_;
};

TEST_F(CollrunClient, AllgatherHandsBackEveryRanksBlob) {
  FakeCollrun fake([](int fd) {
    welcome(fd);
    for (uint64_t round = 1; round <= 2; ++round) {
      std::string mine = read_round(fd, round);
      write_bytes(fd, result_frame(round, {mine, "peer" + std::to_string(round)}));
    }
  });
  point_at(fake);
  auto bootstrap = coll::make_collrun_bootstrap(10);
  ASSERT_NE(bootstrap, nullptr);
  EXPECT_STREQ(bootstrap->name(), "collrun");
  EXPECT_EQ(bootstrap->rank(), 0);
  EXPECT_EQ(bootstrap->size(), 2);
  EXPECT_EQ(bootstrap->job_id(), "fakejob");
  EXPECT_EQ(bootstrap->allgather("mine", 10), (std::vector<std::string>{"mine", "peer1"}));
  EXPECT_EQ(bootstrap->allgather(std::string(), 10), (std::vector<std::string>{"", "peer2"}));
}

TEST_F(CollrunClient, TimeoutNamesTheMissingRanks) {
  FakeCollrun fake([](int fd) {
    welcome(fd);
    read_round(fd, 1);
    std::optional<Frame> query = read_frame(fd);  // after the client's timeout
    ASSERT_TRUE(query.has_value());
    EXPECT_EQ(query->type, static_cast<uint32_t>(MessageType::kQuery));
    write_bytes(
        fd, proto::FrameWriter(MessageType::kMissing).put_u64(1).put_u32(1).put_u32(1).finish());
    read_frame(fd);  // until the client closes
  });
  point_at(fake);
  auto bootstrap = coll::make_collrun_bootstrap(10);
  coll::Error error = error_of([&] { bootstrap->allgather("x", 0.2); });
  EXPECT_EQ(error.status(), COLL_ERR_TIMEOUT);
  EXPECT_NE(std::string(error.what()).find("waiting for rank 1"), std::string::npos)
      << error.what();
  // Sticky: the connection is out of step now.
  coll::Error again = error_of([&] { bootstrap->allgather("x", 10); });
  EXPECT_EQ(again.status(), COLL_ERR_TIMEOUT);
  bootstrap.reset();
}

TEST_F(CollrunClient, ClosedConnectionIsPeerLost) {
  FakeCollrun fake([](int fd) {
    welcome(fd);
    read_round(fd, 1);
  });  // returning closes the connection
  point_at(fake);
  auto bootstrap = coll::make_collrun_bootstrap(10);
  coll::Error error = error_of([&] { bootstrap->allgather("x", 20); });
  EXPECT_EQ(error.status(), COLL_ERR_PEER_LOST);
  EXPECT_NE(std::string(error.what()).find("collrun closed the bootstrap connection"),
            std::string::npos)
      << error.what();
}

TEST_F(CollrunClient, FailureReportCarriesStatusAndMessage) {
  FakeCollrun fake([](int fd) {
    welcome(fd);
    read_round(fd, 1);
    write_bytes(fd, proto::FrameWriter(MessageType::kFailed)
                        .put_u32(COLL_ERR_PEER_LOST)
                        .put_bytes("rank 1 (pid 7) exited with status 3")
                        .finish());
    read_frame(fd);
  });
  point_at(fake);
  auto bootstrap = coll::make_collrun_bootstrap(10);
  coll::Error error = error_of([&] { bootstrap->allgather("x", 20); });
  EXPECT_EQ(error.status(), COLL_ERR_PEER_LOST);
  EXPECT_NE(std::string(error.what()).find("rank 1 (pid 7) exited"), std::string::npos)
      << error.what();
  bootstrap.reset();
}

// Malformed answers: each must be an error, never a crash or a huge
// allocation.
TEST_F(CollrunClient, MalformedResultsAreRejected) {
  std::vector<std::pair<std::string, std::string>> cases = {
      {"wrong count", result_frame(1, {"x"})},
      {"wrong round", result_frame(2, {"x", "y"})},
      {"own blob altered", result_frame(1, {"z", "y"})},
      {"blob length past the frame",
       proto::FrameWriter(MessageType::kResult)
           .put_u64(1)
           .put_u32(2)
           .put_u64(1000)  // a blob of 1000 bytes, and none follow
           .finish()},
      {"trailing bytes", proto::FrameWriter(MessageType::kResult)
                             .put_u64(1)
                             .put_u32(2)
                             .put_bytes("x")
                             .put_bytes("y")
                             .put_u32(0)
                             .finish()},
      {"huge frame length",
       [] {
         std::string f = proto::FrameWriter(MessageType::kResult).finish();
         for (int i = 0; i < 8; ++i) f[4 + i] = static_cast<char>(0x7f);
         return f;
       }()},
      {"unknown frame type",
       [] {
         std::string f = proto::FrameWriter(MessageType::kWelcome).finish();
         f[0] = 99;
         return f;
       }()},
  };
  for (auto& what_frame : cases) {
    // Named variables, not a structured binding: the lambda below captures
    // frame, which clang 14 does not allow for bindings (C++20 does).
    const std::string& what = what_frame.first;
    const std::string& frame = what_frame.second;
    SCOPED_TRACE(what);
    FakeCollrun fake([&frame](int fd) {
      welcome(fd);
      read_round(fd, 1);
      write_bytes(fd, frame);
      read_frame(fd);
    });
    point_at(fake);
    auto bootstrap = coll::make_collrun_bootstrap(10);
    coll::Error error = error_of([&] { bootstrap->allgather("x", 5); });
    EXPECT_TRUE(error.status() == COLL_ERR_INTERNAL || error.status() == COLL_ERR_TIMEOUT)
        << error.status() << " " << error.what();
    bootstrap.reset();
  }
}

TEST_F(CollrunClient, RefusalIsAnError) {
  FakeCollrun fake([](int fd) {
    write_bytes(fd, proto::FrameWriter(MessageType::kChallenge)
                        .put_bytes(std::string_view(kNonce, proto::kNonceBytes))
                        .finish());
    read_frame(fd);
    write_bytes(fd, proto::FrameWriter(MessageType::kRefused)
                        .put_bytes("rank 0 is connected already")
                        .finish());
  });
  point_at(fake);
  coll::Error error = error_of([] { coll::make_collrun_bootstrap(10); });
  EXPECT_EQ(error.status(), COLL_ERR_INVALID_ARG);
  EXPECT_NE(std::string(error.what()).find("collrun refused rank 0: rank 0 is connected already"),
            std::string::npos)
      << error.what();
}

TEST_F(CollrunClient, NobodyListeningTimesOut) {
  // A port that was just free: nothing listens there.
  coll::UniqueFd probe(::socket(AF_INET, SOCK_STREAM, 0));
  sockaddr_in address{};
  address.sin_family = AF_INET;
  address.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  socklen_t length = sizeof address;
  ::bind(probe.get(), reinterpret_cast<sockaddr*>(&address), length);
  ::getsockname(probe.get(), reinterpret_cast<sockaddr*>(&address), &length);
  std::string port = std::to_string(ntohs(address.sin_port));
  probe.reset();
  env_.set("COLL_BOOTSTRAP", "127.0.0.1:" + port)
      .set("COLL_RANK", "0")
      .set("COLL_SIZE", "1")
      .set("COLL_JOBID", "j")
      .set("COLL_JOB_SECRET", kSecretHex);
  coll::Error error = error_of([] { coll::make_collrun_bootstrap(0.3); });
  EXPECT_EQ(error.status(), COLL_ERR_TIMEOUT);
  EXPECT_NE(std::string(error.what()).find("could not connect to collrun"), std::string::npos)
      << error.what();
}

TEST_F(CollrunClient, BadEnvironmentIsInvalidArg) {
  struct Case {
    const char *address, *rank, *size, *job, *mentions;
  };
  for (const Case& c : std::vector<Case>{
           {"127.0.0.1:1", "abc", "2", "j", "COLL_RANK='abc'"},
           {"127.0.0.1:1", "2", "2", "j", "COLL_RANK='2'"},
           {"127.0.0.1:1", "-1", "2", "j", "COLL_RANK='-1'"},
           {"127.0.0.1:1", "0", "0", "j", "COLL_SIZE='0'"},
           {"127.0.0.1:1", "0", "", "j", "COLL_SIZE is not"},
           {"127.0.0.1:1", "0", "2", "a/b", "COLL_JOBID='a/b'"},
           {"127.0.0.1:1", "0", "2", "", "COLL_JOBID=''"},
           {"no-port-here", "0", "2", "j", "not host:port"},
           {"127.0.0.1:", "0", "2", "j", "not host:port"},
       }) {
    SCOPED_TRACE(c.mentions);
    env_.set("COLL_BOOTSTRAP", c.address)
        .set("COLL_RANK", c.rank)
        .set("COLL_SIZE", c.size)
        .set("COLL_JOBID", c.job)
        .set("COLL_JOB_SECRET", kSecretHex);
    coll::Error error = error_of([] { coll::make_collrun_bootstrap(0.2); });
    EXPECT_EQ(error.status(), COLL_ERR_INVALID_ARG) << error.what();
    EXPECT_NE(std::string(error.what()).find(c.mentions), std::string::npos) << error.what();
  }
}

// Without the job's secret a process cannot even try: it is told what is
// missing, and nothing is sent.
TEST_F(CollrunClient, AMissingOrMalformedSecretIsInvalidArg) {
  for (const char* secret : {static_cast<const char*>(nullptr), "", "abc", "zz" /* x32 below */}) {
    env_.set("COLL_BOOTSTRAP", "127.0.0.1:1").set("COLL_RANK", "0").set("COLL_SIZE", "2").set(
        "COLL_JOBID", "j");
    std::string value = secret ? secret : "";
    if (value == "zz")
      for (int i = 0; i < 31; ++i) value += "zz";
    if (secret)
      env_.set("COLL_JOB_SECRET", value);
    else
      env_.unset("COLL_JOB_SECRET");
    SCOPED_TRACE(value);
    coll::Error error = error_of([] { coll::make_collrun_bootstrap(0.2); });
    EXPECT_EQ(error.status(), COLL_ERR_INVALID_ARG) << error.what();
    EXPECT_NE(std::string(error.what()).find("COLL_JOB_SECRET is not"), std::string::npos)
        << error.what();
    EXPECT_EQ(std::string(error.what()).find(value.empty() ? "\x01" : value), std::string::npos)
        << "the message shows the secret's text";
  }
}

// A server that does not know the secret cannot pass for the job's collrun.
TEST_F(CollrunClient, ACollrunWithoutTheSecretIsRefused) {
  FakeCollrun fake([](int fd) {
    welcome(fd, secret_bytes("ffffffffffffffffffffffffffffffffffffffffffffffffffffffffffffffff"));
  });
  point_at(fake);
  coll::Error error = error_of([] { coll::make_collrun_bootstrap(10); });
  EXPECT_EQ(error.status(), COLL_ERR_INVALID_ARG);
  EXPECT_NE(std::string(error.what()).find("did not prove this job's secret"), std::string::npos)
      << error.what();
}

// SHA-256 (FIPS 180-4 examples) and HMAC-SHA256 (RFC 4231 cases 1, 2, 6).
TEST(JobSecret, HashesMatchTheStandardsVectors) {
  auto hex = [](const coll::job_secret::Digest& d) {
    static const char k[] = "0123456789abcdef";
    std::string out;
    for (uint8_t b : d) (out += k[b >> 4]) += k[b & 15];
    return out;
  };
  using coll::job_secret::hmac_sha256;
  using coll::job_secret::sha256;
  EXPECT_EQ(hex(sha256("abc")),
            "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad");
  EXPECT_EQ(hex(sha256("")), "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855");
  EXPECT_EQ(hex(sha256("abcdbcdecdefdefgefghfghighijhijkijkljklmklmnlmnomnopnopq")),
            "248d6a61d20638b8e5c026930c3e6039a33ce45964ff2167f6ecedd419db06c1");
  EXPECT_EQ(hex(sha256(std::string(1000000, 'a'))),
            "cdc76e5c9914fb9281a1c7e284d73e67f1809a48a497200e046d39ccc7112cd0");
  EXPECT_EQ(hex(hmac_sha256(std::string(20, '\x0b'), "Hi There")),
            "b0344c61d8db38535ca8afceaf0bf12b881dc200c9833da726e9376c2e32cff7");
  EXPECT_EQ(hex(hmac_sha256("Jefe", "what do ya want for nothing?")),
            "5bdcc146bf60754e6a042426089575c75a003f089d2739839dec58b964ec3843");
  EXPECT_EQ(hex(hmac_sha256(std::string(131, '\xaa'),
                            "Test Using Larger Than Block-Size Key - Hash Key First")),
            "60e431591ee0b67f0d8a26aacbf5b77f8e0bc6213728c5140546040f0ee37f54");
  const std::string a = "same bytes", b = "same bytez";
  EXPECT_TRUE(coll::job_secret::equal(reinterpret_cast<const uint8_t*>(a.data()),
                                      reinterpret_cast<const uint8_t*>(a.data()), a.size()));
  EXPECT_FALSE(coll::job_secret::equal(reinterpret_cast<const uint8_t*>(a.data()),
                                       reinterpret_cast<const uint8_t*>(b.data()), a.size()));
  EXPECT_EQ(coll::job_secret::make().size(), 64u);
  EXPECT_NE(coll::job_secret::make(), coll::job_secret::make());
}

TEST(BootstrapChoice, NoLauncherGivesASingleton) {
  ScopedEnv env;
  clear_launcher_env(env);
  EXPECT_EQ(coll::make_collrun_bootstrap(1), nullptr);
  EXPECT_FALSE(coll::environment_names_pmix_server());
  auto bootstrap = coll::make_bootstrap_from_environment(1);
  ASSERT_NE(bootstrap, nullptr);
  EXPECT_STREQ(bootstrap->name(), "singleton");
  EXPECT_EQ(bootstrap->rank(), 0);
  EXPECT_EQ(bootstrap->size(), 1);
  EXPECT_EQ(bootstrap->job_id(), "single" + std::to_string(::getpid()));
  EXPECT_EQ(bootstrap->allgather("blob", 1), std::vector<std::string>{"blob"});
  bootstrap->barrier(1);
}

TEST(BootstrapChoice, PmixVariablesAreRecognized) {
  for (const char* name : {"PMIX_RANK", "PMIX_NAMESPACE", "PMIX_SERVER_URI4"}) {
    ScopedEnv env;
    clear_launcher_env(env);
    env.set(name, "0");
    EXPECT_TRUE(coll::environment_names_pmix_server()) << name;
  }
}

TEST(BootstrapChoice, PmixLaunchOfManyWithoutAServerIsRefused) {
  // PMIx variables and a job of 4, but no server to reach (and, in a build
  // without PMIx, no way to use one): going on as a singleton would give
  // every rank wrong results.
  ScopedEnv env;
  clear_launcher_env(env);
  env.set("PMIX_RANK", "0")
      .set("PMIX_NAMESPACE", "nosuchjob")
      .set("PMIX_SERVER_URI4", "pmix-server.1;tcp4://127.0.0.1:1")
      .set("OMPI_COMM_WORLD_SIZE", "4");
  try {
    coll::make_bootstrap_from_environment(2);
    ADD_FAILURE() << "a singleton was made for a job of 4";
  } catch (const coll::Error& error) {
    EXPECT_EQ(error.status(), COLL_ERR_INVALID_ARG);
    EXPECT_NE(std::string(error.what()).find("job of 4"), std::string::npos) << error.what();
  }
}

// ---------------------------------------------------------------------------
// Real jobs under collrun.

class CollrunJob : public ::testing::Test {
 protected:
  void SetUp() override {
    collrun_ = path_from_env("COLLRUN");
    helper_ = path_from_env("BOOTSTRAP_HELPER");
    ASSERT_FALSE(collrun_.empty()) << "COLLRUN is not set (run through meson)";
    ASSERT_FALSE(helper_.empty()) << "BOOTSTRAP_HELPER is not set";
  }
  ProcessResult run(int np, std::vector<std::string> args, std::vector<std::string> options = {}) {
    std::vector<std::string> argv = {collrun_};
    argv.insert(argv.end(), options.begin(), options.end());
    argv.insert(argv.end(), {"-np", std::to_string(np), helper_});
    argv.insert(argv.end(), args.begin(), args.end());
    return run_process(argv, {}, 120);
  }
  std::string collrun_;
  std::string helper_;
};

class CollrunJobOfSize : public CollrunJob, public ::testing::WithParamInterface<int> {};

TEST_P(CollrunJobOfSize, AllgathersOfEverySize) {
  int np = GetParam();
  ProcessResult r = run(np, {"allgather", "collrun"});
  ASSERT_EQ(r.status, 0) << explain(r);
  for (int rank = 0; rank < np; ++rank)
    EXPECT_NE(r.out.find("ok rank " + std::to_string(rank) + " of " + std::to_string(np)),
              std::string::npos)
        << explain(r);
  EXPECT_EQ(r.out.find("FAIL"), std::string::npos) << explain(r);
}

TEST_P(CollrunJobOfSize, InitTwice) {
  ProcessResult r = run(GetParam(), {"reinit"});
  ASSERT_EQ(r.status, 0) << explain(r);
}

INSTANTIATE_TEST_SUITE_P(Sizes, CollrunJobOfSize, ::testing::Values(1, 2, 3, 5));

TEST_F(CollrunJob, DebugSaysWhichBootstrapRan) {
  ProcessResult r = run(2, {"allgather", "collrun"}, {"-x", "COLL_BOOTSTRAP_DEBUG=1"});
  ASSERT_EQ(r.status, 0) << explain(r);
  EXPECT_TRUE(std::regex_search(r.err, std::regex("libcoll: bootstrap collrun: rank 1 of 2, job id "
                                                  "[0-9]+x[0-9a-f]+")))
      << explain(r);
}

TEST_F(CollrunJob, RankThatExitsFailsTheRoundAtOnce) {
  ProcessResult r = run(2, {"peer-exits"});
  ASSERT_EQ(r.status, 0) << explain(r);
  EXPECT_NE(r.out.find("rank 0 got status 4"), std::string::npos) << explain(r);
  EXPECT_NE(r.out.find("exited with status 0 without sending bootstrap round 1"), std::string::npos)
      << explain(r);
}

TEST_F(CollrunJob, RankThatLeavesTheBootstrapFailsTheRound) {
  ProcessResult r = run(2, {"peer-closes"});
  ASSERT_EQ(r.status, 42) << explain(r);
  EXPECT_EQ(r.out.find("FAIL"), std::string::npos) << explain(r);
}

TEST_F(CollrunJob, TimeoutNamesTheRankThatDidNotCome) {
  ProcessResult r = run(2, {"timeout"});
  ASSERT_EQ(r.status, 42) << explain(r);
  EXPECT_NE(r.out.find("waiting for rank 1"), std::string::npos) << explain(r);
  EXPECT_EQ(r.out.find("FAIL"), std::string::npos) << explain(r);
}

TEST_F(CollrunJob, MismatchedIdentitiesAreRefused) {
  for (const char* mode : {"refuse-jobid", "refuse-size"}) {
    ProcessResult r = run(mode == std::string("refuse-jobid") ? 1 : 2, {mode});
    EXPECT_EQ(r.status, 0) << mode << "\n" << explain(r);
    EXPECT_NE(r.out.find("refused: status 1: collrun refused rank 0"), std::string::npos)
        << explain(r);
    EXPECT_NE(r.err.find("collrun: refused a bootstrap connection"), std::string::npos)
        << explain(r);
  }
  ProcessResult r = run(2, {"duplicate-rank"});
  EXPECT_EQ(r.status, 0) << explain(r);
  std::vector<std::string> lines = split_lines(r.out);
  int refused = 0, welcomed = 0;
  for (const std::string& line : lines) {
    refused += line.starts_with("refused: ");
    welcomed += line == "welcome";
  }
  EXPECT_EQ(refused, 1) << explain(r);
  EXPECT_EQ(welcomed, 1) << explain(r);
}

TEST_F(CollrunJob, CollrunSurvivesMalformedClients) {
  ProcessResult r = run(1, {"garbage"});
  ASSERT_EQ(r.status, 0) << explain(r);
  EXPECT_NE(r.out.find("ok garbage"), std::string::npos) << explain(r);
  EXPECT_EQ(r.out.find("FAIL"), std::string::npos) << explain(r);
  EXPECT_NE(r.err.find("a frame of type 99"), std::string::npos) << explain(r);
  EXPECT_NE(r.err.find("rendezvous protocol version"), std::string::npos) << explain(r);
}

// The hijack of issue 15, by another user (uid 65534) while the job
// starts: it cannot read the secret from rank 0's environment, its hello as
// rank 2 (still starting) is refused, its flood keeps nobody out, and the
// job joins exactly.
TEST_F(CollrunJob, AnotherUserCannotJoinAStartingJob) {
  ProcessResult r = run(3, {"attacked"});
  if (r.out.find("skipped attacked") != std::string::npos) GTEST_SKIP() << "needs root (setpriv)";
  ASSERT_EQ(r.status, 0) << explain(r);
  EXPECT_NE(r.out.find("ok attacked"), std::string::npos) << explain(r);
  EXPECT_NE(r.out.find("environ readable: no"), std::string::npos) << explain(r);
  EXPECT_NE(r.out.find("hello as rank 2 without the secret: refused"), std::string::npos)
      << explain(r);
  EXPECT_NE(r.out.find("holding 100 idle connections"), std::string::npos) << explain(r);
  EXPECT_EQ(r.out.find("FAIL"), std::string::npos) << explain(r);
  EXPECT_NE(r.err.find("did not prove this job's secret"), std::string::npos) << explain(r);
}

}  // namespace
}  // namespace collrun_test
