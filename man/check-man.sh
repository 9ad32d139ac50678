#!/bin/sh
# Checks libcoll's man pages: check-man.sh COLL_H PAGE...
#   - each page renders with groff -ww -man without a warning, and with
#     man --warnings as lintian runs it; with mandoc -T lint too where
#     mandoc is installed;
#   - each page that is a ".so man3/X.3" link names a page given;
#   - each function that COLL_H declares has a page (itself or a link).
set -eu

header=$1
shift
failed=0
fail() {
  echo "FAIL: $*" >&2
  failed=1
}

names=""
for page in "$@"; do
  names="$names $(basename "$page")"
done

work=$(mktemp -d "${TMPDIR:-/tmp}/coll-man-XXXXXX")
trap 'rm -rf "$work"' EXIT INT TERM

checked=0
for page in "$@"; do
  name=$(basename "$page")
  if head -n 1 "$page" | grep -q '^\.so '; then
    target=$(head -n 1 "$page" | sed 's/^\.so man[0-9]\///')
    [ "$(wc -l < "$page")" -eq 1 ] || fail "$name: a .so link holds one line"
    case " $names " in
      *" $target "*) ;;
      *) fail "$name: links to $target, which is not among the pages" ;;
    esac
    continue
  fi
  if grep -n '@[A-Z_]*@' "$page" > "$work/left"; then
    fail "$name: placeholder left: $(cat "$work/left")"
  fi
  LC_ALL=C.UTF-8 groff -ww -z -man -Tutf8 "$page" > "$work/out" 2>&1 || fail "$name: groff failed"
  if [ -s "$work/out" ]; then
    fail "$name: groff warns:"
    cat "$work/out" >&2
  fi
  # lintian's check (groff-message): man's own pipeline, at 80 columns.
  if command -v man > /dev/null 2>&1; then
    LC_ALL=C.UTF-8 MANROFFSEQ='' MANWIDTH=80 man --warnings -E UTF-8 -l -Tutf8 -Z "$page" \
      > /dev/null 2> "$work/out" || fail "$name: man -l failed"
    if [ -s "$work/out" ]; then
      fail "$name: man --warnings warns:"
      cat "$work/out" >&2
    fi
  fi
  if command -v mandoc > /dev/null 2>&1; then
    if ! mandoc -T lint -W warning "$page" > "$work/out" 2>&1 || [ -s "$work/out" ]; then
      fail "$name: mandoc -T lint warns:"
      cat "$work/out" >&2
    fi
  fi
  checked=$((checked + 1))
done

# The functions coll.h declares: an identifier coll_* followed by "(",
# comments taken out first.
functions=$(sed -e 's://.*$::' "$header" | tr '\n' ' ' | sed -e 's:/\*[^*]*\*\+\([^/*][^*]*\*\+\)*/: :g' |
  grep -o '\bcoll_[a-z0-9_]*[[:space:]]*(' | sed 's/[[:space:]]*($//' | sort -u)
[ -n "$functions" ] || fail "found no function in $header"
for function in $functions; do
  case " $names " in
    *" $function.3 "*) ;;
    *) fail "$function (declared in $header) has no man page: add man/$function.3.in to man/meson.build" ;;
  esac
done

[ $failed = 0 ] || exit 1
echo "man pages: $checked rendered without warnings, $(echo "$functions" | wc -w) functions of $(basename "$header") all have a page"
