#!/bin/sh
# Builds tests/mp/c_random.c the way a user builds a C program against
# libcoll (cc prog.c $(pkg-config --cflags --libs libcoll)), with meson's
# uninstalled pkg-config file, checks that <coll/coll.h> alone compiles as
# strict C99, then runs the program under collrun -np 5.
#
# usage: c_program_test.sh BUILD_ROOT COLLRUN SOURCE CC [SANITIZE]
#   CC is the compiler command (words allowed, e.g. "ccache cc").
#   SANITIZE is meson's b_sanitize ("none", "address,undefined", ...): a
#   sanitized libcoll needs the program built with the same runtime.
set -eu

build_root=$1
collrun=$2
source=$3
cc=$4
sanitize=${5:-none}

export PKG_CONFIG_PATH="$build_root/meson-uninstalled"
if ! pkg-config --exists libcoll; then
  echo "FAIL: pkg-config finds no libcoll in $PKG_CONFIG_PATH" >&2
  ls "$PKG_CONFIG_PATH" >&2 || true
  exit 1
fi
cflags=$(pkg-config --cflags libcoll)
libs=$(pkg-config --libs libcoll)
echo "pkg-config --cflags: $cflags"
echo "pkg-config --libs:   $libs"

extra=""
if [ "$sanitize" != "none" ] && [ -n "$sanitize" ]; then
  extra="-fsanitize=$sanitize"
  # clang links a C program with the C half of UBSan's runtime; libcoll's
  # C++ checks (vptr) need the rest.
  case "$sanitize" in
    *undefined*) if $cc --version | grep -q clang; then extra="$extra -fsanitize-link-c++-runtime -lstdc++"; fi ;;
  esac
fi

work=$(mktemp -d "${TMPDIR:-/tmp}/coll-c-program-XXXXXX")
trap 'rm -rf "$work"' EXIT INT TERM

# The public header alone, as strict C99 (and through the pkg-config flags
# only: no path into the source tree).
printf '#include <coll/coll.h>\nint header_only(void) { return (int)coll_datatype_size(COLL_INT8); }\n' \
  > "$work/header_c99.c"
# Word splitting is wanted: pkg-config output and the compiler command
# (e.g. "ccache gcc") are lists of words.
# shellcheck disable=SC2086
$cc -std=c99 -pedantic -Wall -Wextra -Werror $cflags -c "$work/header_c99.c" -o "$work/header_c99.o"
echo "ok: <coll/coll.h> compiles with -std=c99 -pedantic -Werror"

# shellcheck disable=SC2086
$cc -std=c99 -pedantic -Wall -Wextra -Werror $extra "$source" $cflags $libs -o "$work/c_random"
echo "ok: built c_random with $cc"

# Where the uninstalled libcoll.so is: the -L directories pkg-config gave.
libdirs=""
for word in $libs; do
  case $word in
    -L*) libdirs="$libdirs${libdirs:+:}${word#-L}" ;;
  esac
done
LD_LIBRARY_PATH="$libdirs${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
export LD_LIBRARY_PATH

set +e
"$collrun" -np 5 --timeout 120 -x "LD_LIBRARY_PATH=$LD_LIBRARY_PATH" "$work/c_random" \
  > "$work/output" 2>&1
status=$?
set -e
cat "$work/output"
if [ "$status" -ne 0 ]; then
  echo "FAIL: collrun -np 5 c_random exited with $status" >&2
  exit 1
fi
if ! grep -q "^c_random rank 0 of 5: .* 0 errors" "$work/output"; then
  echo "FAIL: no clean summary from rank 0" >&2
  exit 1
fi
echo "ok: c_random passed on 5 ranks"
