"""The torch.distributed backend "libcoll" (torch_libcoll), run by collrun:
    collrun -np N python3 torch_backend_test.py
Every collective x dtype against closed forms (and against Gloo where Gloo
has the op), non-contiguous tensors, async work and futures, subgroups,
monitored_barrier (late ranks named), unsupported calls, and a small DDP
model trained on libcoll and on Gloo.
Any failed check ends this rank with status 1 (collrun ends the job)."""
import datetime
import functools
import os
import sys
import time
import traceback
import warnings

import torch
import torch.distributed as dist

import torch_libcoll  # noqa: F401  (registers "libcoll")

warnings.filterwarnings("ignore", message=".*will be deprecated")

DTYPES = [torch.float32, torch.float64, torch.float16, torch.bfloat16, torch.int8,
          torch.int16, torch.int32, torch.int64, torch.uint8, torch.bool]
FLOATS = {torch.float32, torch.float64, torch.float16, torch.bfloat16}
OPS = {
    "SUM": dist.ReduceOp.SUM, "PRODUCT": dist.ReduceOp.PRODUCT, "MIN": dist.ReduceOp.MIN,
    "MAX": dist.ReduceOp.MAX, "BAND": dist.ReduceOp.BAND, "BOR": dist.ReduceOp.BOR,
    "BXOR": dist.ReduceOp.BXOR, "AVG": dist.ReduceOp.AVG,
}
BITWISE = {"BAND", "BOR", "BXOR"}

rank = size = -1
checks = 0


def check(ok, what):
    global checks
    checks += 1
    if not ok:
        raise AssertionError(f"rank {rank}: {what}")


def same(got, want, what):
    if want.dtype in (torch.float16, torch.bfloat16):
        ok = torch.allclose(got.float(), want.float(), rtol=1e-2, atol=1e-2)
    elif want.dtype in FLOATS:
        ok = torch.allclose(got, want, rtol=1e-6, atol=1e-6)
    else:
        ok = torch.equal(got, want)
    check(got.dtype == want.dtype and got.shape == want.shape and ok,
          f"{what}: got {got} want {want}")


def make(q, n, dtype, salt=0):
    """Rank q's input: small values, so that sums and products are exact."""
    v = torch.arange(n) % 4 + q + 1 + salt
    if dtype == torch.bool:
        return v % 2 == 0
    return v.to(dtype)


def valid(op, dtype):
    if op in BITWISE:
        return dtype not in FLOATS
    if op == "AVG":
        return dtype in FLOATS
    return True


def reduce_closed(op, tensors):
    """The closed form of op over the ranks' inputs, in their dtype."""
    dtype = tensors[0].dtype
    if op == "AVG":
        return (functools.reduce(lambda a, b: a + b, [t.double() for t in tensors])
                / len(tensors)).to(dtype)
    fn = {
        "SUM": lambda a, b: a + b, "PRODUCT": lambda a, b: a * b,
        "MIN": torch.minimum, "MAX": torch.maximum,
        "BAND": lambda a, b: a & b, "BOR": lambda a, b: a | b, "BXOR": lambda a, b: a ^ b,
    }[op]
    if dtype in (torch.float16, torch.bfloat16):  # libcoll computes in float
        return functools.reduce(fn, [t.float() for t in tensors]).to(dtype)
    return functools.reduce(fn, tensors)


def gloo_ok(fn):
    """Runs fn on Gloo: False where Gloo lacks the op or dtype (it says so
    on every rank alike, before sending anything)."""
    try:
        fn()
        return True
    except RuntimeError:
        return False


