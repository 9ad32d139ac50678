"""torch_libcoll: libcoll as a torch.distributed backend.

    import torch_libcoll                      # registers the backend "libcoll"
    torch.distributed.init_process_group("libcoll")
    torch.distributed.all_reduce(tensor)

Start the job as for Gloo (torchrun-style RANK, WORLD_SIZE, MASTER_ADDR,
MASTER_PORT for env://, or tcp:// or file://): libcoll bootstraps through
torch's store. Or under libcoll's launcher, ``collrun -np 4 python3
train.py`` (it sets those variables), mpirun or srun: then libcoll uses
the launcher's bootstrap.

``torch_libcoll.monitored_barrier(group=None, timeout=None,
wait_all_ranks=False)`` is ``torch.distributed.monitored_barrier`` for
libcoll's groups (torch 1.13's allows Gloo's only).
"""
import atexit
import datetime

import torch  # noqa: F401  (loads libtorch before the extension)
import torch.distributed as dist

from ._C import ProcessGroupLibcoll

__all__ = ["ProcessGroupLibcoll", "monitored_barrier"]


def _create(store, rank, size, timeout):
    """torch 1.13's backend creator: called on the members of each group.
    init_process_group calls it before it sets the default group, so the
    default group is the one made while torch.distributed is not yet
    initialized."""
    return ProcessGroupLibcoll(store, rank, size, timeout.total_seconds(),
                               default_group=not dist.is_initialized())


if "LIBCOLL" not in dist.Backend._plugins:
    dist.Backend.register_backend("libcoll", _create)


def monitored_barrier(group=None, timeout=None, wait_all_ranks=False):
    """A barrier that names the ranks that do not reach it, as Gloo's
    torch.distributed.monitored_barrier does (torch 1.13's refuses every
    other backend): each rank reports to rank 0, which waits up to
    ``timeout`` (a timedelta; None: the group's timeout, from
    init_process_group or new_group) for each. If one does not report in
    time, rank 0 raises a RuntimeError naming it ("Rank 2 failed to pass
    monitoredBarrier in 1000 ms"), or naming every one that did not with
    ``wait_all_ranks=True``; the other ranks, those that arrived in time and
    those that arrive later, raise too, with rank 0's text. The group stays
    usable: the barrier runs through the group's store, not through a
    libcoll collective (a timed-out collective would leave the group
    unusable). Every member calls it, in the same order as its other
    monitored barriers; a rank outside ``group`` returns at once. A Gloo
    group is handed to torch's own."""
    if group is None:
        group = dist.distributed_c10d._get_default_group()
    if dist.distributed_c10d._rank_not_in_group(group):
        return
    backend = dist.get_backend(group)
    if backend == dist.Backend.GLOO:
        dist.monitored_barrier(group, timeout, wait_all_ranks)
        return
    if backend != "libcoll":
        raise RuntimeError(f"torch_libcoll.monitored_barrier: a group of backend {backend!r}, "
                           "not libcoll's (nor Gloo's)")
    if timeout is None:
        timeout = datetime.timedelta(milliseconds=-1)  # c10d's kUnsetTimeout
    group.monitored_barrier(timeout, wait_all_ranks=wait_all_ranks)


def _shutdown():
    from . import _C
    _C._shutdown()


atexit.register(_shutdown)
