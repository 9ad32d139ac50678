// C++ RAII layer over the C API of libcoll (same library, header only).
//
//   coll::Session session(&argc, &argv);   // coll_init ... coll_finalize
//   coll::Comm world = coll::Comm::world();
//   world.allreduce(in.data(), out.data(), n, COLL_FLOAT, COLL_SUM);
//
//   coll::Comm rows = world.split(world.rank() / 4, world.rank());  // owned
//   coll::Request r = rows.iallreduce(COLL_IN_PLACE, x, n, COLL_DOUBLE, COLL_SUM);
//   ...compute...
//   r.wait();
//
// Failures throw coll::Exception carrying the status code and the detail
// message of the communicator. A Comm made by dup(), split() or
// create_group() owns its communicator and frees it (a collective: every
// member destroys it in the same order) when it goes, unless free() did
// already; Comm::world() does not own. A Request owns its request:
// destroying an active one completes it first.
#ifndef COLL_COLL_HPP
#define COLL_COLL_HPP

#include <coll/coll.h>

#include <stdexcept>
#include <string>
#include <type_traits>
#include <utility>
#include <vector>

namespace coll {

class Exception : public std::runtime_error {
 public:
  Exception(int status, const std::string& what) : std::runtime_error(what), status_(status) {}
  int status() const noexcept { return status_; }

 private:
  int status_;
};

inline void check(int status, coll_comm_t comm) {
  if (status == COLL_SUCCESS) return;
  std::string what = coll_strerror(status);
  const char* detail = coll_comm_last_error(comm);
  if (detail && *detail) what += std::string(": ") + detail;
  throw Exception(status, what);
}

// The datatype of T, for the typed overloads.
template <class T>
constexpr coll_datatype_t datatype_of() {
  if constexpr (std::is_same_v<T, int8_t>) return COLL_INT8;
  else if constexpr (std::is_same_v<T, int16_t>) return COLL_INT16;
  else if constexpr (std::is_same_v<T, int32_t>) return COLL_INT32;
  else if constexpr (std::is_same_v<T, int64_t>) return COLL_INT64;
  else if constexpr (std::is_same_v<T, uint8_t>) return COLL_UINT8;
  else if constexpr (std::is_same_v<T, uint16_t>) return COLL_UINT16;
  else if constexpr (std::is_same_v<T, uint32_t>) return COLL_UINT32;
  else if constexpr (std::is_same_v<T, uint64_t>) return COLL_UINT64;
  else if constexpr (std::is_same_v<T, float>) return COLL_FLOAT;
  else if constexpr (std::is_same_v<T, double>) return COLL_DOUBLE;
  else if constexpr (std::is_same_v<T, coll_float_int_t>) return COLL_FLOAT_INT;
  else if constexpr (std::is_same_v<T, coll_double_int_t>) return COLL_DOUBLE_INT;
  else if constexpr (std::is_same_v<T, coll_long_int_t>) return COLL_LONG_INT;
  else if constexpr (std::is_same_v<T, coll_2int_t>) return COLL_2INT;
  else if constexpr (std::is_same_v<T, coll_short_int_t>) return COLL_SHORT_INT;
  else if constexpr (std::is_same_v<T, coll_long_double_int_t>) return COLL_LONG_DOUBLE_INT;
  else static_assert(!sizeof(T), "no libcoll datatype for this type");
}

// A user-defined operator (coll_op_create): freed with the object.
// Converts to coll_op_t, so it passes wherever an op does.
class UserOp {
 public:
  UserOp(coll_user_fn* fn, bool commute, void* ctx = nullptr) {
    check(coll_op_create(fn, commute ? 1 : 0, ctx, &op_), nullptr);
  }
  ~UserOp() {
    if (op_ != COLL_OP_NULL) coll_op_free(&op_);
  }
  UserOp(const UserOp&) = delete;
  UserOp& operator=(const UserOp&) = delete;
  operator coll_op_t() const { return op_; }

 private:
  coll_op_t op_ = COLL_OP_NULL;
};

// coll_init in the constructor, coll_finalize in the destructor.
class Session {
 public:
  Session(int* argc = nullptr, char*** argv = nullptr) { check(coll_init(argc, argv), nullptr); }
  // With a thread level (COLL_THREAD_*).
  Session(int* argc, char*** argv, int required) {
    check(coll_init_thread(argc, argv, required, &provided_), nullptr);
  }
  int provided() const { return provided_; }
  ~Session() { coll_finalize(); }
  Session(const Session&) = delete;
  Session& operator=(const Session&) = delete;

