// The allgather checks the bootstrap helpers run under collrun and mpirun:
// blobs of 0, 1 and 1 MiB bytes, of rank-dependent and mixed sizes, every
// byte a function of (rank, round, index) so that a misplaced or truncated
// blob is found.
#pragma once

#include <string>

#include "bootstrap/bootstrap.hpp"

namespace collrun_test {

// Failed checks so far; each also prints a "FAIL ..." line to stdout.
extern int failures;
void check(bool ok, const std::string& what);

// Runs the rounds, numbered from `first_round` (so that two runs in one
// process differ), then checks that every rank names the same job id.
void run_rounds(coll::Bootstrap& bootstrap, int first_round, double timeout_s = 60);

}  // namespace collrun_test
