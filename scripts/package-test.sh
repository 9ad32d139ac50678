#!/usr/bin/env bash
# Checks libcoll the way a user gets it, installed:
#   1. meson install --destdir of BUILD_DIR (default build): the files, the
#      SONAME and the exported symbols (coll_* only), then a C program built
#      with pkg-config (PKG_CONFIG_PATH and PKG_CONFIG_SYSROOT_DIR into the
#      destdir) and a CMake project (find_package(libcoll 0.3 REQUIRED),
#      libcoll::libcoll; the CMake package finds its prefix from where it
#      lies), each run under the destdir's collrun -np 3; man pages.
#   2. The Debian packages: dpkg-buildpackage -us -uc -b in a copy of the
#      tree, lintian (no errors), dpkg -i of libcoll0, libcoll-dev, collrun
#      and python3-torch-libcoll, the same two programs built against the
#      system's libcoll and run under /usr/bin/collrun -np 3, `man
#      coll_allreduce`, `man collrun`, and torch_libcoll imported from the
#      package (not the build tree) for an all_reduce under /usr/bin/collrun
#      -np 2; then the packages are purged again, so that nothing installed
#      is left to shadow a later build (also on failure). Where torch's
#      build dependencies are missing (python3-torch, libtorch-dev,
#      pybind11-dev, dh-python: scripts/install-deps.sh), the build profile
#      pkg.libcoll.notorch leaves python3-torch-libcoll out, saying so.
# scripts/test.sh calls it after the plain suite. Needs root for part 2.
#
#   scripts/package-test.sh [BUILD_DIR]
#   COLL_PACKAGE_TEST_SKIP_DEB=1   part 1 only (no root needed)
#   COLL_PACKAGE_TEST_KEEP=1       keep the work folder (printed) and leave
#                                  the packages installed
set -euo pipefail
cd "$(dirname "$0")/.."
build=${1:-build}
ranks=3
packages=(libcoll0 libcoll-dev collrun python3-torch-libcoll)

say() { echo "package-test: $*"; }
die() {
  echo "package-test: FAIL: $*" >&2
  exit 1
}

work=$(mktemp -d "${TMPDIR:-/tmp}/coll-package-test-XXXXXX")
installed_packages=0
cleanup() {
  local status=$?
  if [ $installed_packages = 1 ] && [ "${COLL_PACKAGE_TEST_KEEP:-0}" != 1 ]; then
    say "purging ${packages[*]}"
    dpkg --purge "${packages[@]}" > "$work/purge.log" 2>&1 || cat "$work/purge.log" >&2
  fi
  if [ "${COLL_PACKAGE_TEST_KEEP:-0}" = 1 ]; then
    say "kept $work"
  else
    rm -rf "$work"
  fi
  exit $status
}
trap cleanup EXIT

# The version, from meson (project() in meson.build: the one place).
version=$(sed -n "s/^  version : '\([0-9.]*\)',$/\1/p" meson.build | head -n 1)
[ -n "$version" ] || die "no version found in meson.build"
major_minor=${version%.*}
soversion=${version%%.*}

# run_smoke WHAT COLLRUN PROGRAM [env...]: the program under collrun -np 3
# prints one line from rank 0, naming the version and the rank count.
run_smoke() {
  local what=$1 collrun=$2 program=$3 out
  shift 3
  out=$(env "$@" timeout 120 "$collrun" -np $ranks "$program" $ranks 2>&1) ||
    die "$what: collrun -np $ranks $program failed: $out"
  echo "$out" | grep -q "allreduce and bcast correct on $ranks ranks (bootstrap collrun" ||
    die "$what: unexpected output: $out"
  say "$what: $out"
  # coll.h takes COLL_VERSION_MAJOR/MINOR from coll_version.h (generated
  # from project()) once it includes it; until then it has its own.
  if grep -q 'coll_version\.h' "$header"; then
    echo "$out" | grep -q "^libcoll $major_minor:" ||
      die "$what: the program says $(echo "$out" | cut -d: -f1), meson.build $major_minor"
  fi
}

