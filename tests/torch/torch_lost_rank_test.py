"""A rank that leaves the job (exits without finalizing, as a crashed
trainer's process does) gives the survivors a RuntimeError naming it, at
once and not at the timeout, for a blocking call and for a future.
    collrun -np 2 python3 torch_lost_rank_test.py"""
import os
import sys
import time

import torch
import torch.distributed as dist

import torch_libcoll  # noqa: F401

dist.init_process_group("libcoll")
rank = dist.get_rank()
t = torch.ones(4)
dist.all_reduce(t)
if rank == 1:
    os._exit(0)  # no coll_finalize: its peers learn it from the transport
time.sleep(0.5)
start = time.time()
try:
    dist.all_reduce(t)
    sys.exit("rank 0: all_reduce with a rank gone raised nothing")
except RuntimeError as e:
    if "PEER_LOST" not in str(e) or "rank 1" not in str(e):
        sys.exit(f"rank 0: the error does not name the lost rank: {e}")
    print(f"rank 0: after {time.time() - start:.2f} s: {e}")
if time.time() - start > 30:
    sys.exit("rank 0: the error came only after 30 s")
try:
    dist.all_reduce(t, async_op=True).get_future().wait()
    sys.exit("rank 0: a future with a rank gone completed without error")
except RuntimeError as e:
    if "PEER_LOST" not in str(e):
        sys.exit(f"rank 0: the future's error is not libcoll's: {e}")
print("rank 0: ok")
