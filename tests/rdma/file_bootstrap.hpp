// A Bootstrap for tests: ranks are forked processes that trade their blobs
// through files in a directory the parent created. Round k of allgather
// writes <dir>/<k>.<rank> (atomically, by rename) and waits for the files of
// every rank.
#pragma once

#include <unistd.h>

#include <chrono>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "bootstrap/bootstrap.hpp"
#include "error.hpp"

namespace coll::test {

class FileBootstrap final : public Bootstrap {
 public:
  // secret: the job's (Bootstrap::secret), the same bytes in every rank.
  FileBootstrap(std::string dir, int rank, int size, std::string secret)
      : dir_(std::move(dir)), rank_(rank), size_(size), secret_(std::move(secret)) {}

  const char* name() const override { return "test-files"; }
  int rank() const override { return rank_; }
  int size() const override { return size_; }
  std::string job_id() const override { return std::filesystem::path(dir_).filename(); }
  const std::string& secret() const override { return secret_; }

 protected:
  std::vector<std::string> exchange(const std::string& mine, double timeout_s) override {
    ++round_;
    std::string path = file_of(rank_);
    {
      std::ofstream out(path + ".tmp", std::ios::binary);
      out << mine;
      if (!out) fail(COLL_ERR_INTERNAL, "test bootstrap: cannot write %s", path.c_str());
    }
    std::filesystem::rename(path + ".tmp", path);

    auto deadline = std::chrono::steady_clock::now() +
                    std::chrono::duration_cast<std::chrono::steady_clock::duration>(
                        std::chrono::duration<double>(timeout_s));
    std::vector<std::string> all(static_cast<size_t>(size_));
    for (int r = 0; r < size_; ++r) {
      while (!std::filesystem::exists(file_of(r))) {
        if (std::chrono::steady_clock::now() > deadline) {
          fail(COLL_ERR_TIMEOUT, "test bootstrap: rank %d waited %.0f s for rank %d in round %d",
               rank_, timeout_s, r, round_);
        }
        std::this_thread::sleep_for(std::chrono::milliseconds(2));
      }
      std::ifstream in(file_of(r), std::ios::binary);
      std::stringstream content;
      content << in.rdbuf();
      all[static_cast<size_t>(r)] = content.str();
    }
    return all;
  }

 private:
  std::string file_of(int rank) const {
    return dir_ + "/" + std::to_string(round_) + "." + std::to_string(rank);
  }

  std::string dir_;
  int rank_;
  int size_;
  std::string secret_;
  int round_ = 0;
};

}  // namespace coll::test