def test_allreduce(gloo):
    for dtype in DTYPES:
        for n in (0, 1, 7):
            for name, op in OPS.items():
                if not valid(name, dtype):
                    continue
                t = make(rank, n, dtype)
                dist.all_reduce(t, op=op)
                want = reduce_closed(name, [make(q, n, dtype) for q in range(size)])
                same(t, want, f"all_reduce {name} {dtype} n={n}")
                if n == 7 and name != "AVG":
                    g = make(rank, n, dtype)
                    if gloo_ok(lambda: dist.all_reduce(g, op=op, group=gloo)):
                        same(t, g, f"all_reduce {name} {dtype} against gloo")
    # A large count (past libcoll's slot sizes) and a non-contiguous tensor.
    t = make(rank, 300000, torch.float32)
    dist.all_reduce(t)
    same(t, reduce_closed("SUM", [make(q, 300000, torch.float32) for q in range(size)]),
         "all_reduce of 300000 floats")
    base = make(rank, 40, torch.int32).reshape(5, 8)
    view = base[:, ::2]
    check(not view.is_contiguous(), "the test view is not contiguous")
    dist.all_reduce(view, op=dist.ReduceOp.MAX)
    want = reduce_closed("MAX", [make(q, 40, torch.int32).reshape(5, 8)[:, ::2]
                                 for q in range(size)])
    same(view, want, "all_reduce of a non-contiguous view")
    same(base[:, 1::2], make(rank, 40, torch.int32).reshape(5, 8)[:, 1::2],
         "all_reduce leaves the rest of the base tensor")
    for name in ("BAND", "BOR", "BXOR"):
        try:
            dist.all_reduce(torch.ones(3), op=OPS[name])
            check(False, f"{name} on float32 raised nothing")
        except RuntimeError as e:
            check("not supported by libcoll" in str(e), f"{name} on float32: {e}")


def test_allreduce_coalesced():
    for dtype in (torch.float32, torch.int64, torch.bfloat16):
        ts = [make(rank, 5, dtype), make(rank, 3, dtype, 1).reshape(3, 1)[::1]]
        dist.all_reduce_coalesced(ts, op=dist.ReduceOp.SUM)
        same(ts[0], reduce_closed("SUM", [make(q, 5, dtype) for q in range(size)]),
             f"all_reduce_coalesced {dtype} [0]")
        same(ts[1], reduce_closed("SUM", [make(q, 3, dtype, 1).reshape(3, 1)
                                          for q in range(size)]),
             f"all_reduce_coalesced {dtype} [1]")


def test_broadcast(gloo):
    for dtype in DTYPES:
        for root in range(size):
            t = make(rank, 9, dtype)
            dist.broadcast(t, src=root)
            same(t, make(root, 9, dtype), f"broadcast {dtype} root {root}")
    for dtype in DTYPES:
        g = make(rank, 9, dtype)
        if gloo_ok(lambda: dist.broadcast(g, src=size - 1, group=gloo)):
            t = make(rank, 9, dtype)
            dist.broadcast(t, src=size - 1)
            same(t, g, f"broadcast {dtype} against gloo")
    base = make(rank, 24, torch.float64).reshape(4, 6)
    view = base.t()
    dist.broadcast(view, src=0)
    same(base, make(0, 24, torch.float64).reshape(4, 6), "broadcast of a transposed view")


def test_reduce():
    for dtype in DTYPES:
        for name, op in OPS.items():
            if not valid(name, dtype):
                continue
            root = (len(name) + DTYPES.index(dtype)) % size
            t = make(rank, 6, dtype)
            dist.reduce(t, dst=root, op=op)
            if rank == root:
                want = reduce_closed(name, [make(q, 6, dtype) for q in range(size)])
                same(t, want, f"reduce {name} {dtype} root {root}")


