/* The checks of the C test programs (comm_test.c, scale_test.c,
 * hierarchy_test.c): a failed check prints the rank, the place, the
 * condition and the values, and ends the rank with status 1, which ends
 * the job (collrun, mpirun). Set g_rank once the rank is known. */
#ifndef COLL_TESTS_MP_C_CHECK_H
#define COLL_TESTS_MP_C_CHECK_H

#include <coll/coll.h>
#include <stdio.h>
#include <stdlib.h>

static int g_rank = -1;

#define CHECK(cond, ...)                                                     \
  do {                                                                       \
    if (!(cond)) {                                                           \
      fprintf(stderr, "[rank %d] %s:%d: check failed: %s: ", g_rank,         \
              __FILE__, __LINE__, #cond);                                    \
      fprintf(stderr, __VA_ARGS__);                                          \
      fprintf(stderr, "\n");                                                 \
      exit(1);                                                               \
    }                                                                        \
  } while (0)

#define OK(call)                                                             \
  do {                                                                       \
    int rc_ = (call);                                                        \
    CHECK(rc_ == COLL_SUCCESS, "%s -> %s (%s)", #call, coll_strerror(rc_),   \
          coll_comm_last_error(COLL_COMM_NULL));                             \
  } while (0)

/* A communicator's rank and size, checked. */
static inline int rank_of(coll_comm_t c) {
  int r;
  OK(coll_comm_rank(c, &r));
  return r;
}
static inline int size_of(coll_comm_t c) {
  int n;
  OK(coll_comm_size(c, &n));
  return n;
}

#endif
