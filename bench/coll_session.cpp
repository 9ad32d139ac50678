// Session of coll_bench: libcoll alone.
#include <coll/coll.h>

#include "coll_runner.hpp"
#include "session.hpp"

namespace bench {

struct Session::Libraries {
  Libraries(int* argc, char*** argv) : library(argc, argv) {}

  CollLibrary library;
  CollRunner coll{coll_comm_world()};
};

Session::Session(int* argc, char*** argv) : libraries_(std::make_unique<Libraries>(argc, argv)) {
  CollRunner& coll = libraries_->coll;
  runners_ = {&coll};
  reporting_ = coll.rank() == 0;
  info_.ranks = coll.size();
  info_.transport = coll.transport();
  info_.bootstrap = coll.bootstrap();
}

Session::~Session() = default;

void* Session::alloc_mem(size_t bytes) {
  void* pointer = nullptr;
  return coll_mem_alloc(bytes, &pointer) == COLL_SUCCESS ? pointer : nullptr;
}

void Session::release_mem(void* pointer) { coll_mem_free(pointer); }

void Session::end_job_after_error(int) const {}

}  // namespace bench
