// Session of coll_bench: libcoll alone.
#include "coll_runner.hpp"
#include "session.hpp"

namespace bench {

struct Session::State {
  State(int* argc, char*** argv) : library(argc, argv) {}

  CollLibrary library;
  CollRunner coll{coll_comm_world()};
  std::vector<Runner*> runners{&coll};
  std::string problem;
};

Session::Session(int* argc, char*** argv) : state_(std::make_unique<State>(argc, argv)) {}

Session::~Session() = default;

bool Session::side_by_side() const { return false; }

const std::string& Session::startup_problem() const { return state_->problem; }

bool Session::reporting() const { return state_->coll.rank() == 0; }

const std::vector<Runner*>& Session::runners() const { return state_->runners; }

Runner& Session::reducer() const { return state_->coll; }

RunInfo Session::run_info() const {
  RunInfo info;
  info.ranks = state_->coll.size();
  info.transport = state_->coll.transport();
  info.bootstrap = state_->coll.bootstrap();
  return info;
}

void Session::end_job_after_error(int) const {}

}  // namespace bench
