"""torch_libcoll outside collrun: a group of 2 in a job libcoll sees as one
rank fails with an error that says to start the job with collrun; a group of
1 works (libcoll's singleton)."""
import datetime
import os
import sys

import torch
import torch.distributed as dist

import torch_libcoll

for name in list(os.environ):
    if name.startswith("COLL_"):
        del os.environ[name]

try:
    torch_libcoll.ProcessGroupLibcoll(dist.HashStore(), 0, 2, 10.0)
    sys.exit("a group of 2 outside collrun was made")
except RuntimeError as e:
    if "collrun -np 2" not in str(e):
        sys.exit(f"the error does not say to use collrun: {e}")
    print("a group of 2 outside collrun:", str(e).splitlines()[0])

pg = torch_libcoll.ProcessGroupLibcoll(dist.HashStore(), 0, 1,
                                       datetime.timedelta(seconds=10).total_seconds())
t = torch.arange(4, dtype=torch.float32)
work = pg.allreduce([t])
work.wait()
assert torch.equal(t, torch.arange(4, dtype=torch.float32)), t
assert pg.bootstrap == "singleton", pg.bootstrap
print("a group of 1 outside collrun: ok")
