// C++ RAII layer over the C API of libcoll (same library, header only).
//
//   coll::Session session(&argc, &argv);   // coll_init ... coll_finalize
//   coll::Comm world = coll::Comm::world();
//   world.allreduce(in.data(), out.data(), n, COLL_FLOAT, COLL_SUM);
//
// Failures throw coll::Exception carrying the status code and the detail
// message of the communicator.
#ifndef COLL_COLL_HPP
#define COLL_COLL_HPP

#include <coll/coll.h>

#include <stdexcept>
#include <string>
#include <type_traits>
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
  else static_assert(!sizeof(T), "no libcoll datatype for this type");
}

// coll_init in the constructor, coll_finalize in the destructor.
class Session {
 public:
  Session(int* argc = nullptr, char*** argv = nullptr) { check(coll_init(argc, argv), nullptr); }
  ~Session() { coll_finalize(); }
  Session(const Session&) = delete;
  Session& operator=(const Session&) = delete;
};

class Comm {
 public:
  explicit Comm(coll_comm_t comm) : comm_(comm) {}
  static Comm world() { return Comm(coll_comm_world()); }

  coll_comm_t get() const { return comm_; }
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

 private:
  coll_comm_t comm_;
};

}  // namespace coll

#endif  // COLL_COLL_HPP
