"""torch.distributed on "libcoll" against "gloo", side by side in one job.

    collrun -np N /usr/bin/python3 bench/torch_bench.py [--sizes MIN:MAX]
        [--repeats R] [--iters I] [--ops allreduce,broadcast,...] [--ddp]
    (or started as torchrun would: tests/torch/env_launch.py N TIMEOUT bench/torch_bench.py ...)

The default group is libcoll's, a second group of every rank Gloo's. For
each collective and size (bytes of float32, MIN, 4 MIN, ... MAX) it times
ITER blocking calls (barrier of the same backend first, every rank's
slowest counted: the time is the max over ranks of the mean) on each
backend, alternating libcoll and Gloo within each of R repeats, and prints
rank 0's table: median time per call (us) of each, the median of the
per-repeat ratios libcoll/gloo and their spread (min-max). --ddp adds a
training step of a small MLP under DistributedDataParallel (forward,
backward with its gradient allreduce, optimizer step), same method.
Never asserts a time: a measurement, not a test. Rank 0 prints markdown."""
import argparse
import statistics
import time

import torch
import torch.distributed as dist

import torch_libcoll  # noqa: F401  (registers "libcoll")


def parse():
    p = argparse.ArgumentParser()
    p.add_argument("--sizes", default="64:67108864")
    p.add_argument("--repeats", type=int, default=5)
    p.add_argument("--iters", type=int, default=50)
    p.add_argument("--ops", default="allreduce,broadcast,allgather,reduce_scatter")
    p.add_argument("--ddp", action="store_true")
    return p.parse_args()


def sizes_of(spec):
    lo, hi = (int(x) for x in spec.split(":"))
    out, s = [], lo
    while s <= hi:
        out.append(s)
        s *= 4
    return out


def runner(op, nbytes, group, size):
    n = max(1, nbytes // 4)
    t = torch.ones(n, dtype=torch.float32)
    if op == "allreduce":
        return lambda: dist.all_reduce(t, group=group)
    if op == "broadcast":
        return lambda: dist.broadcast(t, 0, group=group)
    if op == "allgather":
        outs = [torch.empty(n) for _ in range(size)]
        return lambda: dist.all_gather(outs, t, group=group)
    if op == "reduce_scatter":
        # Gloo 1.13 has no reduce_scatter: the same bytes as all_reduce then
        # a slice is what a Gloo user does instead.
        ins = [torch.ones(n) for _ in range(size)]
        out = torch.empty(n)
        if group is None:
            return lambda: dist.reduce_scatter(out, ins, group=group)
        whole = torch.ones(n * size)
        return lambda: dist.all_reduce(whole, group=group)
    raise ValueError(op)


def time_calls(fn, iters, group):
    dist.barrier(group=group)
    t0 = time.perf_counter()
    for _ in range(iters):
        fn()
    mine = torch.tensor([(time.perf_counter() - t0) / iters])
    dist.all_reduce(mine, op=dist.ReduceOp.MAX, group=group)
    return mine.item()


def ddp_step(group):
    torch.manual_seed(0)
    model = torch.nn.Sequential(torch.nn.Linear(256, 1024), torch.nn.ReLU(),
                                torch.nn.Linear(1024, 1024), torch.nn.ReLU(),
                                torch.nn.Linear(1024, 10))
    ddp = torch.nn.parallel.DistributedDataParallel(model, process_group=group)
    opt = torch.optim.SGD(ddp.parameters(), lr=0.01)
    x, y = torch.randn(32, 256), torch.randint(0, 10, (32,))

    def step():
        opt.zero_grad()
        torch.nn.functional.cross_entropy(ddp(x), y).backward()
        opt.step()
    step()
    return step


def main():
    args = parse()
    dist.init_process_group("libcoll")
    rank, size = dist.get_rank(), dist.get_world_size()
    gloo = dist.new_group(backend="gloo")
    rows = []
    for op in args.ops.split(","):
        for nbytes in sizes_of(args.sizes):
            iters = max(3, args.iters if nbytes <= 65536 else args.iters * 65536 // nbytes)
            fns = {"libcoll": runner(op, nbytes, None, size), "gloo": runner(op, nbytes, gloo, size)}
            groups = {"libcoll": None, "gloo": gloo}
            for name in fns:  # warm up each once
                time_calls(fns[name], 2, groups[name])
            times = {"libcoll": [], "gloo": []}
            for r in range(args.repeats):
                order = ["libcoll", "gloo"] if r % 2 == 0 else ["gloo", "libcoll"]
                for name in order:
                    times[name].append(time_calls(fns[name], iters, groups[name]))
            rows.append((op, nbytes, times))
    if args.ddp:
        steps = {"libcoll": ddp_step(None), "gloo": ddp_step(gloo)}
        times = {"libcoll": [], "gloo": []}
        for r in range(args.repeats):
            for name in (["libcoll", "gloo"] if r % 2 == 0 else ["gloo", "libcoll"]):
                times[name].append(time_calls(steps[name], 10, None if name == "libcoll" else gloo))
        rows.append(("ddp_step", 0, times))
    if rank == 0:
        print(f"np {size}, {args.repeats} repeats, alternating; float32; "
              "reduce_scatter on gloo = all_reduce of the whole input (Gloo 1.13 has none)")
        print("| collective | bytes | libcoll us | gloo us | libcoll/gloo median | spread |")
        print("| --- | ---: | ---: | ---: | ---: | --- |")
        for op, nbytes, times in rows:
            ratios = [a / b for a, b in zip(times["libcoll"], times["gloo"])]
            print(f"| {op} | {nbytes if nbytes else '-'} | "
                  f"{statistics.median(times['libcoll']) * 1e6:.1f} | "
                  f"{statistics.median(times['gloo']) * 1e6:.1f} | "
                  f"{statistics.median(ratios):.2f} | {min(ratios):.2f}-{max(ratios):.2f} |",
                  flush=True)
    dist.barrier()
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
