"""torch_libcoll: libcoll as a torch.distributed backend.

    import torch_libcoll                      # registers the backend "libcoll"
    torch.distributed.init_process_group("libcoll")
    torch.distributed.all_reduce(tensor)

Start the job as for Gloo (torchrun-style RANK, WORLD_SIZE, MASTER_ADDR,
MASTER_PORT for env://, or tcp:// or file://): libcoll bootstraps through
torch's store. Or under libcoll's launcher, ``collrun -np 4 python3
train.py`` (it sets those variables), mpirun or srun: then libcoll uses
the launcher's bootstrap.
"""
import atexit

import torch  # noqa: F401  (loads libtorch before the extension)
import torch.distributed as dist

from ._C import ProcessGroupLibcoll

__all__ = ["ProcessGroupLibcoll"]


def _create(store, rank, size, timeout):
    """torch 1.13's backend creator: called on the members of each group.
    init_process_group calls it before it sets the default group, so the
    default group is the one made while torch.distributed is not yet
    initialized."""
    return ProcessGroupLibcoll(store, rank, size, timeout.total_seconds(),
                               default_group=not dist.is_initialized())


if "LIBCOLL" not in dist.Backend._plugins:
    dist.Backend.register_backend("libcoll", _create)


def _shutdown():
    from . import _C
    _C._shutdown()


atexit.register(_shutdown)