def test_allgather(gloo):
    for dtype in DTYPES:
        out = [make(-1, 4, dtype) for _ in range(size)]
        dist.all_gather(out, make(rank, 4, dtype, 2))
        for q in range(size):
            same(out[q], make(q, 4, dtype, 2), f"all_gather {dtype} [{q}]")
        g = [make(-1, 4, dtype) for _ in range(size)]
        if gloo_ok(lambda: dist.all_gather(g, make(rank, 4, dtype, 2), group=gloo)):
                for q in range(size):
                    same(out[q], g[q], f"all_gather {dtype} against gloo [{q}]")
        # all_gather_into_tensor (_allgather_base)
        big = torch.zeros(size * 5, dtype=dtype)
        dist.all_gather_into_tensor(big, make(rank, 5, dtype))
        same(big, torch.cat([make(q, 5, dtype) for q in range(size)]),
             f"all_gather_into_tensor {dtype}")
    # Non-contiguous outputs.
    bases = [torch.zeros(3, 4) for _ in range(size)]
    outs = [b[:, ::2] for b in bases]
    dist.all_gather(outs, make(rank, 6, torch.float32).reshape(3, 2))
    for q in range(size):
        same(bases[q][:, ::2], make(q, 6, torch.float32).reshape(3, 2),
             f"all_gather into a non-contiguous view [{q}]")
    # all_gather_coalesced
    inputs = [make(rank, 3, torch.int32), make(rank, 4, torch.int32, 1).reshape(2, 2)]
    outputs = [[torch.zeros(3, dtype=torch.int32), torch.zeros(2, 2, dtype=torch.int32)]
               for _ in range(size)]
    dist.all_gather_coalesced(outputs, inputs)
    for q in range(size):
        same(outputs[q][0], make(q, 3, torch.int32), f"all_gather_coalesced [{q}][0]")
        same(outputs[q][1], make(q, 4, torch.int32, 1).reshape(2, 2),
             f"all_gather_coalesced [{q}][1]")


def test_gather_scatter():
    for dtype in DTYPES:
        for root in range(size):
            out = [make(-1, 5, dtype) for _ in range(size)] if rank == root else None
            dist.gather(make(rank, 5, dtype, root), out, dst=root)
            if rank == root:
                for q in range(size):
                    same(out[q], make(q, 5, dtype, root), f"gather {dtype} root {root} [{q}]")
            got = make(-1, 5, dtype)
            pieces = [make(q, 5, dtype, root) for q in range(size)] if rank == root else None
            dist.scatter(got, pieces, src=root)
            same(got, make(rank, 5, dtype, root), f"scatter {dtype} root {root}")


def test_reduce_scatter():
    for dtype in DTYPES:
        for name, op in OPS.items():
            if not valid(name, dtype) or name == "PRODUCT":
                continue
            out = make(-1, 3, dtype)
            dist.reduce_scatter(out, [make(rank, 3, dtype, j) for j in range(size)], op=op)
            want = reduce_closed(name, [make(q, 3, dtype, rank) for q in range(size)])
            same(out, want, f"reduce_scatter {name} {dtype}")
            out = make(-1, 4, dtype)
            inp = torch.cat([make(rank, 4, dtype, j) for j in range(size)])
            dist.reduce_scatter_tensor(out, inp, op=op)
            want = reduce_closed(name, [make(q, 4, dtype, rank) for q in range(size)])
            same(out, want, f"reduce_scatter_tensor {name} {dtype}")


def test_alltoall():
    for dtype in DTYPES:
        # Equal splits.
        inp = torch.cat([make(rank, 2, dtype, j) for j in range(size)])
        out = make(-1, 2 * size, dtype)
        dist.all_to_all_single(out, inp)
        same(out, torch.cat([make(j, 2, dtype, rank) for j in range(size)]),
             f"all_to_all_single {dtype}")
        # Uneven splits, rows of 2: rank q sends (q + j) % 3 + 1 rows to j.
        in_splits = [(rank + j) % 3 + 1 for j in range(size)]
        out_splits = [(j + rank) % 3 + 1 for j in range(size)]
        inp = torch.cat([make(rank, 2 * in_splits[j], dtype, j).reshape(-1, 2)
                         for j in range(size)])
        out = torch.zeros(sum(out_splits), 2, dtype=dtype)
        dist.all_to_all_single(out, inp, out_splits, in_splits)
        want = torch.cat([make(j, 2 * out_splits[j], dtype, rank).reshape(-1, 2)
                          for j in range(size)])
        same(out, want, f"all_to_all_single uneven {dtype}")
        # all_to_all of lists, sizes differing by peer.
        ins = [make(rank, j + 1, dtype, j) for j in range(size)]
        outs = [make(-1, rank + 1, dtype) for _ in range(size)]
        dist.all_to_all(outs, ins)
        for j in range(size):
            same(outs[j], make(j, rank + 1, dtype, rank), f"all_to_all {dtype} from {j}")


