/* What the C programs of tests/pmpi share: CHECK (counts a failed check in
 * the program's `errors`, prints the first 20 with the program's `rank`) and
 * lookup (the shim's coll_mpi_* queries, found with dlsym where it is
 * loaded). */
#ifndef PMPI_CHECK_H
#define PMPI_CHECK_H

#include <dlfcn.h>
#include <stdio.h>
#include <string.h>

#define CHECK(cond, ...)                                       \
  do {                                                         \
    if (!(cond)) {                                             \
      if (errors++ < 20) {                                     \
        fprintf(stderr, "rank %d: line %d: ", rank, __LINE__); \
        fprintf(stderr, __VA_ARGS__);                          \
        fprintf(stderr, "\n");                                 \
      }                                                        \
    }                                                          \
  } while (0)

/* dlsym gives an object pointer; ISO C has no cast to a function pointer. */
static inline void lookup(const char* name, void* fn, size_t bytes) {
  void* p = dlsym(RTLD_DEFAULT, name);
  memcpy(fn, &p, bytes);
}

#endif