 private:
  int provided_ = COLL_THREAD_SINGLE;
};

// A non-blocking or persistent collective. Movable, not copyable.
class Request {
 public:
  Request() = default;
  Request(coll_request_t r, coll_comm_t comm) : r_(r), comm_(comm) {}
  Request(Request&& o) noexcept : r_(std::exchange(o.r_, COLL_REQUEST_NULL)), comm_(o.comm_) {}
  Request& operator=(Request&& o) noexcept {
    std::swap(r_, o.r_);
    std::swap(comm_, o.comm_);
    return *this;
  }
  Request(const Request&) = delete;
  Request& operator=(const Request&) = delete;
  ~Request() {
    if (r_ != COLL_REQUEST_NULL) coll_request_free(&r_);
  }

  coll_request_t get() const { return r_; }
  // Null once a non-persistent request has completed.
  explicit operator bool() const { return r_ != COLL_REQUEST_NULL; }
  void wait() { check(coll_wait(&r_), comm_); }
  bool test() {
    int flag = 0;
    check(coll_test(&r_, &flag), comm_);
    return flag != 0;
  }
  void start() { check(coll_start(r_), comm_); }  // persistent only

 private:
  coll_request_t r_ = COLL_REQUEST_NULL;
  coll_comm_t comm_ = COLL_COMM_NULL;
};

class Comm {
 public:
  explicit Comm(coll_comm_t comm, bool owned = false) : comm_(comm), owned_(owned) {}
  static Comm world() { return Comm(coll_comm_world()); }
  Comm(Comm&& o) noexcept : comm_(std::exchange(o.comm_, COLL_COMM_NULL)), owned_(o.owned_) {}
  Comm& operator=(Comm&& o) noexcept {
    std::swap(comm_, o.comm_);
    std::swap(owned_, o.owned_);
    return *this;
  }
  Comm(const Comm&) = delete;
  Comm& operator=(const Comm&) = delete;
  ~Comm() {
    if (owned_ && comm_ != COLL_COMM_NULL) coll_comm_free(&comm_);
  }

  coll_comm_t get() const { return comm_; }
  // False for the result of a split with COLL_UNDEFINED.
  explicit operator bool() const { return comm_ != COLL_COMM_NULL; }

  Comm dup() const {
    coll_comm_t c = COLL_COMM_NULL;
    check(coll_comm_dup(comm_, &c), comm_);
    return Comm(c, true);
  }
  Comm split(int color, int key) const {
    coll_comm_t c = COLL_COMM_NULL;
    check(coll_comm_split(comm_, color, key, &c), comm_);
    return Comm(c, true);
  }
  // The ranks of this communicator listed in `ranks`, in that order; only
  // they call it (coll_comm_create_group).
  Comm create_group(const std::vector<int>& ranks, int tag) const {
    coll_comm_t c = COLL_COMM_NULL;
    check(coll_comm_create_group(comm_, int(ranks.size()), ranks.data(), tag, &c), comm_);
    return Comm(c, true);
  }
  // Fault recovery (coll_comm_revoke(3)): revoke is not collective; shrink
  // and agree are collective over the survivors.
  void revoke() const { check(coll_comm_revoke(comm_), comm_); }
  bool is_revoked() const {
    int flag = 0;
    check(coll_comm_is_revoked(comm_, &flag), comm_);
    return flag != 0;
  }
  Comm shrink() const {
    coll_comm_t c = COLL_COMM_NULL;
    check(coll_comm_shrink(comm_, &c), comm_);
    return Comm(c, true);
  }
  // The AND of the survivors' flags. Throws coll::Error (COLL_ERR_PEER_LOST)
  // while a failure it found is not acknowledged somewhere: use the C call
  // to read the agreed flag then.
  int agree(int flag) const {
    check(coll_comm_agree(comm_, &flag), comm_);
    return flag;
  }
  // The ranks known failed, increasing.
  std::vector<int> failed() const {
    int count = 0;
    check(coll_comm_get_failed(comm_, 0, nullptr, &count), comm_);
    std::vector<int> ranks(static_cast<size_t>(count));
    int again = 0;
    check(coll_comm_get_failed(comm_, count, ranks.data(), &again), comm_);
    ranks.resize(static_cast<size_t>(again < count ? again : count));
    return ranks;
  }
  // Acknowledges the first n failures learned; returns how many are now.
  int ack_failed(int n) const {
    int acked = 0;
    check(coll_comm_ack_failed(comm_, n, &acked), comm_);
    return acked;
  }
  // Frees an owned communicator now (collective).
  void free() {
    if (owned_ && comm_ != COLL_COMM_NULL) check(coll_comm_free(&comm_), COLL_COMM_NULL);
  }
  int rank() const {
    int r = -1;
    check(coll_comm_rank(comm_, &r), comm_);
    return r;
  }
  int size() const {
    int s = 0;
    check(coll_comm_size(comm_, &s), comm_);
    return s;
  }

