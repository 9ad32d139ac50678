# Sorting and the median of a few samples, for bench/summarize.awk and
# algorithms/tune.awk: load it first (awk -f bench/median.awk -f ...).
# POSIX awk (mawk or gawk).

# Sorts values[1..n] in ascending numeric order, the elements keeping their
# text. Insertion sort: n is a number of runs or of message sizes.
function sort_numbers(values, n,    i, j, x) {
  for (i = 2; i <= n; i++) {
    x = values[i]
    for (j = i - 1; j >= 1 && values[j] + 0 > x + 0; j--) values[j + 1] = values[j]
    values[j + 1] = x
  }
}

# The median of values[1..n] (which it sorts).
function median(values, n) {
  sort_numbers(values, n)
  return n % 2 ? values[(n + 1) / 2] : (values[n / 2] + values[n / 2 + 1]) / 2
}