def test_async():
    t = make(rank, 1000, torch.float32)
    work = dist.all_reduce(t, async_op=True)
    deadline = time.time() + 30
    while not work.is_completed():
        check(time.time() < deadline, "is_completed never became true")
        time.sleep(0.001)
    want = reduce_closed("SUM", [make(q, 1000, torch.float32) for q in range(size)])
    same(t, want, "all_reduce completed through is_completed")
    work.wait()

    # Several outstanding, waited for in reverse order.
    ts = [make(rank, 100 * (i + 1), torch.int64, i) for i in range(4)]
    works = [dist.all_reduce(x, async_op=True) for x in ts]
    for w in reversed(works):
        w.wait()
    for i, x in enumerate(ts):
        same(x, reduce_closed("SUM", [make(q, 100 * (i + 1), torch.int64, i)
                                      for q in range(size)]), f"outstanding all_reduce {i}")

    # Futures: completed with nobody calling wait (the progress thread).
    t = make(rank, 64, torch.float64)
    fut = dist.all_reduce(t, async_op=True).get_future()
    deadline = time.time() + 30
    while not fut.done():
        check(time.time() < deadline, "a future never completed by itself")
        time.sleep(0.001)
    value = fut.wait()
    same(value[0], reduce_closed("SUM", [make(q, 64, torch.float64) for q in range(size)]),
         "the future's value")
    t = make(rank, 8, torch.float32)
    doubled = dist.all_reduce(t, async_op=True).get_future().then(
        lambda f: f.value()[0] * 2).wait()
    same(doubled, 2 * reduce_closed("SUM", [make(q, 8, torch.float32) for q in range(size)]),
         "a future's then()")
    work = dist.broadcast(make(rank, 3, torch.int32), src=0, async_op=True)
    work.wait()
    same(work.result()[0], make(0, 3, torch.int32), "work.result()")
    dist.barrier()
    dist.barrier(async_op=True).wait()


def test_subgroups():
    # Every rank enters new_group; only the members get a communicator.
    members = [0, size - 1] if size > 2 else [1]
    g = dist.new_group(members, backend="libcoll")
    if rank in members:
        t = make(rank, 5, torch.float32)
        dist.all_reduce(t, group=g)
        same(t, reduce_closed("SUM", [make(q, 5, torch.float32) for q in members]),
             f"all_reduce on subgroup {members}")
        out = [make(-1, 2, torch.int64) for _ in members]
        dist.all_gather(out, make(rank, 2, torch.int64), group=g)
        for i, q in enumerate(members):
            same(out[i], make(q, 2, torch.int64), f"all_gather on subgroup {members}")
        t = make(rank, 4, torch.int16)
        dist.broadcast(t, src=members[-1], group=g)
        same(t, make(members[-1], 4, torch.int16), "broadcast on the subgroup")
    # The world meanwhile, and a group of every rank (a communicator of its own).
    t = make(rank, 3, torch.int32)
    dist.all_reduce(t)
    same(t, reduce_closed("SUM", [make(q, 3, torch.int32) for q in range(size)]),
         "world all_reduce after a subgroup")
    everyone = dist.new_group(backend="libcoll")
    t = make(rank, 3, torch.int32)
    dist.all_reduce(t, op=dist.ReduceOp.MAX, group=everyone)
    same(t, reduce_closed("MAX", [make(q, 3, torch.int32) for q in range(size)]),
         "all_reduce on a second group of every rank")
    # A second subgroup of other members, used interleaved with the first.
    others = list(range(1, size))
    h = dist.new_group(others, backend="libcoll")
    if rank in others:
        t = make(rank, 2, torch.float64)
        dist.all_reduce(t, op=dist.ReduceOp.MIN, group=h)
        same(t, reduce_closed("MIN", [make(q, 2, torch.float64) for q in others]),
             f"all_reduce on subgroup {others}")