  void allreduce(const void* sendbuf, void* recvbuf, size_t count, coll_datatype_t type,
                 coll_op_t op) const {
    check(coll_allreduce(sendbuf, recvbuf, count, type, op, comm_), comm_);
  }
  template <class T>
  void allreduce(std::vector<T>& inout, coll_op_t op) const {
    allreduce(COLL_IN_PLACE, inout.data(), inout.size(), datatype_of<T>(), op);
  }

  void bcast(void* buf, size_t count, coll_datatype_t type, int root) const {
    check(coll_bcast(buf, count, type, root, comm_), comm_);
  }
  template <class T>
  void bcast(std::vector<T>& buf, int root) const {
    bcast(buf.data(), buf.size(), datatype_of<T>(), root);
  }

  void barrier() const { check(coll_barrier(comm_), comm_); }

  Request iallreduce(const void* sendbuf, void* recvbuf, size_t count, coll_datatype_t type,
                     coll_op_t op) const {
    return request(coll_iallreduce, sendbuf, recvbuf, count, type, op, comm_);
  }
  Request ibcast(void* buf, size_t count, coll_datatype_t type, int root) const {
    return request(coll_ibcast, buf, count, type, root, comm_);
  }
  Request ibarrier() const { return request(coll_ibarrier, comm_); }
  Request allreduce_init(const void* sendbuf, void* recvbuf, size_t count, coll_datatype_t type,
                         coll_op_t op) const {
    return request(coll_allreduce_init, sendbuf, recvbuf, count, type, op, comm_);
  }
  Request bcast_init(void* buf, size_t count, coll_datatype_t type, int root) const {
    return request(coll_bcast_init, buf, count, type, root, comm_);
  }
  Request barrier_init() const { return request(coll_barrier_init, comm_); }


