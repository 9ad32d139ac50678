#!/bin/bash
B=/tmp/my-bench-build
for rep in 1 2 3 4 5; do
  for np in 2 4; do
    for mode in malloc allocmem; do
      [[ $mode == allocmem ]] && arg=--alloc-mem || arg=
      # alternate the order every repeat
      mpirun --allow-run-as-root --oversubscribe -np $np --mca btl self,vader -x LD_PRELOAD=$B/libcoll_mpi/libcoll_mpi.so $B/bench/coll_bench_mpi -b bcast,allreduce,allgather -m 65536:4194304 -c $arg > /tmp/ab/np$np-$mode-$rep.txt 2>&1
    done
  done
done
