#!/bin/bash
# Alternating A/B: chain (linear) vs direct, np 3 and 4, scan+exscan, 4 B - 8 KiB.
cd /work/wt-scan
out=${OUTF:-/tmp/scanbench/raw.txt}; : > $out
for rep in $(seq 1 ${REPS:-7}); do
  for np in ${NPS:-3 4}; do
    if [ $((rep % 2)) = 1 ]; then order="linear direct"; else order="direct linear"; fi
    for algo in $order; do
      nice build/libcoll/launcher/collrun -np $np -x COLL_SCAN_ALGO=$algo -x COLL_EXSCAN_ALGO=$algo \
        build/bench/coll_bench -b scan,exscan -m 4:8192 -i 1000 -x 100 2>&1 |
        awk -v rep=$rep -v np=$np -v algo=$algo '/Scan Latency/{c="scan"} /Exscan Latency/{c="exscan"} /^[0-9]/{print rep, np, algo, c, $1, $2}' >> $out
    done
  done
done