def test_monitored_barrier(gloo):
    mb = torch_libcoll.monitored_barrier
    mb()  # the group's timeout
    mb(timeout=datetime.timedelta(seconds=60), wait_all_ranks=True)
    mb(gloo)  # handed to torch's own
    sub = [0, size - 1]
    g = dist.new_group(sub, backend="libcoll")
    mb(g)  # a rank outside it returns at once

    def late(ranks, wait_all, want):
        """ranks sleep past a 1 s timeout: every rank raises, rank 0 with
        `want`, the others with rank 0's text; none waits long."""
        dist.barrier()
        start = time.time()
        if rank in ranks:
            time.sleep(3)
        try:
            mb(timeout=datetime.timedelta(seconds=1), wait_all_ranks=wait_all)
            check(False, f"monitored_barrier with ranks {ranks} late raised nothing")
        except RuntimeError as e:
            text = str(e)
            check(want in text and (rank == 0 or "rank 0 reports" in text),
                  f"monitored_barrier with ranks {ranks} late (wait_all_ranks={wait_all}): "
                  f"{text}")
        check(time.time() - start < 20, "monitored_barrier took 20 s to fail")

    late([size - 1], False, f"Rank {size - 1} failed to pass monitoredBarrier in 1000 ms")
    if size >= 3:
        others = list(range(1, size))
        late(others, True,
             f"Ranks {', '.join(map(str, others))} failed to pass monitoredBarrier in 1000 ms")
        late(others, False, "Rank 1 failed to pass monitoredBarrier in 1000 ms")
    # The group still works, monitored barriers included.
    mb(wait_all_ranks=True)
    t = make(rank, 3, torch.int32)
    dist.all_reduce(t)
    same(t, reduce_closed("SUM", [make(q, 3, torch.int32) for q in range(size)]),
         "all_reduce after a failed monitored_barrier")


def test_unsupported():
    for call in (lambda: dist.send(torch.ones(2), dst=(rank + 1) % size),
                 lambda: dist.recv(torch.ones(2), src=(rank + 1) % size),
                 lambda: dist.all_reduce(torch.ones(2).to_sparse())):
        try:
            call()
            check(False, "an unsupported call raised nothing")
        except RuntimeError as e:
            check("not supported by libcoll" in str(e), f"unsupported call: {e}")
    # Complex tensors: torch passes them on as float pairs (SUM works).
    t = torch.full((3,), complex(rank, 1), dtype=torch.complex64)
    dist.all_reduce(t)
    same(t, torch.full((3,), complex(size * (size - 1) / 2, size), dtype=torch.complex64),
         "all_reduce of complex64")


def train(group, steps=5):
    from torch.nn.parallel import DistributedDataParallel as DDP
    torch.manual_seed(1234 + rank)  # different on each rank: DDP broadcasts rank 0's
    model = torch.nn.Sequential(torch.nn.Linear(8, 16), torch.nn.ReLU(), torch.nn.Linear(16, 4))
    ddp = DDP(model, process_group=group)
    opt = torch.optim.SGD(ddp.parameters(), lr=0.1)
    gen = torch.Generator().manual_seed(99 + rank)
    for _ in range(steps):
        x = torch.randn(6, 8, generator=gen)
        y = torch.randn(6, 4, generator=gen)
        opt.zero_grad()
        torch.nn.functional.mse_loss(ddp(x), y).backward()
        opt.step()
    return torch.cat([p.detach().reshape(-1) for p in model.parameters()])


