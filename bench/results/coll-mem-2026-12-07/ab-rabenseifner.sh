#!/bin/bash
# A/B: before (d567431) and after (049469c) Rabenseifner's placement, MPI_Alloc_mem buffers; and after with malloc.
for rep in 1 2 3 4 5; do
  for np in 4 2; do
    for c in old-mem new-mem new-malloc; do
      case $c in old-*) B=/tmp/bench-build;; *) B=/tmp/my-bench-build;; esac
      [[ $c == *-mem ]] && arg=--alloc-mem || arg=
      mpirun --allow-run-as-root --oversubscribe -np $np --mca btl self,vader -x LD_PRELOAD=$B/libcoll_mpi/libcoll_mpi.so $B/bench/coll_bench_mpi -b allreduce -m 65536:4194304 -c $arg > /tmp/ab2/np$np-$c-$rep.txt 2>&1
    done
  done
done
