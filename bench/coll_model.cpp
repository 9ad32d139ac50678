// coll_model: what the cost model (algorithms/cost_model.hpp) predicts for
// machines this one cannot stand for, and the fit of its parameters to
// this machine's measurements (bench/calibrate-model.sh).
//
//   coll_model [--params FILE] [--ranks LIST] [--network GBPS:US:PPN]... [-b LIST]
//       for each collective and network profile: the best algorithm and its
//       latency at each rank count for 4 B .. 4 MiB, the hierarchical form's
//       (libcoll's across hosts for allreduce, bcast, reduce, barrier), and
//       the sizes where the best flat algorithm changes
//   coll_model --fit CSV... [--fit-np N] [--out FILE]
//       fits alpha_intra, beta_intra and gamma to coll_bench CSVs (forced
//       algorithms; the rows of N ranks only, with --fit-np) and prints the
//       parameters and every row's predicted/measured ratio
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <map>
#include <sstream>
#include <string>
#include <vector>

#include "algorithms.hpp"
#include "cost_model.hpp"
#include "error.hpp"
#include "small_file.hpp"

namespace {

using coll::Coll;
namespace model = coll::model;

void usage(FILE* out) {
  std::fprintf(out,
               "usage: coll_model [--params FILE] [--ranks N,N,...] [--network GBPS:US:PPN]...\n"
               "                  [-b COLLECTIVE,...]\n"
               "       coll_model --fit CSV... [--fit-np N] [--params FILE] [--out FILE]\n"
               "defaults: this machine's fitted parameters (built in), ranks 1024,8192,65536,\n"
               "the standard networks (100 Gb/s 3 us, 200 Gb/s 2 us, 400 Gb/s 1 us; 1, 8, 128\n"
               "ranks per node), every collective the model can choose for\n");
}

std::string read_text(const std::string& path) {
  std::string text;
  const std::string why = coll::read_small_file(path, size_t{64} << 20, &text);
  if (!why.empty()) coll::fail(COLL_ERR_INVALID_ARG, "%s: %s", path.c_str(), why.c_str());
  return text;
}

std::vector<std::string> split(const std::string& s, char sep) {
  std::vector<std::string> out;
  std::string item;
  std::istringstream in(s);
  while (std::getline(in, item, sep)) out.push_back(item);
  if (!s.empty() && s.back() == sep) out.push_back("");
  return out;
}

std::string human_bytes(size_t b) {
  if (b >= (size_t{1} << 20) && b % (size_t{1} << 20) == 0) return std::to_string(b >> 20) + "M";
  if (b >= 1024 && b % 1024 == 0) return std::to_string(b >> 10) + "K";
  return std::to_string(b);
}

std::string human_time(double s) {
  if (s < 1e-3) return coll::strfmt("%.1f us", s * 1e6);
  if (s < 1) return coll::strfmt("%.2f ms", s * 1e3);
  return coll::strfmt("%.2f s", s);
}

// coll_bench CSVs (one header per file, or several files concatenated).
std::vector<model::Measurement> read_measurements(const std::string& path) {
  std::vector<model::Measurement> out;
  std::istringstream lines(read_text(path));
  std::string line;
  std::map<std::string, size_t> col;
  while (std::getline(lines, line)) {
    const std::vector<std::string> f = split(line, ',');
    if (!f.empty() && f[0] == "collective") {
      col.clear();
      for (size_t i = 0; i < f.size(); ++i) col[f[i]] = i;
      continue;
    }
    if (col.empty() || f.size() < col.size()) continue;
    const coll::CollectiveInfo* c = coll::find_collective(f[col["collective"]]);
    if (!c || f[col["library"]] != "libcoll") continue;
    const std::string& size = f[col["size_bytes"]];
    out.push_back({c->id, f[col["algorithm"]], std::atoi(f[col["np"]].c_str()),
                   size.empty() ? 0 : size_t(std::atoll(size.c_str())),
                   std::atof(f[col["avg_us"]].c_str()) * 1e-6});
  }
  return out;
}

int run_fit(const std::vector<std::string>& csvs, int fit_np, const model::Params& base,
            const std::string& out_path) {
  std::vector<model::Measurement> data, fitted;
  for (const std::string& csv : csvs) {
    const auto rows = read_measurements(csv);
    data.insert(data.end(), rows.begin(), rows.end());
  }
  for (const model::Measurement& m : data)
    if (fit_np == 0 || m.ranks == fit_np) fitted.push_back(m);
  const model::Params p = model::fit(fitted, base);
  std::string text = "# coll_model --fit";
  for (const std::string& csv : csvs) text += " " + csv;
  if (fit_np) text += coll::strfmt(" --fit-np %d", fit_np);
  text += coll::strfmt(
      "\n# %zu rows fitted; on one node (alpha_inter, beta_inter: as alpha_intra, "
      "beta_intra)\n",
      fitted.size());
  model::Params out = p;
  out.alpha_inter = p.alpha_intra;
  out.beta_inter = p.beta_intra;
  text += model::format_params(out);
  std::printf("%s\n", text.c_str());
  std::printf("# %-20s %-20s %3s %10s %12s %12s %8s\n", "collective", "algorithm", "np", "bytes",
              "measured_us", "predicted_us", "ratio");
  for (const model::Measurement& m : data) {
    const double t = model::predict(m.collective, m.algorithm, m.ranks, m.bytes, out);
    if (t < 0) continue;
    std::printf("  %-20s %-20s %3d %10zu %12.2f %12.2f %8.2f\n",
                coll::collective_info(m.collective).name, m.algorithm.c_str(), m.ranks, m.bytes,
                m.seconds * 1e6, t * 1e6, t / m.seconds);
  }
  if (!out_path.empty()) {
    std::ofstream f(out_path);
    f << text;
    if (!f) coll::fail(COLL_ERR_INVALID_ARG, "%s: cannot write", out_path.c_str());
  }
  return 0;
}

void print_profile(Coll c, const model::Params& p, const std::string& title,
                   const std::vector<int>& ranks) {
  const char* name = coll::collective_info(c).name;
  std::printf("## %s, %s\n", name, title.c_str());
  std::printf("%-8s", "bytes");
  for (int n : ranks) std::printf("  %-36s", coll::strfmt("n=%d best", n).c_str());
  std::printf("\n");
  for (size_t b = 4; b <= (size_t{4} << 20); b *= 4) {
    std::printf("%-8s", human_bytes(b).c_str());
    for (int n : ranks) {
      const model::Estimate e = model::best(c, n, b, p);
      const double h = model::predict(c, "hierarchical", n, b, p);
      std::string cell = e.algorithm + " " + human_time(e.seconds);
      if (h >= 0) cell += coll::strfmt(" (h %s)", human_time(h).c_str());
      std::printf("  %-36s", cell.c_str());
    }
    std::printf("\n");
  }
  for (int n : ranks) {
    std::string line;
    for (const model::Switch& s : model::switches(c, n, p))
      line += " " + s.from + "->" + s.to + "@" + human_bytes(s.bytes);
    std::printf("switches n=%d:%s\n", n, line.empty() ? " none" : line.c_str());
  }
  std::printf("\n");
}

int run(int argc, char** argv) {
  model::Params base = model::this_machine();
  std::vector<int> ranks = {1024, 8192, 65536};
  std::vector<model::Network> networks;
  std::vector<Coll> collectives;
  std::vector<std::string> fit_csvs;
  std::string out_path;
  int fit_np = 0;
  bool fitting = false;
  for (int i = 1; i < argc; ++i) {
    const std::string arg = argv[i];
    auto value = [&]() -> std::string {
      if (i + 1 >= argc) coll::fail(COLL_ERR_INVALID_ARG, "%s needs a value", arg.c_str());
      return argv[++i];
    };
    if (arg == "-h" || arg == "--help") {
      usage(stdout);
      return 0;
    } else if (arg == "--params") {
      const std::string path = value();
      base = model::parse_params(read_text(path), path);
    } else if (arg == "--ranks") {
      ranks.clear();
      for (const std::string& r : split(value(), ',')) ranks.push_back(std::atoi(r.c_str()));
    } else if (arg == "--network") {
      const std::vector<std::string> f = split(value(), ':');
      if (f.size() != 3) coll::fail(COLL_ERR_INVALID_ARG, "--network GBPS:US:PPN");
      networks.push_back(
          {std::atof(f[0].c_str()), std::atof(f[1].c_str()), std::atoi(f[2].c_str())});
    } else if (arg == "-b") {
      for (const std::string& name : split(value(), ',')) {
        const coll::CollectiveInfo* c = coll::find_collective(name);
        if (!c)
          coll::fail(COLL_ERR_INVALID_ARG, "unknown collective '%s' (valid: %s)", name.c_str(),
                     coll::collective_names().c_str());
        collectives.push_back(c->id);
      }
    } else if (arg == "--fit") {
      fitting = true;
    } else if (arg == "--fit-np") {
      fit_np = std::atoi(value().c_str());
    } else if (arg == "--out") {
      out_path = value();
    } else if (fitting && arg[0] != '-') {
      fit_csvs.push_back(arg);
    } else {
      usage(stderr);
      return 2;
    }
  }
  if (fitting) return run_fit(fit_csvs, fit_np, base, out_path);
  if (networks.empty()) networks = model::standard_networks();
  if (collectives.empty())
    for (int c = 0; c < coll::kCollCount; ++c)
      if (model::chooses(Coll(c))) collectives.push_back(Coll(c));
  std::printf(
      "# coll_model: predicted best flat algorithm and latency ((h ...): the\n"
      "# hierarchical form, which libcoll takes across hosts for allreduce, bcast,\n"
      "# reduce and barrier); within a node this machine's fitted shared memory\n");
  std::string params = model::format_params(base);
  for (size_t at = 0; (at = params.find('\n', at)) != std::string::npos && at + 1 < params.size();
       at += 3)
    params.replace(at, 1, "\n# ");
  std::printf("# %s", params.c_str());
  for (Coll c : collectives)
    for (const model::Network& net : networks)
      print_profile(c, model::with_network(base, net),
                    coll::strfmt("%g Gb/s, %g us, %d ranks/node", net.gbit_per_s, net.latency_us,
                                 net.ranks_per_node),
                    ranks);
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  try {
    return run(argc, argv);
  } catch (const coll::Error& e) {
    std::fprintf(stderr, "coll_model: %s\n", e.what());
    return 2;
  }
}