def test_ddp(gloo):
    mine = train(None)  # the default group: libcoll
    theirs = train(gloo)
    check(torch.allclose(mine, theirs, rtol=1e-5, atol=1e-6),
          f"DDP on libcoll differs from Gloo's run by {(mine - theirs).abs().max()}")
    everyone = [torch.zeros_like(mine) for _ in range(size)]
    dist.all_gather(everyone, mine, group=gloo)
    for q in range(size):
        check(torch.equal(everyone[q], mine), f"DDP parameters of rank {q} differ from mine")


def main():
    global rank, size
    for name in ("RANK", "LOCAL_RANK", "WORLD_SIZE", "LOCAL_WORLD_SIZE", "MASTER_ADDR",
                 "MASTER_PORT"):
        if name not in os.environ:
            raise AssertionError(f"the launcher did not set {name}")
    init_method = os.environ.get("TORCH_LIBCOLL_INIT_METHOD")
    if init_method:  # tcp:// or file:// (env_launch.py --init)
        dist.init_process_group("libcoll", init_method=init_method,
                                rank=int(os.environ["RANK"]),
                                world_size=int(os.environ["WORLD_SIZE"]))
    else:
        dist.init_process_group("libcoll")  # env://, from the launcher's variables
    rank, size = dist.get_rank(), dist.get_world_size()
    bootstrap = dist.distributed_c10d._get_default_group().bootstrap
    if "COLL_RANK" in os.environ:  # under collrun: its bootstrap, its ranks
        check(rank == int(os.environ["COLL_RANK"]) and size == int(os.environ["COLL_SIZE"]),
              "torch's rank and size are libcoll's")
        check(bootstrap == "collrun", f"bootstrap {bootstrap} under collrun")
    else:  # torchrun-style: through torch's store
        check(bootstrap == "oob", f"bootstrap {bootstrap} without a launcher")
    if rank == 0:
        print(f"torch_backend_test: np {size}, libcoll's bootstrap {bootstrap}"
              f"{', init_method ' + init_method.split(':')[0] if init_method else ', env://'}",
              flush=True)
    check(dist.get_backend() == "libcoll", f"the backend is {dist.get_backend()}")
    gloo = dist.new_group(backend="gloo")
    start = time.time()
    tests = [("allreduce", lambda: test_allreduce(gloo)),
             ("allreduce_coalesced", test_allreduce_coalesced),
             ("broadcast", lambda: test_broadcast(gloo)),
             ("reduce", test_reduce),
             ("allgather", lambda: test_allgather(gloo)),
             ("gather/scatter", test_gather_scatter),
             ("reduce_scatter", test_reduce_scatter),
             ("alltoall", test_alltoall),
             ("async", test_async),
             ("subgroups", test_subgroups),
             ("monitored_barrier", lambda: test_monitored_barrier(gloo)),
             ("unsupported", test_unsupported),
             ("ddp", lambda: test_ddp(gloo))]
    only = os.environ.get("TORCH_LIBCOLL_TESTS")
    for name, fn in tests:
        if only and name not in only.split(","):
            continue
        t0 = time.time()
        fn()
        dist.barrier()
        if rank == 0:
            print(f"{name}: ok ({time.time() - t0:.2f} s)", flush=True)
    dist.barrier()
    if rank == 0:
        print(f"torch_backend_test: np {size}: {checks} checks on rank 0 passed "
              f"in {time.time() - start:.1f} s", flush=True)
    # Right before the store goes (rank 0's TCPStore server with the group):
    # rank 0 returns only once every rank has read its verdict.
    torch_libcoll.monitored_barrier()
    dist.destroy_process_group()


if __name__ == "__main__":
    try:
        main()
    except Exception:
        traceback.print_exc()
        sys.stdout.flush()
        sys.stderr.flush()
        os._exit(1)