# build_smoke WHAT OUTPUT CFLAGS LIBS: the C program, strict C99, -Werror.
build_smoke() {
  local what=$1 output=$2 cflags=$3 libs=$4
  # shellcheck disable=SC2086  # the flags are words
  cc -std=c99 -pedantic -Wall -Wextra -Werror $cflags -o "$output" tests/install/smoke.c $libs ||
    die "$what: the C program does not build with: $cflags $libs"
}

# build_cmake WHAT DIR [cmake args...]: the CMake project; prints where
# CMake found the package.
build_cmake() {
  local what=$1 dir=$2
  shift 2
  cmake -S tests/install/cmake -B "$dir" -DCMAKE_BUILD_TYPE=Release "$@" > "$dir.log" 2>&1 ||
    die "$what: cmake configure failed: $(cat "$dir.log")"
  cmake --build "$dir" > "$dir.build.log" 2>&1 ||
    die "$what: cmake build failed: $(cat "$dir.build.log")"
  sed -n 's/^-- \(libcoll .* from .*\)$/\1/p' "$dir.log"
}

# check_library FILE: SONAME libcoll.so.<major>, only coll_* exported.
check_library() {
  local lib=$1 soname others
  soname=$(readelf -d "$lib" | sed -n 's/.*(SONAME).*\[\(.*\)\]/\1/p')
  [ "$soname" = "libcoll.so.$soversion" ] || die "$lib: SONAME '$soname', expected libcoll.so.$soversion"
  others=$(nm -D --defined-only "$lib" | awk '{ print $3 }' | grep -v '^coll_' || true)
  [ -z "$others" ] || die "$lib exports symbols other than coll_*: $others"
  say "$(basename "$lib"): SONAME $soname, exports $(nm -D --defined-only "$lib" | wc -l) symbols, all coll_*"
}

# check_man [MANPATH]: the pages are there and render (a link too); with
# no MANPATH, as a user's plain `man coll_allreduce` finds them.
check_man() {
  local where=${1:-} page
  local -a man_env=(-u MANPATH)
  [ -z "$where" ] || man_env=(MANPATH="$where")
  for page in coll_allreduce coll_iallreduce coll_init collrun; do
    env "${man_env[@]}" MANWIDTH=80 man "$page" 2> "$work/man.err" < /dev/null | grep -q "^NAME" ||
      die "man $page ${where:+(MANPATH=$where)}: $(cat "$work/man.err")"
  done
  env "${man_env[@]}" MANWIDTH=80 man coll_iallreduce 2> /dev/null | grep -q "coll_iallreduce(const void" ||
    die "man coll_iallreduce does not show the coll_allreduce page"
  say "man coll_allreduce, coll_iallreduce (link), coll_init, collrun: $(env "${man_env[@]}" man -w coll_allreduce collrun | tr '\n' ' ')"
}

# ---------------------------------------------------------------- destdir
say "== meson install --destdir ($build)"
./scripts/build.sh "$build"
dest=$work/dest
meson install -C "$build" --destdir "$dest" > "$work/install.log" 2>&1 ||
  die "meson install failed: $(tail -n 20 "$work/install.log")"
prefix=$(meson introspect "$build" --buildoptions | python3 -c \
  'import json, sys; print({o["name"]: o["value"] for o in json.load(sys.stdin)}["prefix"])')
libdir=$(meson introspect "$build" --buildoptions | python3 -c \
  'import json, sys; print({o["name"]: o["value"] for o in json.load(sys.stdin)}["libdir"])')
