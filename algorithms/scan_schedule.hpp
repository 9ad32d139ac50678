// Schedule math of the recursive-doubling scan and exscan: pure functions,
// unit-tested without any transport (tests/unit/scan_schedule_test.cpp).
//
// Steps for masks 1, 2, 4, ... below n. Before the step of mask m rank r
// holds `partial`, the reduction of the inputs of the ranks of its aligned
// group of m ranks (those that differ from r only in the bits below m),
// cut at n. At the step it trades partial with partner r ^ m when that
// rank exists; partner's group is the other half of r's group of 2m, so
// both then hold the partial of the group of 2m. A partner below r brings
// ranks that all precede r: r folds them into its result (scan: starting
// from its own input; exscan: starting from nothing). A partner that does
// not exist (r ^ m >= n) has an empty group: r's partial is already the
// group's. The lower group's operand always comes first.
#pragma once

namespace coll::scan {

// -1 when the partner of this step does not exist.
inline int partner(int r, int mask, int n) {
  const int p = r ^ mask;
  return p < n ? p : -1;
}

// Whether a later step (mask 2m and up) still trades partials: the last
// step's new partial is never used.
inline bool partial_needed_after(int mask, int n) { return (mask << 1) < n; }

}  // namespace coll::scan
