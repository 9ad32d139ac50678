"""torch_libcoll outside any launcher, in one process: a group of 2 that is
not torch's default group fails with an error that says how libcoll's world
is made; a default group of 2 whose other rank never comes fails when
torch's store times out (2 s here), with the store's words, not a hang; a
group of 1 works (libcoll's singleton). (Default groups of 2-4 through the
store: torch_env_* in tests/torch/meson.build.)"""
import datetime
import os
import sys
import time

import torch
import torch.distributed as dist

import torch_libcoll

for name in list(os.environ):
    if name.startswith("COLL_"):
        del os.environ[name]

# First, while libcoll is not initialized: the default group's bootstrap.
lonely = dist.HashStore()
lonely.set_timeout(datetime.timedelta(seconds=2))
started = time.time()
try:
    torch_libcoll.ProcessGroupLibcoll(lonely, 0, 2, 10.0, default_group=True)
    sys.exit("a default group of 2 with one rank was made")
except RuntimeError as e:
    if "coll_init_oob" not in str(e) or "torch's store" not in str(e):
        sys.exit(f"the error does not name the bootstrap and the store: {e}")
    print(f"a default group of 2 with one rank, after {time.time() - started:.1f} s:",
          str(e).splitlines()[0])

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
