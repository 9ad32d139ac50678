"""torch_libcoll: libcoll as a torch.distributed backend.

    import torch_libcoll                      # registers the backend "libcoll"
    torch.distributed.init_process_group("libcoll")
    torch.distributed.all_reduce(tensor)

Run the job under libcoll's launcher: ``collrun -np 4 python3 train.py``
(collrun sets RANK, WORLD_SIZE, MASTER_ADDR, MASTER_PORT ... for env://).
"""
import atexit

import torch  # noqa: F401  (loads libtorch before the extension)
import torch.distributed as dist

from ._C import ProcessGroupLibcoll

__all__ = ["ProcessGroupLibcoll"]


def _create(store, rank, size, timeout):
    """torch 1.13's backend creator: called on the members of each group."""
    return ProcessGroupLibcoll(store, rank, size, timeout.total_seconds())


if "LIBCOLL" not in dist.Backend._plugins:
    dist.Backend.register_backend("libcoll", _create)


def _shutdown():
    from . import _C
    _C._shutdown()


atexit.register(_shutdown)