  // The rest of the collective set, with the C API's arguments (coll.h):
  // X(...) blocks, iX(...) and X_init(...) return the Request.
  void reduce(const void* sendbuf, void* recvbuf, size_t count, coll_datatype_t type, coll_op_t op,
              int root) const {
    check(coll_reduce(sendbuf, recvbuf, count, type, op, root, comm_), comm_);
  }
  Request ireduce(const void* sendbuf, void* recvbuf, size_t count, coll_datatype_t type,
                  coll_op_t op, int root) const {
    coll_request_t r = COLL_REQUEST_NULL;
    check(coll_ireduce(sendbuf, recvbuf, count, type, op, root, comm_, &r), comm_);
    return Request(r, comm_);
  }
  Request reduce_init(const void* sendbuf, void* recvbuf, size_t count, coll_datatype_t type,
                      coll_op_t op, int root) const {
    coll_request_t r = COLL_REQUEST_NULL;
    check(coll_reduce_init(sendbuf, recvbuf, count, type, op, root, comm_, &r), comm_);
    return Request(r, comm_);
  }
  void allgather(const void* sendbuf, void* recvbuf, size_t count, coll_datatype_t type) const {
    check(coll_allgather(sendbuf, recvbuf, count, type, comm_), comm_);
  }
  Request iallgather(const void* sendbuf, void* recvbuf, size_t count, coll_datatype_t type) const {
    coll_request_t r = COLL_REQUEST_NULL;
    check(coll_iallgather(sendbuf, recvbuf, count, type, comm_, &r), comm_);
    return Request(r, comm_);
  }
  Request allgather_init(const void* sendbuf, void* recvbuf, size_t count,
                         coll_datatype_t type) const {
    coll_request_t r = COLL_REQUEST_NULL;
    check(coll_allgather_init(sendbuf, recvbuf, count, type, comm_, &r), comm_);
    return Request(r, comm_);
  }
  void allgatherv(const void* sendbuf, size_t sendcount, void* recvbuf, const size_t* recvcounts,
                  const size_t* displs, coll_datatype_t type) const {
    check(coll_allgatherv(sendbuf, sendcount, recvbuf, recvcounts, displs, type, comm_), comm_);
  }
  Request iallgatherv(const void* sendbuf, size_t sendcount, void* recvbuf,
                      const size_t* recvcounts, const size_t* displs, coll_datatype_t type) const {
    coll_request_t r = COLL_REQUEST_NULL;
    check(coll_iallgatherv(sendbuf, sendcount, recvbuf, recvcounts, displs, type, comm_, &r),
          comm_);
    return Request(r, comm_);
  }
  Request allgatherv_init(const void* sendbuf, size_t sendcount, void* recvbuf,
                          const size_t* recvcounts, const size_t* displs,
                          coll_datatype_t type) const {
    coll_request_t r = COLL_REQUEST_NULL;
    check(coll_allgatherv_init(sendbuf, sendcount, recvbuf, recvcounts, displs, type, comm_, &r),
          comm_);
    return Request(r, comm_);
  }
  void reduce_scatter_block(const void* sendbuf, void* recvbuf, size_t recvcount,
                            coll_datatype_t type, coll_op_t op) const {
    check(coll_reduce_scatter_block(sendbuf, recvbuf, recvcount, type, op, comm_), comm_);
  }
  Request ireduce_scatter_block(const void* sendbuf, void* recvbuf, size_t recvcount,
                                coll_datatype_t type, coll_op_t op) const {
    coll_request_t r = COLL_REQUEST_NULL;
    check(coll_ireduce_scatter_block(sendbuf, recvbuf, recvcount, type, op, comm_, &r), comm_);
    return Request(r, comm_);
  }
  Request reduce_scatter_block_init(const void* sendbuf, void* recvbuf, size_t recvcount,
                                    coll_datatype_t type, coll_op_t op) const {
    coll_request_t r = COLL_REQUEST_NULL;
    check(coll_reduce_scatter_block_init(sendbuf, recvbuf, recvcount, type, op, comm_, &r), comm_);
    return Request(r, comm_);
  }
  void reduce_scatter(const void* sendbuf, void* recvbuf, const size_t* recvcounts,
                      coll_datatype_t type, coll_op_t op) const {
    check(coll_reduce_scatter(sendbuf, recvbuf, recvcounts, type, op, comm_), comm_);
  }
  Request ireduce_scatter(const void* sendbuf, void* recvbuf, const size_t* recvcounts,
                          coll_datatype_t type, coll_op_t op) const {
    coll_request_t r = COLL_REQUEST_NULL;
    check(coll_ireduce_scatter(sendbuf, recvbuf, recvcounts, type, op, comm_, &r), comm_);
    return Request(r, comm_);
  }
  Request reduce_scatter_init(const void* sendbuf, void* recvbuf, const size_t* recvcounts,
                              coll_datatype_t type, coll_op_t op) const {
    coll_request_t r = COLL_REQUEST_NULL;
    check(coll_reduce_scatter_init(sendbuf, recvbuf, recvcounts, type, op, comm_, &r), comm_);
    return Request(r, comm_);
  }
  void gather(const void* sendbuf, void* recvbuf, size_t count, coll_datatype_t type,
              int root) const {
    check(coll_gather(sendbuf, recvbuf, count, type, root, comm_), comm_);
  }
  Request igather(const void* sendbuf, void* recvbuf, size_t count, coll_datatype_t type,
                  int root) const {
    coll_request_t r = COLL_REQUEST_NULL;
    check(coll_igather(sendbuf, recvbuf, count, type, root, comm_, &r), comm_);
    return Request(r, comm_);
  }
  Request gather_init(const void* sendbuf, void* recvbuf, size_t count, coll_datatype_t type,
                      int root) const {
    coll_request_t r = COLL_REQUEST_NULL;
    check(coll_gather_init(sendbuf, recvbuf, count, type, root, comm_, &r), comm_);
    return Request(r, comm_);
  }
  void gatherv(const void* sendbuf, size_t sendcount, void* recvbuf, const size_t* recvcounts,
               const size_t* displs, coll_datatype_t type, int root) const {
    check(coll_gatherv(sendbuf, sendcount, recvbuf, recvcounts, displs, type, root, comm_), comm_);
  }
  Request igatherv(const void* sendbuf, size_t sendcount, void* recvbuf, const size_t* recvcounts,
                   const size_t* displs, coll_datatype_t type, int root) const {
    coll_request_t r = COLL_REQUEST_NULL;
    check(coll_igatherv(sendbuf, sendcount, recvbuf, recvcounts, displs, type, root, comm_, &r),
          comm_);
    return Request(r, comm_);
  }
  Request gatherv_init(const void* sendbuf, size_t sendcount, void* recvbuf,
                       const size_t* recvcounts, const size_t* displs, coll_datatype_t type,
                       int root) const {
    coll_request_t r = COLL_REQUEST_NULL;
    check(coll_gatherv_init(sendbuf, sendcount, recvbuf, recvcounts, displs, type, root, comm_, &r),
          comm_);
    return Request(r, comm_);
  }
  void scatter(const void* sendbuf, void* recvbuf, size_t count, coll_datatype_t type,
               int root) const {
    check(coll_scatter(sendbuf, recvbuf, count, type, root, comm_), comm_);
  }
  Request iscatter(const void* sendbuf, void* recvbuf, size_t count, coll_datatype_t type,
                   int root) const {
    coll_request_t r = COLL_REQUEST_NULL;
    check(coll_iscatter(sendbuf, recvbuf, count, type, root, comm_, &r), comm_);
    return Request(r, comm_);
  }
  Request scatter_init(const void* sendbuf, void* recvbuf, size_t count, coll_datatype_t type,
                       int root) const {
    coll_request_t r = COLL_REQUEST_NULL;
    check(coll_scatter_init(sendbuf, recvbuf, count, type, root, comm_, &r), comm_);
    return Request(r, comm_);
  }
  void scatterv(const void* sendbuf, const size_t* sendcounts, const size_t* displs, void* recvbuf,
                size_t recvcount, coll_datatype_t type, int root) const {
    check(coll_scatterv(sendbuf, sendcounts, displs, recvbuf, recvcount, type, root, comm_), comm_);
  }
  Request iscatterv(const void* sendbuf, const size_t* sendcounts, const size_t* displs,
                    void* recvbuf, size_t recvcount, coll_datatype_t type, int root) const {
    coll_request_t r = COLL_REQUEST_NULL;
    check(coll_iscatterv(sendbuf, sendcounts, displs, recvbuf, recvcount, type, root, comm_, &r),
          comm_);
    return Request(r, comm_);
  }
  Request scatterv_init(const void* sendbuf, const size_t* sendcounts, const size_t* displs,
                        void* recvbuf, size_t recvcount, coll_datatype_t type, int root) const {
    coll_request_t r = COLL_REQUEST_NULL;
    check(
        coll_scatterv_init(sendbuf, sendcounts, displs, recvbuf, recvcount, type, root, comm_, &r),
        comm_);
    return Request(r, comm_);
  }
  void alltoall(const void* sendbuf, void* recvbuf, size_t count, coll_datatype_t type) const {
    check(coll_alltoall(sendbuf, recvbuf, count, type, comm_), comm_);
  }
  Request ialltoall(const void* sendbuf, void* recvbuf, size_t count, coll_datatype_t type) const {
    coll_request_t r = COLL_REQUEST_NULL;
    check(coll_ialltoall(sendbuf, recvbuf, count, type, comm_, &r), comm_);
    return Request(r, comm_);
  }
  Request alltoall_init(const void* sendbuf, void* recvbuf, size_t count,
                        coll_datatype_t type) const {
    coll_request_t r = COLL_REQUEST_NULL;
    check(coll_alltoall_init(sendbuf, recvbuf, count, type, comm_, &r), comm_);
    return Request(r, comm_);
  }
  void alltoallv(const void* sendbuf, const size_t* sendcounts, const size_t* sdispls,
                 void* recvbuf, const size_t* recvcounts, const size_t* rdispls,
                 coll_datatype_t type) const {
    check(coll_alltoallv(sendbuf, sendcounts, sdispls, recvbuf, recvcounts, rdispls, type, comm_),
          comm_);
  }
  Request ialltoallv(const void* sendbuf, const size_t* sendcounts, const size_t* sdispls,
                     void* recvbuf, const size_t* recvcounts, const size_t* rdispls,
                     coll_datatype_t type) const {
    coll_request_t r = COLL_REQUEST_NULL;
    check(coll_ialltoallv(sendbuf, sendcounts, sdispls, recvbuf, recvcounts, rdispls, type, comm_,
                          &r),
          comm_);
    return Request(r, comm_);
  }
  Request alltoallv_init(const void* sendbuf, const size_t* sendcounts, const size_t* sdispls,
                         void* recvbuf, const size_t* recvcounts, const size_t* rdispls,
                         coll_datatype_t type) const {
    coll_request_t r = COLL_REQUEST_NULL;
    check(coll_alltoallv_init(sendbuf, sendcounts, sdispls, recvbuf, recvcounts, rdispls, type,
                              comm_, &r),
          comm_);
    return Request(r, comm_);
  }
  void scan(const void* sendbuf, void* recvbuf, size_t count, coll_datatype_t type,
            coll_op_t op) const {
    check(coll_scan(sendbuf, recvbuf, count, type, op, comm_), comm_);
  }
  Request iscan(const void* sendbuf, void* recvbuf, size_t count, coll_datatype_t type,
                coll_op_t op) const {
    coll_request_t r = COLL_REQUEST_NULL;
    check(coll_iscan(sendbuf, recvbuf, count, type, op, comm_, &r), comm_);
    return Request(r, comm_);
  }
  Request scan_init(const void* sendbuf, void* recvbuf, size_t count, coll_datatype_t type,
                    coll_op_t op) const {
    coll_request_t r = COLL_REQUEST_NULL;
    check(coll_scan_init(sendbuf, recvbuf, count, type, op, comm_, &r), comm_);
    return Request(r, comm_);
  }
  void exscan(const void* sendbuf, void* recvbuf, size_t count, coll_datatype_t type,
              coll_op_t op) const {
    check(coll_exscan(sendbuf, recvbuf, count, type, op, comm_), comm_);
  }
  Request iexscan(const void* sendbuf, void* recvbuf, size_t count, coll_datatype_t type,
                  coll_op_t op) const {
    coll_request_t r = COLL_REQUEST_NULL;
    check(coll_iexscan(sendbuf, recvbuf, count, type, op, comm_, &r), comm_);
    return Request(r, comm_);
  }
  Request exscan_init(const void* sendbuf, void* recvbuf, size_t count, coll_datatype_t type,
                      coll_op_t op) const {
    coll_request_t r = COLL_REQUEST_NULL;
    check(coll_exscan_init(sendbuf, recvbuf, count, type, op, comm_, &r), comm_);
    return Request(r, comm_);
  }
  // Typed conveniences: a vector in, a vector out.
  template <class T>
  void allgather(const std::vector<T>& mine, std::vector<T>& all) const {
    all.resize(mine.size() * size_t(size()));
    allgather(mine.data(), all.data(), mine.size(), datatype_of<T>());
  }
  template <class T>
  void alltoall(const std::vector<T>& send, std::vector<T>& recv) const {
    recv.resize(send.size());
    alltoall(send.data(), recv.data(), send.size() / size_t(size()), datatype_of<T>());
  }
  template <class T>
  void scan(std::vector<T>& inout, coll_op_t op) const {
    scan(COLL_IN_PLACE, inout.data(), inout.size(), datatype_of<T>(), op);
  }

 private:
  // Calls a coll_i* or coll_*_init function, whose last argument is the
  // request it makes.
  template <class Fn, class... A>
  Request request(Fn fn, A... args) const {
    coll_request_t r = COLL_REQUEST_NULL;
    check(fn(args..., &r), comm_);
    return Request(r, comm_);
  }
  coll_comm_t comm_;
  bool owned_ = false;
};

}  // namespace coll

#endif  // COLL_COLL_HPP
