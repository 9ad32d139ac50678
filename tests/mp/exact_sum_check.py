#!/usr/bin/env python3
"""COLL_REPRODUCIBLE=exact across numbers of ranks (issue 36).

    exact_sum_check.py COLLRUN PROGRAM COUNT NP...

Runs exact_sum_test.c at every NP with COLL_REPRODUCIBLE=exact (and at the
largest NP with the allreduce algorithms forced in turn, small slots, tcp,
and the level set through coll_comm_set_reproducible), then checks every
element of every run against a serial reference of the definition
(libcoll/exact_sum.hpp) computed here in exact rational arithmetic, checks
that reference against math.fsum (the correctly rounded sum) for the
doubles whose contributions are all within 2^42 of the largest, and that
runs at different NP gave the same bits for every element they share. As
a control, COLL_REPRODUCIBLE=order at the two largest NP must differ
somewhere on those shared elements (the data tells the number of ranks
apart when the sum is not exact)."""
import math
import os
import struct
import subprocess
import sys
import tempfile
from fractions import Fraction

# name: (fraction bits, exponent bits, grid bits P)
FORMATS = {"double": (52, 11, 94), "float": (23, 8, 40), "float16": (10, 5, 40),
           "bfloat16": (7, 8, 40)}


def decode(fmt, bits):
    """(kind, value): kind 'nan', 'inf', 'zero' or 'num'; value a Fraction or sign."""
    f, eb, _ = FORMATS[fmt]
    sign = -1 if bits >> (f + eb) & 1 else 1
    biased = bits >> f & ((1 << eb) - 1)
    frac = bits & ((1 << f) - 1)
    bias = (1 << (eb - 1)) - 1
    if biased == (1 << eb) - 1:
        return ("nan", None) if frac else ("inf", sign)
    if biased == 0 and frac == 0:
        return ("zero", sign)
    m = frac | (1 << f if biased else 0)
    e = (biased if biased else 1) - bias - f
    return ("num", sign * Fraction(m) * Fraction(2) ** e)


def key(fmt, bits):
    f, eb, _ = FORMATS[fmt]
    kind, v = decode(fmt, bits)
    if kind in ("nan", "inf"):
        return 0xFFFF
    if kind == "zero":
        return 0 if v < 0 else 1
    biased = bits >> f & ((1 << eb) - 1)
    return 2 + (biased - 1 if biased else 0)


def encode(fmt, value):
    """value (a Fraction) rounded to nearest even into fmt's bits."""
    f, eb, _ = FORMATS[fmt]
    bias = (1 << (eb - 1)) - 1
    sign = 1 << (f + eb) if value < 0 else 0
    a = abs(value)
    if a == 0:
        return 0
    lead = a.numerator.bit_length() - a.denominator.bit_length()
    if Fraction(2) ** lead > a:
        lead -= 1
    inf = ((1 << eb) - 1) << f
    if lead > bias:
        return sign | inf
    lsb = max(lead, 1 - bias) - f
    q = round(a / Fraction(2) ** lsb)  # Fraction's round: nearest, ties to even
    if q >> (f + 1):
        q >>= 1
        lsb += 1
    if q >> f:
        biased = lsb + f + bias
        if biased >= (1 << eb) - 1:
            return sign | inf
        return sign | biased << f | (q & ((1 << f) - 1))
    return sign | q


def reference(fmt, contributions):
    f, eb, p = FORMATS[fmt]
    bias = (1 << (eb - 1)) - 1
    E = max(key(fmt, b) for b in contributions)
    inf = ((1 << eb) - 1) << f
    if E == 0:
        return 1 << (f + eb)  # every contribution -0
    if E == 1:
        return 0
    if E == 0xFFFF:
        kinds = [decode(fmt, b) for b in contributions]
        plus = any(k == "inf" and v > 0 for k, v in kinds)
        minus = any(k == "inf" and v < 0 for k, v in kinds)
        if any(k == "nan" for k, _ in kinds) or (plus and minus):
            return inf | 1 << (f - 1)
        return inf if plus else inf | 1 << (f + eb)
    grid = Fraction(2) ** (E - 1 - bias - p)
    s = 0
    for b in contributions:
        kind, v = decode(fmt, b)
        if kind == "num":
            s += round(v / grid)
    return encode(fmt, s * grid)


