"""mpi4py (Debian's python3-mpi4py, unmodified) through the PMPI shim.

Python programs reach MPI through mpi4py's compiled module, which calls the
C MPI_* functions of libmpi; with libcoll_mpi.so preloaded those resolve to
the shim. This program calls every collective mpi4py exposes - the buffer
forms (upper case: MPI_Allreduce ... MPI_Exscan, their I-forms) and the
object forms (lower case: pickled objects over MPI_Bcast, MPI_Gather(v),
MPI_Alltoall(v), ...) - on MPI_COMM_WORLD and on communicators made by
Split, Dup and Create, and checks every result against its closed form.
Then, where the shim is loaded (PMPI_TEST_EXPECT_SHIM=1), it asks the shim
(coll_mpi_counts, through ctypes) that each function it used served every
call and passed none to MPI.

Run: mpirun -np N [-x LD_PRELOAD=libcoll_mpi.so] python3 mpi4py_test.py
Prints "mpi4py_test: all checks passed at np N" on rank 0.
"""
import ctypes
import os
import sys
from array import array

from mpi4py import MPI

comm = MPI.COMM_WORLD
rank, size = comm.rank, comm.size
errors = 0


def check(cond, what):
    global errors
    if not cond:
        errors += 1
        if errors <= 20:
            print(f"rank {rank}: {what}", file=sys.stderr, flush=True)


def tri(k):
    return k * (k + 1) // 2


def buffers(c):
    """The buffer forms on communicator c; odd counts, 0 and 1 included."""
    n, r = c.size, c.rank
    for count in (0, 1, 7, 5001):
        send = array('i', [r + k for k in range(count)])
        out = array('i', [0] * count)
        c.Allreduce(send, out, op=MPI.SUM)
        check(list(out) == [n * k + tri(n - 1) for k in range(count)], f"Allreduce {count}")
        for root in range(n):
            got = array('i', [-1] * count)
            c.Reduce(send, got, op=MPI.MAX, root=root)
            if r == root:
                check(list(got) == [n - 1 + k for k in range(count)], f"Reduce {count} {root}")
        b = array('d', [float(r + k) for k in range(count)])
        c.Bcast(b, root=n - 1)
        check(list(b) == [float(n - 1 + k) for k in range(count)], f"Bcast {count}")
        g = array('i', [0] * (n * count))
        c.Allgather(send, g)
        check(list(g) == [q + k for q in range(n) for k in range(count)], f"Allgather {count}")

    one = array('l', [r + 1])
    s = array('l', [0])
    c.Scan(one, s, op=MPI.SUM)
    check(s[0] == tri(r + 1), "Scan")
    e = array('l', [-7])
    c.Exscan(one, e, op=MPI.SUM)
    if r > 0:
        check(e[0] == tri(r), "Exscan")
    prod = array('d', [0.0])
    c.Allreduce(array('d', [2.0]), prod, op=MPI.PROD)
    check(prod[0] == 2.0 ** n, "Allreduce PROD")
    land = array('i', [0])
    c.Allreduce(array('i', [1 if r != n - 1 else 0]), land, op=MPI.LAND)
    check(land[0] == 0, "Allreduce LAND")
    bor = array('i', [0])
    c.Allreduce(array('i', [1 << r]), bor, op=MPI.BOR)
    check(bor[0] == (1 << n) - 1, "Allreduce BOR")
    loc = array('i', [0, 0])
    c.Allreduce([array('i', [r % 2, r]), MPI.INT_INT], [loc, MPI.INT_INT], op=MPI.MAXLOC)
    check(list(loc) == [min(n - 1, 1), 1 if n > 1 else 0], "Allreduce MAXLOC 2INT")
    dloc = array('d', [0.0, 0.0])  # MPI_DOUBLE_INT is {double, int}: 16 bytes
    c.Allreduce([array('d', [float(-r), 0.0]), MPI.DOUBLE_INT],
                [dloc, MPI.DOUBLE_INT], op=MPI.MINLOC)
    check(dloc[0] == float(-(n - 1)), "Allreduce MINLOC DOUBLE_INT")

    # reduce_scatter: block, and uneven counts (rank q gets q + 1 elements).
    blk = array('i', [0] * 3)
    c.Reduce_scatter_block(array('i', [r + k for k in range(3 * n)]), blk, op=MPI.SUM)
    check(list(blk) == [n * (3 * r + k) + tri(n - 1) for k in range(3)], "Reduce_scatter_block")
    counts = [q + 1 for q in range(n)]
    total = sum(counts)
    mine = array('i', [0] * counts[r])
    c.Reduce_scatter(array('i', [1] * total), mine, recvcounts=counts, op=MPI.SUM)
    check(list(mine) == [n] * counts[r], "Reduce_scatter")

    # v-forms with uneven counts and a gap between the blocks.
    counts = [q % 3 + 1 for q in range(n)]
    displs = [sum(counts[:q]) + q for q in range(n)]
    span = displs[-1] + counts[-1]
    gv = array('i', [-1] * span)
    c.Allgatherv(array('i', [r] * counts[r]), [gv, counts, displs, MPI.INT])
    want = [-1] * span
    for q in range(n):
        want[displs[q]:displs[q] + counts[q]] = [q] * counts[q]
    check(list(gv) == want, "Allgatherv with gaps")
    for root in (0, n - 1):
        gg = array('i', [-1] * span)
        c.Gatherv(array('i', [r] * counts[r]), [gg, counts, displs, MPI.INT], root=root)
        if r == root:
            check(list(gg) == want, "Gatherv")
        sv = array('i', [-1] * counts[r])
        c.Scatterv([array('i', want), counts, displs, MPI.INT], sv, root=root)
        check(list(sv) == [r] * counts[r], "Scatterv")
        ga = array('i', [-1] * (2 * n))
        c.Gather(array('i', [r, -r]), ga, root=root)
        if r == root:
            check(list(ga) == [v for q in range(n) for v in (q, -q)], "Gather")
        sc = array('i', [-1, -1])
        c.Scatter(array('i', [v for q in range(n) for v in (q, 2 * q)]), sc, root=root)
        check(list(sc) == [r, 2 * r], "Scatter")
    a2a = array('d', [0.0] * n)
    c.Alltoall(array('d', [float(r * n + q) for q in range(n)]), a2a)
    check(list(a2a) == [float(q * n + r) for q in range(n)], "Alltoall")
    # Alltoallv: rank r sends q + 1 copies of r to rank q.
    scounts = [q + 1 for q in range(n)]
    sdispls = [sum(scounts[:q]) for q in range(n)]
    rcounts = [r + 1] * n
    rdispls = [q * (r + 1) for q in range(n)]
    av = array('i', [-1] * ((r + 1) * n))
    c.Alltoallv([array('i', [r] * sum(scounts)), scounts, sdispls, MPI.INT],
                [av, rcounts, rdispls, MPI.INT])
    check(list(av) == [q for q in range(n) for _ in range(r + 1)], "Alltoallv")
    c.Barrier()

    # Non-blocking forms; the buffers live until the waits.
    x, y = array('d', [1.0, float(r)]), array('d', [0.0, 0.0])
    bb = array('i', [r] * 9)
    ag = array('i', [0] * n)
    mine = array('i', [r])
    reqs = [c.Iallreduce(x, y, op=MPI.SUM), c.Ibcast(bb, root=0), c.Iallgather(mine, ag),
            c.Ibarrier()]
    MPI.Request.Waitall(reqs)
    check(list(y) == [float(n), float(tri(n - 1))], "Iallreduce")
    check(list(bb) == [0] * 9, "Ibcast")
    check(list(ag) == list(range(n)), "Iallgather")


