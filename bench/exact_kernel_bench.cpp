// The exact-sum kernel alone (COLL_REPRODUCIBLE=exact, issue 36): the
// library's exact_sum_rows against the scalar reference it replaced
// (tests/unit/exact_sum_reference.cpp), alternating in one process, with
// the reference's phases (keys; keys + accumulation; all, with the
// rounding) for the breakdown. Per case: the median over the repeats of
// the time per element of the result, and its spread (min-max).
//   exact_kernel_bench [--reps 15] [--data uniform|wide]
// Every repeat also checks that both give the same bits. "new total" is
// exact_sum_rows (the widest kernel build this CPU runs); the columns after
// the speedup time each build alone.
#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <random>
#include <string>
#include <vector>

#include "coll/coll.h"
#include "exact_sum.hpp"
#include "tests/unit/exact_sum_reference.hpp"  // the scalar reference

namespace {

double now_ns() {
  return double(std::chrono::duration_cast<std::chrono::nanoseconds>(
                    std::chrono::steady_clock::now().time_since_epoch())
                    .count());
}

struct Stat {
  std::vector<double> v;
  void add(double x) { v.push_back(x); }
  double median() {
    std::sort(v.begin(), v.end());
    return v[v.size() / 2];
  }
  double lo() { return *std::min_element(v.begin(), v.end()); }
  double hi() { return *std::max_element(v.begin(), v.end()); }
};

template <typename T>
std::vector<T> make(size_t n, bool wide, uint64_t seed) {
  std::mt19937_64 rng(seed);
  std::uniform_real_distribution<double> u(-1.0, 1.0);
  std::uniform_int_distribution<int> e(-30, 30);
  std::vector<T> v(n);
  for (auto& x : v) x = T(wide ? std::ldexp(u(rng), e(rng)) : u(rng));
  return v;
}

template <typename T>
void run_case(int datatype, const char* name, size_t count, size_t rows, int reps, bool wide) {
  const std::vector<T> in = make<T>(count * rows, wide, 42 + rows);
  std::vector<T> out_ref(count), out_new(count);
  Stat keys, acc, ref, now;
  const std::vector<std::string> isas = coll::exact_sum_kernel_sets();
  std::vector<Stat> per_isa(isas.size());
  unsigned sink = 0;
  bool same = true;
  for (int r = 0; r < reps + 1; ++r) {  // the first round warms up
    double t0 = now_ns();
    sink ^= coll::reference::keys_only(datatype, in.data(), rows, count, count);
    double t1 = now_ns();
    coll::reference::keys_and_accumulate(datatype, in.data(), rows, count, count);
    double t2 = now_ns();
    coll::reference::exact_sum_rows(datatype, in.data(), rows, count, count, out_ref.data());
    double t3 = now_ns();
    coll::exact_sum_rows(datatype, in.data(), rows, count, count, out_new.data());
    double t4 = now_ns();
    same = same && std::memcmp(out_ref.data(), out_new.data(), count * sizeof(T)) == 0;
    for (size_t k = 0; k < isas.size(); ++k) {
      const double u0 = now_ns();
      coll::exact_sum_rows_with(isas[k], datatype, in.data(), rows, count, count, out_new.data());
      const double u1 = now_ns();
      same = same && std::memcmp(out_ref.data(), out_new.data(), count * sizeof(T)) == 0;
      if (r > 0) per_isa[k].add((u1 - u0) / double(count));
    }
    if (r == 0) continue;
    keys.add((t1 - t0) / double(count));
    acc.add((t2 - t1) / double(count));
    ref.add((t3 - t2) / double(count));
    now.add((t4 - t3) / double(count));
  }
  const double k = keys.median(), a = acc.median(), f = ref.median(), n = now.median();
  std::printf(
      "| %s | %zu | %zu | %.2f (%.2f-%.2f) | %.2f | %.2f | %.2f (%.2f-%.2f) | %.2f (%.2f-%.2f) | "
      "%.1fx |",
      name, count, rows, k, keys.lo(), keys.hi(), a - k, f - a, f, ref.lo(), ref.hi(), n,
      now.lo(), now.hi(), f / n);
  for (Stat& st : per_isa) std::printf(" %.2f (%.2f-%.2f) |", st.median(), st.lo(), st.hi());
  std::printf(" %s |\n", same ? "yes" : "NO");
  if (sink == 0x12345678) std::puts("");
}

}  // namespace

int main(int argc, char** argv) {
  int reps = 15;
  bool wide = false;
  for (int i = 1; i + 1 < argc; i += 2) {
    const std::string o = argv[i];
    if (o == "--reps") reps = std::atoi(argv[i + 1]);
    if (o == "--data") wide = std::string(argv[i + 1]) == "wide";
  }
  std::printf("data: %s, %d repeats; ns per result element, median (min-max)\n\n",
              wide ? "wide (x * 2^[-30,30], x in [-1,1))" : "uniform [-1,1)", reps);
  std::printf(
      "| type | elements | rows | ref keys | ref accumulate | ref round | ref total | new total | "
      "speedup |");
  const std::vector<std::string> isas = coll::exact_sum_kernel_sets();
  for (const std::string& isa : isas) std::printf(" new, %s |", isa.c_str());
  std::printf(" same bits |\n| --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: |");
  for (size_t k = 0; k < isas.size(); ++k) std::printf(" ---: |");
  std::puts(" --- |");
  for (size_t rows : {2, 4}) {
    run_case<double>(COLL_DOUBLE, "double", size_t(512) << 10, rows, reps, wide);
    run_case<float>(COLL_FLOAT, "float", size_t(1) << 20, rows, reps, wide);
  }
  return 0;
}