case $libdir in /*) ;; *) libdir=$prefix/$libdir ;; esac
top=$dest$prefix
header=$top/include/coll/coll.h
for file in include/coll/coll.h include/coll/coll.hpp include/coll/coll_version.h bin/collrun \
  share/man/man3/coll_allreduce.3 share/man/man3/coll_iallreduce.3 share/man/man1/collrun.1; do
  [ -e "$top/$file" ] || die "meson install put no $prefix/$file"
done
for file in "libcoll.so.$version" "libcoll.so.$soversion" libcoll.so pkgconfig/libcoll.pc \
  cmake/libcoll/libcollConfig.cmake cmake/libcoll/libcollConfigVersion.cmake; do
  [ -e "$dest$libdir/$file" ] || die "meson install put no $libdir/$file"
done
grep -q "#define COLL_VERSION_MINOR ${major_minor#*.}$" "$top/include/coll/coll_version.h" ||
  die "coll_version.h does not say version $major_minor"
check_library "$dest$libdir/libcoll.so.$version"

pc_env=(PKG_CONFIG_PATH="$dest$libdir/pkgconfig" PKG_CONFIG_SYSROOT_DIR="$dest")
[ "$(env "${pc_env[@]}" pkg-config --modversion libcoll)" = "$version" ] ||
  die "pkg-config --modversion libcoll is not $version"
cflags=$(env "${pc_env[@]}" pkg-config --cflags libcoll)
libs=$(env "${pc_env[@]}" pkg-config --libs libcoll)
build_smoke "destdir, pkg-config" "$work/smoke-pc" "$cflags" "$libs"
run_smoke "destdir, pkg-config" "$top/bin/collrun" "$work/smoke-pc" LD_LIBRARY_PATH="$dest$libdir"

found=$(build_cmake "destdir, CMake" "$work/cmake-destdir" -DCMAKE_PREFIX_PATH="$top")
case $found in
  *" from $dest$libdir/cmake/libcoll") say "destdir, CMake: $found" ;;
  *) die "destdir, CMake: found '$found', not the one in $dest$libdir/cmake/libcoll" ;;
esac
# CMake's build RPATH names the library's folder: no LD_LIBRARY_PATH.
run_smoke "destdir, CMake" "$top/bin/collrun" "$work/cmake-destdir/smoke_cmake"
check_man "$top/share/man"

# ---------------------------------------------------------------- .deb
if [ "${COLL_PACKAGE_TEST_SKIP_DEB:-0}" = 1 ]; then
  say "== Debian packages skipped (COLL_PACKAGE_TEST_SKIP_DEB=1)"
  say "passed"
  exit 0
fi
say "== Debian packages"
[ "$(id -u)" = 0 ] || die "installing the packages needs root (COLL_PACKAGE_TEST_SKIP_DEB=1 skips them)"
changelog_version=$(dpkg-parsechangelog -l debian/changelog -S Version)
[ "${changelog_version%%-*}" = "$version" ] ||
  die "debian/changelog is at $changelog_version, meson.build at $version: add a changelog entry (dch -v $version)"

# Packages left by an earlier run that was killed: ours, so purge them.
for package in "${packages[@]}"; do
  if dpkg-query -W -f='${db:Status-Status}' "$package" 2> /dev/null | grep -qx installed; then
    say "purging $package, left installed by an earlier run"
    dpkg --purge "$package" > /dev/null
  fi
done

# The torch backend's package where its build dependencies are here (they
# are in CI); else the profile that leaves it out (dpkg-buildpackage checks
# the build dependencies with the same profiles).
profiles=
if ! missing=$(dpkg-checkbuilddeps 2>&1); then
  dpkg-checkbuilddeps -P pkg.libcoll.notorch > /dev/null 2>&1 ||
    die "build dependencies missing (scripts/install-deps.sh): $missing"
  profiles=pkg.libcoll.notorch
  say "building without python3-torch-libcoll (profile $profiles): $missing"
  packages=(libcoll0 libcoll-dev collrun)
fi

# dpkg-buildpackage writes beside the source tree: build in a copy (the
# files git knows, tracked or not ignored), so nothing lands outside $work.
src=$work/src/libcoll-$version
mkdir -p "$src"
git ls-files -z --cached --others --exclude-standard | while IFS= read -r -d '' file; do
  [ -e "$file" ] && printf '%s\0' "$file"
done | tar --null -T - -cf - | tar -xf - -C "$src"
start=$SECONDS
(cd "$src" && DEB_BUILD_OPTIONS="parallel=2 nocheck noautodbgsym" \
  dpkg-buildpackage -us -uc -b ${profiles:+-P"$profiles"} > "$work/dpkg-buildpackage.log" 2>&1) ||
  die "dpkg-buildpackage failed: $(tail -n 40 "$work/dpkg-buildpackage.log")"
say "dpkg-buildpackage -us -uc -b: $((SECONDS - start)) s"
changes=$(ls "$work"/src/libcoll_"$changelog_version"_*.changes)
debs=()
for package in "${packages[@]}"; do
  deb=$(ls "$work/src/${package}_${changelog_version}"_*.deb 2> /dev/null || true)
  [ -n "$deb" ] || die "dpkg-buildpackage made no $package package"
  debs+=("$deb")
done
say "built: $(cd "$work/src" && echo ./*.deb)"

start=$SECONDS
lintian --fail-on error --tag-display-limit 0 "$changes" > "$work/lintian.log" 2>&1 || {
  cat "$work/lintian.log" >&2
  die "lintian reports errors"
}
say "lintian: no errors ($((SECONDS - start)) s); $(grep -c '^[WI]:' "$work/lintian.log" || true) warnings and notes"
grep '^[EWI]:' "$work/lintian.log" | sed 's/^/  /' || true

installed_packages=1
if ! dpkg -i "${debs[@]}" > "$work/dpkg.log" 2>&1; then
  say "dpkg -i needs dependencies: apt-get install -f"
  DEBIAN_FRONTEND=noninteractive apt-get install -f -y -qq > "$work/apt.log" 2>&1 ||
    die "installing the packages failed: $(cat "$work/dpkg.log" "$work/apt.log")"
fi
for package in "${packages[@]}"; do
  dpkg-query -W -f='${db:Status-Status}' "$package" | grep -qx installed || die "$package is not installed"
done
say "installed: $(dpkg-query -W -f='${Package} ${Version}, ' "${packages[@]}")"

header=/usr/include/coll/coll.h
check_library "$(dpkg -L libcoll0 | grep "/libcoll.so.$version$")"
# The system's libcoll, not one that PKG_CONFIG_PATH or /usr/local has.
unset PKG_CONFIG_PATH PKG_CONFIG_SYSROOT_DIR CMAKE_PREFIX_PATH
[ "$(pkg-config --variable=prefix libcoll)" = /usr ] ||
  die "pkg-config finds a libcoll in $(pkg-config --variable=prefix libcoll), not the package's in /usr"
build_smoke ".deb, pkg-config" "$work/smoke-deb-pc" "$(pkg-config --cflags libcoll)" "$(pkg-config --libs libcoll)"
run_smoke ".deb, pkg-config" /usr/bin/collrun "$work/smoke-deb-pc"
found=$(build_cmake ".deb, CMake" "$work/cmake-deb")
case $found in
  *" from /usr/lib/"*"/cmake/libcoll") say ".deb, CMake: $found" ;;
  *) die ".deb, CMake: found '$found', not the package's in /usr/lib" ;;
esac
run_smoke ".deb, CMake" /usr/bin/collrun "$work/cmake-deb/smoke_cmake"
check_man

# torch_libcoll from the package: Debian's python3 finds it in
# /usr/lib/python3/dist-packages (no PYTHONPATH, run from $work so that
# no build tree is on the path), and it runs an all_reduce.
if [ -z "$profiles" ]; then
  cat > "$work/torch_smoke.py" << 'EOF'
import os
import torch
import torch.distributed as dist
import torch_libcoll
dist.init_process_group("libcoll")
rank, size = dist.get_rank(), dist.get_world_size()
t = torch.full((4,), float(rank + 1))
dist.all_reduce(t)
assert t.tolist() == [size * (size + 1) / 2] * 4, f"rank {rank}: all_reduce gave {t}"
if rank == 0:
    print(f"torch_libcoll from {os.path.dirname(torch_libcoll.__file__)}: all_reduce correct "
          f"on {size} ranks (torch {torch.__version__})", flush=True)
dist.destroy_process_group()
EOF
  out=$(cd "$work" && env -u PYTHONPATH OMP_NUM_THREADS=1 timeout 120 \
    /usr/bin/collrun -np 2 /usr/bin/python3 "$work/torch_smoke.py" 2>&1) ||
    die ".deb, torch: collrun -np 2 python3 torch_smoke.py failed: $out"
  echo "$out" | grep -q "^torch_libcoll from /usr/lib/python3/dist-packages/torch_libcoll: all_reduce correct on 2 ranks" ||
    die ".deb, torch: unexpected output (not the package's torch_libcoll?): $out"
  say ".deb, torch: $out"
fi
say "passed"