def run(collrun, prog, count, np, env, extra=()):
    with tempfile.NamedTemporaryFile(prefix="exact_sum_", delete=False) as out:
        path = out.name
    try:
        cmd = [collrun, "--timeout", "120", "-np", str(np)]
        for k, v in env.items():
            cmd += ["-x", f"{k}={v}"]
        subprocess.run(cmd + [prog, str(count), path, *extra], check=True)
        results = {}
        with open(path) as fh:
            for line in fh:
                fmt, i, res, *contrib = line.split()
                results[(fmt, int(i))] = (int(res, 16), [int(c, 16) for c in contrib])
        return results
    finally:
        os.unlink(path)


def main():
    collrun, prog, count, nps = sys.argv[1], sys.argv[2], int(sys.argv[3]), [int(a) for a in sys.argv[4:]]
    exact = {"COLL_REPRODUCIBLE": "exact"}
    runs = {f"np {n}": (n, run(collrun, prog, count, n, exact)) for n in nps}
    top = max(nps)
    for algo in ("ring", "recursive_doubling", "rabenseifner", "tree"):
        runs[f"np {top} COLL_ALLREDUCE_ALGO={algo}"] = (
            top, run(collrun, prog, count, top, dict(exact, COLL_ALLREDUCE_ALGO=algo)))
    runs[f"np {top} COLL_SLOT_SIZE=4096"] = (top, run(collrun, prog, count, top,
                                                     dict(exact, COLL_SLOT_SIZE="4096")))
    runs[f"np {top} COLL_TRANSPORT=tcp"] = (top, run(collrun, prog, count, top,
                                                    dict(exact, COLL_TRANSPORT="tcp")))
    runs[f"np {top} coll_comm_set_reproducible"] = (top, run(collrun, prog, count, top, {},
                                                            ["api"]))
    checked = fsum_checked = 0
    refs = {}
    for name, (n, results) in runs.items():
        for (fmt, i), (got, contrib) in results.items():
            rk = (fmt, i, tuple(contrib))
            if rk not in refs:
                refs[rk] = reference(fmt, contrib)
            want = refs[rk]
            if got != want:
                sys.exit(f"{name}: {fmt} element {i}: got {got:x}, the definition gives {want:x} "
                         f"(contributions {' '.join(f'{c:x}' for c in contrib)})")
            checked += 1
    # The reference against the correctly rounded sum, where the
    # definition promises it (doubles within 2^42 of the largest).
    for (fmt, i, contrib), want in refs.items():
        if fmt != "double":
            continue
        kinds = [decode(fmt, b) for b in contrib]
        if any(k in ("nan", "inf") for k, _ in kinds):
            continue
        nums = [v for k, v in kinds if k == "num"]
        if not nums:
            continue
        big = max(abs(v) for v in nums)
        if any(abs(v) < big / 2**42 for v in nums):
            continue
        try:
            fs = math.fsum(float(v) for v in nums)
        except OverflowError:
            continue  # the sum overflows (the definition's infinity is checked above)
        got = struct.unpack("<d", struct.pack("<Q", want))[0]
        if got != fs and not (got == 0 and fs == 0):
            sys.exit(f"double element {i}: the reference {got!r} is not math.fsum's {fs!r}")
        fsum_checked += 1
    # Every element two runs share (the same contributions) has the same bits.
    # (Implied by the above; counted to say how much the NP comparison covers.)
    by_element = {}
    for name, (n, results) in runs.items():
        for (fmt, i), (got, contrib) in results.items():
            seen = by_element.setdefault((fmt, i, tuple(contrib)), ({}, set()))
            seen[0][n] = got
            seen[1].add(got)
    if any(len(bits) != 1 for _, bits in by_element.values()):
        sys.exit("an element has other bits in another run")
    across = sum(1 for nps_seen, _ in by_element.values() if len(nps_seen) > 1)
    # The control: the rank-order mode differs between the two largest NP.
    a, b = sorted(nps)[-2:]
    order_a = run(collrun, prog, count, a, {"COLL_REPRODUCIBLE": "order"})
    order_b = run(collrun, prog, count, b, {"COLL_REPRODUCIBLE": "order"})
    differ = sum(1 for k, (got, contrib) in order_a.items()
                 if order_b[k][1] == contrib and order_b[k][0] != got)
    if differ == 0:
        sys.exit(f"COLL_REPRODUCIBLE=order gave the same bits at np {a} and {b}: "
                 "the data does not tell the number of ranks apart")
    print(f"exact_sum_check: {len(runs)} runs (np {', '.join(map(str, nps))} and {len(runs) - len(nps)} "
          f"configurations at np {top}), {checked} results equal to the definition "
          f"({len(refs)} distinct sums, {across} of them at more than one np; "
          f"{fsum_checked} doubles equal to math.fsum); "
          f"order mode differs at np {a} vs {b} in {differ} elements")


if __name__ == "__main__":
    main()
