// torch_libcoll: a c10d::ProcessGroup (torch 1.13) whose collectives run on
// libcoll's non-blocking calls. See docs/architecture.md ("The torch
// backend") for the design.
#pragma once

#include <coll/coll.h>
#include <torch/csrc/distributed/c10d/ProcessGroup.hpp>
#include <torch/csrc/distributed/c10d/Store.hpp>

#include <chrono>
#include <functional>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

namespace torch_libcoll {

// One libcoll operation in flight and what completing it takes: the
// request, the buffers and count arrays it uses (they belong to the
// operation until it is complete), the copies back into the caller's
// tensors, and the future DDP's comm hooks wait on. Completed by whichever
// comes first: wait() (coll_wait in the caller's thread), isCompleted()
// (coll_test), or the process's progress thread (coll_test), so that
// getFuture() completes with nobody calling wait().
class WorkLibcoll : public c10d::Work {
 public:
  WorkLibcoll(int rank, c10d::OpType type, const char* name, coll_comm_t comm,
              std::vector<at::Tensor> outputs);
  ~WorkLibcoll() override;

  bool isCompleted() override;
  bool isSuccess() const override;
  std::exception_ptr exception() const override;
  std::vector<at::Tensor> result() override;
  bool wait(std::chrono::milliseconds timeout = kNoTimeout) override;
  c10::intrusive_ptr<c10::ivalue::Future> getFuture() override;

  // Set up before start(): what the operation keeps alive, and what runs
  // after it succeeds (copies back, AVG's division).
  std::vector<at::Tensor> keep;
  std::vector<size_t> counts_a, counts_b, counts_c, counts_d;
  std::vector<std::function<void()>> after_success;  // in order
  // Scratch buffers from the process's pool (scratch()), given back to it
  // once the operation is complete and the copies back are done.
  std::vector<at::Tensor> pooled;

  // Starts the operation: `start` makes the coll_iX call into *request.
  // Throws (RuntimeError in Python) with libcoll's text if it fails.
  void start(const std::function<int(coll_request_t*)>& start);

  // The progress thread's poll: true once the work is complete. Never
  // blocks (skips a work that another thread is waiting for).
  bool poll();

 private:
  void complete_locked(int status);  // request_mutex_ held
  bool done() const;

  const char* name_;
  coll_comm_t comm_;
  std::vector<at::Tensor> outputs_;
  c10::intrusive_ptr<c10::ivalue::Future> future_;
  std::mutex request_mutex_;  // owns request_: one thread tests or waits at a time
  coll_request_t request_ = COLL_REQUEST_NULL;
  bool request_done_ = false;  // under request_mutex_
};

class ProcessGroupLibcoll : public c10d::ProcessGroup {
 public:
  // The creator torch 1.13 calls on the members of a group:
  // (prefix store, rank in the group, its size, timeout), and whether it is
  // torch's default group (the whole job: libcoll's world may be
  // bootstrapped through its store when no launcher started the job).
  ProcessGroupLibcoll(const c10::intrusive_ptr<c10d::Store>& store, int rank, int size,
                      std::chrono::milliseconds timeout, bool default_group = false);
  ~ProcessGroupLibcoll() override;

  const std::string getBackendName() const override { return "libcoll"; }

  c10::intrusive_ptr<c10d::Work> broadcast(std::vector<at::Tensor>& tensors,
                                           const c10d::BroadcastOptions& opts) override;
  c10::intrusive_ptr<c10d::Work> allreduce(std::vector<at::Tensor>& tensors,
                                           const c10d::AllreduceOptions& opts) override;
  c10::intrusive_ptr<c10d::Work> allreduce_coalesced(
      std::vector<at::Tensor>& tensors, const c10d::AllreduceCoalescedOptions& opts) override;
  c10::intrusive_ptr<c10d::Work> reduce(std::vector<at::Tensor>& tensors,
                                        const c10d::ReduceOptions& opts) override;
  c10::intrusive_ptr<c10d::Work> allgather(std::vector<std::vector<at::Tensor>>& outputs,
                                           std::vector<at::Tensor>& inputs,
                                           const c10d::AllgatherOptions& opts) override;
  c10::intrusive_ptr<c10d::Work> _allgather_base(at::Tensor& output, at::Tensor& input,
                                                 const c10d::AllgatherOptions& opts) override;
  c10::intrusive_ptr<c10d::Work> allgather_coalesced(
      std::vector<std::vector<at::Tensor>>& outputs, std::vector<at::Tensor>& inputs,
      const c10d::AllgatherOptions& opts) override;
  c10::intrusive_ptr<c10d::Work> gather(std::vector<std::vector<at::Tensor>>& outputs,
                                        std::vector<at::Tensor>& inputs,
                                        const c10d::GatherOptions& opts) override;
  c10::intrusive_ptr<c10d::Work> scatter(std::vector<at::Tensor>& outputs,
                                         std::vector<std::vector<at::Tensor>>& inputs,
                                         const c10d::ScatterOptions& opts) override;
  c10::intrusive_ptr<c10d::Work> reduce_scatter(std::vector<at::Tensor>& outputs,
                                                std::vector<std::vector<at::Tensor>>& inputs,
                                                const c10d::ReduceScatterOptions& opts) override;
  c10::intrusive_ptr<c10d::Work> _reduce_scatter_base(
      at::Tensor& output, at::Tensor& input, const c10d::ReduceScatterOptions& opts) override;
  c10::intrusive_ptr<c10d::Work> alltoall_base(at::Tensor& output, at::Tensor& input,
                                               std::vector<int64_t>& output_splits,
                                               std::vector<int64_t>& input_splits,
                                               const c10d::AllToAllOptions& opts) override;
  c10::intrusive_ptr<c10d::Work> alltoall(std::vector<at::Tensor>& outputs,
                                          std::vector<at::Tensor>& inputs,
                                          const c10d::AllToAllOptions& opts) override;
  c10::intrusive_ptr<c10d::Work> barrier(const c10d::BarrierOptions& opts) override;
  // Gloo's monitored barrier, through the group's store (see the .cpp).
  void monitoredBarrier(const c10d::BarrierOptions& opts, bool wait_all_ranks) override;

  c10::intrusive_ptr<c10d::Work> send(std::vector<at::Tensor>& tensors, int dst,
                                      int tag) override;
  c10::intrusive_ptr<c10d::Work> recv(std::vector<at::Tensor>& tensors, int src,
                                      int tag) override;
  c10::intrusive_ptr<c10d::Work> recvAnysource(std::vector<at::Tensor>& tensors,
                                               int tag) override;

  coll_comm_t comm() const { return comm_; }

 private:
  c10::intrusive_ptr<WorkLibcoll> make_work(c10d::OpType type, const char* name,
                                            std::vector<at::Tensor> outputs);
  void launch(const c10::intrusive_ptr<WorkLibcoll>& work,
              const std::function<int(coll_request_t*)>& start);

  coll_comm_t comm_ = COLL_COMM_NULL;
  // For monitoredBarrier: the group's store (torch's, prefixed for this
  // group), its timeout, and how many monitored barriers it has entered
  // (the same count on every member: they enter them in the same order).
  c10::intrusive_ptr<c10d::Store> store_;
  std::chrono::milliseconds timeout_;
  uint64_t monitored_barriers_ = 0;
};

// Stops the progress thread (after the works it holds complete) and
// finalizes libcoll: the module's atexit hook.
void shutdown();

}  // namespace torch_libcoll
