#!/usr/bin/env bash
# The cost of COLL_REPRODUCIBLE (issue 36): allreduce latency under order
# and exact against the default, in the same repeat, the modes alternating
# (coll_bench under collrun, OSU's loop), per rank count, type and size:
# the median ratio mode / default of REPS repeats and its spread (min-max).
#   bench/reproducible_cost.sh [--build DIR] [--np "2 4"] [--reps 5]
#                              [--types "double float"] [--sizes "8 65536 4194304"]
# Prints a markdown table; the raw CSVs stay in the folder it names.
set -euo pipefail
cd "$(dirname "$0")/.."
build=build nps="2 4" reps=5 types="double float" sizes="8 65536 4194304"
while [ $# -gt 0 ]; do
  case $1 in
    --build) build=$2; shift 2 ;;
    --np) nps=$2; shift 2 ;;
    --reps) reps=$2; shift 2 ;;
    --types) types=$2; shift 2 ;;
    --sizes) sizes=$2; shift 2 ;;
    *) echo "reproducible_cost.sh: unknown option $1" >&2; exit 2 ;;
  esac
done
out=$(mktemp -d /tmp/coll-repro-cost.XXXXXX)
modes="off order exact"
for r in $(seq "$reps"); do
  for np in $nps; do
    for t in $types; do
      for s in $sizes; do
        for m in $modes; do
          # 4 MiB: fewer iterations (coll_bench takes a tenth above 8 KiB).
          "$build/libcoll/launcher/collrun" --timeout 300 -np "$np" -x COLL_REPRODUCIBLE="$m" \
            "$build/bench/coll_bench" -b allreduce -T "$t" -m "$s:$s" -i 1000 \
            --csv "$out/$np-$t-$s-$m-$r.csv" > /dev/null
        done
      done
    done
  done
done
cat > "$out/ratio.awk" <<'AWK'
# Input: one line per repeat, "off US order US exact US".
{ d[NR] = $2; o[NR] = $4 / $2; e[NR] = $6 / $2; n = NR }
END {
  for (i = 1; i <= n; i++) { os[i] = o[i]; es[i] = e[i] }
  sort_numbers(os, n); sort_numbers(es, n)
  printf "| %s | %s | %s | %.2f | %.2f-%.2f | %.2f | %.2f-%.2f | %.2f |\n", np, t, s,
    median(o, n), os[1], os[n], median(e, n), es[1], es[n], median(d, n)
}
AWK
echo "| np | type | size (B) | order / default | spread | exact / default | spread | default (us) |"
echo "| ---: | --- | ---: | ---: | --- | ---: | --- | ---: |"
for np in $nps; do
  for t in $types; do
    for s in $sizes; do
      for r in $(seq "$reps"); do
        for m in $modes; do
          printf '%s %s ' "$m" "$(awk -F, 'NR == 2 { print $10 }' "$out/$np-$t-$s-$m-$r.csv")"
        done
        echo
      done | awk -v np="$np" -v t="$t" -v s="$s" -f bench/median.awk -f "$out/ratio.awk"
    done
  done
done
echo "raw: $out"