def objects(c):
    """The object forms: pickles over the byte collectives."""
    n, r = c.size, c.rank
    check(c.allreduce(r) == tri(n - 1), "allreduce")
    check(c.bcast({'from': r, 'pad': 'x' * 3000}, root=n - 1)['from'] == n - 1, "bcast")
    check(c.gather(r, root=0) == (list(range(n)) if r == 0 else None), "gather")
    check(c.scatter([q * q for q in range(n)] if r == 0 else None, root=0) == r * r, "scatter")
    check(c.allgather((r, str(r))) == [(q, str(q)) for q in range(n)], "allgather")
    check(c.alltoall([(r, q) for q in range(n)]) == [(q, r) for q in range(n)], "alltoall")
    check(c.reduce(r, op=MPI.MAX, root=n - 1) == (n - 1 if r == n - 1 else None), "reduce")
    check(c.scan(1) == r + 1, "scan")
    check(c.exscan(1) == (None if r == 0 else r), "exscan")


buffers(comm)
objects(comm)
half = comm.Split(rank % 2, -rank)  # reversed order inside each half
buffers(half)
objects(half)
dup = comm.Dup()
buffers(dup)
grp = comm.Get_group().Excl([0]) if size > 1 else comm.Get_group()
sub = comm.Create(grp)
if sub != MPI.COMM_NULL:
    buffers(sub)
    sub.Free()
grp.Free()
dup.Free()
half.Free()

# Every function used: served each call, none passed to MPI (where the
# shim is loaded).
if os.environ.get('PMPI_TEST_EXPECT_SHIM') == '1':
    lib = ctypes.CDLL(None)
    fn = lib.coll_mpi_counts
    fn.argtypes = [ctypes.c_char_p, ctypes.POINTER(ctypes.c_ulonglong),
                   ctypes.POINTER(ctypes.c_ulonglong)]
    for name in ('Allreduce', 'Reduce', 'Bcast', 'Allgather', 'Scan', 'Exscan',
                 'Reduce_scatter_block', 'Reduce_scatter', 'Allgatherv', 'Gatherv', 'Scatterv',
                 'Gather', 'Scatter', 'Alltoall', 'Alltoallv', 'Barrier', 'Iallreduce', 'Ibcast',
                 'Iallgather', 'Ibarrier'):
        served, passed = ctypes.c_ulonglong(0), ctypes.c_ulonglong(0)
        rc = fn(('MPI_' + name).encode(), ctypes.byref(served), ctypes.byref(passed))
        check(rc == 0 and served.value > 0 and passed.value == 0,
              f"MPI_{name}: {served.value} served, {passed.value} passed to MPI")
    print(f"mpi4py_test: np {size}, shim loaded", flush=True) if rank == 0 else None

total = comm.allreduce(errors)
if rank == 0:
    if total == 0:
        print(f"mpi4py_test: all checks passed at np {size}", flush=True)
    else:
        print(f"mpi4py_test: {total} checks failed", flush=True)
sys.exit(1 if total else 0)
