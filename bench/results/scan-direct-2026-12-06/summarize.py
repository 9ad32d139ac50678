import collections, statistics, sys
d = collections.defaultdict(list)
for f in sys.argv[1:]:
  for line in open(f):
    rep, np, algo, c, size, lat = line.split()
    d[(c, int(np), int(size), algo)].append(float(lat))
def s(v):
    fast=[x for x in v if x<2.0]; slow=[x for x in v if x>=2.0]
    fm = statistics.median(fast) if fast else float('nan')
    sm = statistics.median(slow) if slow else float('nan')
    return f"{statistics.median(v):6.2f} fast {len(fast):2}/{len(v):2} {fm:5.2f} slow {sm:6.2f}"
for c in ("scan","exscan"):
  for np in (3,4):
    for size in sorted({k[2] for k in d}):
      print(f"{c:6} {np} {size:5} chain {s(d[(c,np,size,'linear')])} | direct {s(d[(c,np,size,'direct')])}")
