#!/bin/bash
# run-in-rxe-vm.sh - run a command inside a throw-away qemu VM that has real
# RDMA verbs: Debian's stock kernel, Soft-RoCE (rdma_rxe) on a veth pair that
# exists only in the guest. The command runs chrooted into the host's own
# root file system (mounted read-only over virtio-9p), so host binaries, their
# libraries and the libibverbs providers work as they are.
#
# Adapted from shared/rxe-vm/run-in-rxe-vm.sh: host-root mode only, and the
# package check no longer aborts when a package is unknown to dpkg.
#
# Usage:
#   run-in-rxe-vm.sh [options] -- COMMAND...   run COMMAND (bash code if one word)
#   run-in-rxe-vm.sh [options] -f SCRIPT       run SCRIPT (copied in) with bash
#
# Options:
#   -o DIR      share host DIR read-write (created if missing) at the same path;
#               exported to the command as $RXE_OUT_DIR
#   -s DIR      share host DIR read-write at the same path (repeatable); the
#               first one is the command's working directory
#   -t SECS     timeout of the guest command (default 300); the VM as a whole
#               gets SECS + BOOT_MARGIN (default 120)
#   -m MB       guest memory (default 2048)      -c N   vCPUs (default 2)
#   -q          quiet: print only the command's output, after the VM exits
#   --rebuild   rebuild the cached initramfs
#
# Exit status: the command's; 124 on timeout; 125 when the VM could not be
# set up or booted.
#
# In the guest: rxe0 on veth0 (192.0.2.1) and rxe1 on veth1 (192.0.2.2),
# exported as RXE_DEV0 RXE_IP0 RXE_DEV1 RXE_IP1. Traffic between the two
# addresses crosses the veth wire (policy routing); the VM has no NIC, so
# nothing leaves it. /tmp and /run are fresh tmpfs.
#
# What it takes (learned making shared/rxe-vm work; keep these):
#  - KVM cannot run here: TCG emulation (boot ~8 s, CPU work 10-50x slower);
#  - rdma_rxe needs crc32_generic loaded first, or `rdma link add` fails;
#  - with both addresses local, traffic would take `lo` and rdma_cm fails
#    with ADDR_ERROR -110: each address is routed out of its own veth end;
#  - rxe on kernel 6.1 works only in the default network namespace;
#  - the first run downloads the kernel package and builds a cache under
#    ${RXE_LAB_DIR:-${XDG_CACHE_HOME:-~/.cache}/rxe-vm} (~30 s).
set -euo pipefail

LAB=${RXE_LAB_DIR:-${XDG_CACHE_HOME:-$HOME/.cache}/rxe-vm}
CACHE=$LAB/cache
BOOT_MARGIN=${BOOT_MARGIN:-120}
BASE_VERSION=1   # bump to invalidate the cached initramfs

SHARES=() ; OUTDIR= ; SCRIPT= ; TMO=300 ; MEM=2048 ; CPUS=2 ; QUIET=0 ; REBUILD=0
die() { echo "run-in-rxe-vm: $*" >&2; exit 125; }
while [ $# -gt 0 ]; do
  case "$1" in
    -o) mkdir -p "$2"; OUTDIR=$(realpath "$2"); shift 2;;
    -s) SHARES+=("$(realpath "$2")"); shift 2;;
    -f) SCRIPT=$(realpath "$2"); shift 2;;
    -t) TMO=$2; shift 2;;
    -m) MEM=$2; shift 2;;
    -c) CPUS=$2; shift 2;;
    -q) QUIET=1; shift;;
    --rebuild) REBUILD=1; shift;;
    --) shift; break;;
    -h|--help) sed -n '2,/^set -e/p' "$0" | sed 's/^# \{0,1\}//;$d'; exit 0;;
    *) break;;
  esac
done
[ -n "$SCRIPT" ] || [ $# -gt 0 ] || die "no command given (see -h)"
for d in "${SHARES[@]}"; do [ -d "$d" ] || die "not a directory: $d"; done
[ "$(id -u)" = 0 ] || die "must run as root (apt-get download, depmod, 9p export of /)"
mkdir -p "$CACHE"

# ---------------------------------------------------------------- host packages
# The project's scripts/install-deps.sh installs these; this is the fallback.
PKGS="qemu-system-x86 busybox-static ibverbs-providers ibverbs-utils rdmacm-utils iproute2 kmod cpio"
missing=
for p in $PKGS; do
  status=$(dpkg-query -W -f='${db:Status-Status}' "$p" 2>/dev/null || true)
  [ "$status" = installed ] || missing="$missing $p"
done
if [ -n "$missing" ]; then
  echo "run-in-rxe-vm: installing:$missing" >&2
  # shellcheck disable=SC2086  # one word per package
  (apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends $missing) >&2 \
    || die "apt-get install$missing failed"
fi

# ---------------------------------------------------------------- kernel (extracted, not installed)
exec 9>"$CACHE/.lock"; flock 9   # one cache builder at a time
KPKG_FILE=$CACHE/kpkg
if [ ! -s "$KPKG_FILE" ] || [ "$REBUILD" = 1 ]; then
  kp=$(apt-cache depends linux-image-amd64 2>/dev/null | awk '/Depends: linux-image-[0-9]/{print $2; exit}')
  if [ -z "$kp" ]; then apt-get update -qq >&2; kp=$(apt-cache depends linux-image-amd64 | awk '/Depends: linux-image-[0-9]/{print $2; exit}'); fi
  [ -n "$kp" ] || die "cannot resolve linux-image-amd64"
  echo "$kp" > "$KPKG_FILE"
fi
KPKG=$(cat "$KPKG_FILE"); KV=${KPKG#linux-image-}
KDIR=$CACHE/kernel-$KV
if [ ! -f "$KDIR/lib/modules/$KV/modules.dep" ]; then
  echo "run-in-rxe-vm: fetching $KPKG (apt-get download, extracted only)" >&2
  rm -rf "$KDIR" "$CACHE/deb" && mkdir -p "$CACHE/deb" "$KDIR"
  chown _apt "$CACHE/deb" 2>/dev/null || true
  (cd "$CACHE/deb" && apt-get download "$KPKG" >&2) || die "apt-get download $KPKG failed"
  dpkg-deb -x "$CACHE"/deb/"$KPKG"_*.deb "$KDIR"
  depmod -b "$KDIR" "$KV"
  rm -rf "$CACHE/deb"
fi
VMLINUZ=$KDIR/boot/vmlinuz-$KV

# ---------------------------------------------------------------- helpers
put() { local root=$1 f=$2; mkdir -p "$root$(dirname "$f")"; [ -e "$root$f" ] || cp -L "$f" "$root$f"; }
libs_of() { ldd "$1" 2>/dev/null | awk '/=> \//{print $3} /^\t\/[^ ]+ \(/{print $1}'; }
put_elf() { local root=$1 f=$2 l; put "$root" "$f"; for l in $(libs_of "$f"); do put "$root" "$l"; done; }
mkcpio() { (cd "$1" && find . -mindepth 1 | LC_ALL=C sort | cpio -o -H newc --quiet -R 0:0) > "$2"; }

# ---------------------------------------------------------------- base initramfs (cached)
# Only what the init script needs before it chroots into the host's root.
BASE=$CACHE/coll-base-$KV-v$BASE_VERSION.cpio
if [ ! -s "$BASE" ] || [ "$REBUILD" = 1 ]; then
  echo "run-in-rxe-vm: building the base initramfs" >&2
  rm -f "$CACHE"/coll-base-*.cpio
  R=$CACHE/coll-root.$$; rm -rf "$R"; mkdir -p "$R"
  mkdir -p "$R"/{usr/bin,usr/sbin,usr/lib,usr/lib64,etc,proc,sys,dev,tmp,run,root,host}
  ln -s usr/bin "$R/bin"; ln -s usr/sbin "$R/sbin"; ln -s usr/lib "$R/lib"; ln -s usr/lib64 "$R/lib64"
  cp /bin/busybox "$R/usr/bin/busybox"
  for a in $(/bin/busybox --list); do [ -e "$R/usr/bin/$a" ] || ln -s busybox "$R/usr/bin/$a"; done
  for b in /usr/bin/bash /usr/bin/timeout /usr/sbin/ip /usr/bin/rdma; do
    [ -e "$b" ] || die "missing $b on the host"
    rm -f "$R$b"; put_elf "$R" "$b"
  done
  # /init runs under /bin/sh: make that bash, not busybox's ash, which would
  # prefer its own applets (busybox ip has no veth or policy routing).
  ln -sf bash "$R/usr/bin/sh"
  : > "$R/etc/rxe-modules"
  for m in crc32_generic veth rdma_rxe rdma_ucm ib_uverbs 9p 9pnet_virtio virtio_pci; do
    modprobe -d "$KDIR" -S "$KV" --show-depends "$m" | awk '$1=="insmod"{print $2}'
  done | awk '!seen[$0]++' | while read -r ko; do
    rel=${ko#"$KDIR"}; mkdir -p "$R$(dirname "$rel")"; cp "$ko" "$R$rel"; echo "$rel" >> "$R/etc/rxe-modules"
  done
  # loadable on demand (kernel request_module -> busybox modprobe)
  for m in crc32-pclmul crc32c_generic crc32c-intel; do
    modprobe -d "$KDIR" -S "$KV" --show-depends "$m" 2>/dev/null | awk '$1=="insmod"{print $2}' | while read -r ko; do
      rel=${ko#"$KDIR"}; mkdir -p "$R$(dirname "$rel")"; cp -n "$ko" "$R$rel"; done
  done
  cp "$KDIR/lib/modules/$KV"/modules.{order,builtin,builtin.modinfo} "$R/lib/modules/$KV/"
  depmod -b "$R" "$KV"
  ln -sf ../bin/busybox "$R/usr/sbin/modprobe"
  cat > "$R/init" <<'EOF'
#!/bin/sh
export PATH=/usr/sbin:/usr/bin HOME=/root
mount -t proc proc /proc; mount -t sysfs sys /sys; mount -t devtmpfs dev /dev
mkdir -p /dev/pts /dev/shm; mount -t devpts devpts /dev/pts; mount -t tmpfs tmpfs /dev/shm
set -a; . /etc/rxe-vm.env; set +a
fail() { echo "RXE_VM_SETUP_FAILED: $*"; dmesg | tail -n 25; echo "RXE_VM_EXIT=125"; poweroff -f; sleep 10; }
while read -r ko; do insmod "$ko" 2>/dev/null || grep -q "^$(basename "$ko" .ko | tr - _) " /proc/modules || echo "insmod $ko failed"; done < /etc/rxe-modules
ip link set lo up; hostname rxevm
ip link add veth0 type veth peer name veth1 || fail "veth"
ip addr add 192.0.2.1/24 dev veth0; ip addr add 192.0.2.2/24 dev veth1
ip link set veth0 up; ip link set veth1 up
# Both addresses are local: without this, packets between them take lo and
# rdma_cm address resolution fails. Route each out of its own veth end.
for i in all default veth0 veth1; do sysctl -qw net.ipv4.conf.$i.rp_filter=0 net.ipv4.conf.$i.accept_local=1; done
ip rule add pref 1000 lookup local && ip rule del pref 0
ip route add 192.0.2.2/32 dev veth0 src 192.0.2.1 table 100; ip rule add pref 100 iif lo to 192.0.2.2 lookup 100
ip route add 192.0.2.1/32 dev veth1 src 192.0.2.2 table 101; ip rule add pref 101 iif lo to 192.0.2.1 lookup 101
rdma link add rxe0 type rxe netdev veth0 || fail "rdma link add rxe0"
rdma link add rxe1 type rxe netdev veth1 || fail "rdma link add rxe1"
export RXE_IP0=192.0.2.1 RXE_IP1=192.0.2.2 RXE_DEV0=rxe0 RXE_DEV1=rxe1
O9=trans=virtio,version=9p2000.L,msize=524288,access=any
mount -t 9p -o $O9,ro hostroot /host || fail "9p mount of the host root"
mount -t proc proc /host/proc; mount -t sysfs sys /host/sys; mount -o rbind /dev /host/dev
mount -t tmpfs tmpfs /host/tmp; mount -t tmpfs tmpfs /host/run
i=0; for d in $RXE_SHARES; do mkdir -p "/host$d" 2>/dev/null; mount -t 9p -o $O9 "share$i" "/host$d" || fail "9p mount of $d"; i=$((i+1)); done
if [ -n "$RXE_OUT_DIR" ]; then mkdir -p "/host$RXE_OUT_DIR" 2>/dev/null; mount -t 9p -o $O9 out "/host$RXE_OUT_DIR" || fail "9p mount of $RXE_OUT_DIR"; fi
export RXE_OUT_DIR
cp /rxe-cmd.sh /host/tmp/rxe-cmd.sh
read -r up _ < /proc/uptime; echo "RXE_VM_READY uptime=${up}s"
timeout -k 5 "$RXE_TIMEOUT" chroot /host /bin/bash -c 'cd "$RXE_CWD" 2>/dev/null || cd /; exec /bin/bash /tmp/rxe-cmd.sh' </dev/null; rc=$?
[ $rc = 124 ] && echo "RXE_VM: guest command timed out after ${RXE_TIMEOUT}s"
cd /; sync
echo "RXE_VM_EXIT=$rc"
poweroff -f
EOF
  chmod +x "$R/init"
  mkcpio "$R" "$BASE.tmp" && mv "$BASE.tmp" "$BASE"
  rm -rf "$R"
fi
exec 9>&-

# ---------------------------------------------------------------- per-run initramfs
RUN=$(mktemp -d "$LAB/run.XXXXXX")
QPID= ; TPID=
# shellcheck disable=SC2317  # called by the EXIT trap
cleanup() {
  if [ -n "$QPID" ] && kill -0 "$QPID" 2>/dev/null; then kill "$QPID" 2>/dev/null; sleep 1; kill -9 "$QPID" 2>/dev/null || true; fi
  if [ -n "$TPID" ]; then kill "$TPID" 2>/dev/null || true; fi
  if [ "${RXE_KEEP:-0}" = 1 ]; then echo "run-in-rxe-vm: kept $RUN" >&2; else rm -rf "$RUN"; fi
}
trap cleanup EXIT
trap 'exit 130' INT TERM
R2=$RUN/root; mkdir -p "$R2/etc"
if [ -n "$SCRIPT" ]; then cp "$SCRIPT" "$R2/rxe-cmd.sh"
elif [ $# = 1 ]; then printf '%s\n' "$1" > "$R2/rxe-cmd.sh"   # one word: bash code
else { printf 'set -e\n'; printf '%q ' "$@"; printf '\n'; } > "$R2/rxe-cmd.sh"
fi
{ printf 'RXE_TIMEOUT=%q\n' "$TMO"; printf 'RXE_SHARES=%q\n' "${SHARES[*]:-}"; printf 'RXE_OUT_DIR=%q\n' "$OUTDIR"
  printf 'RXE_CWD=%q\n' "${SHARES[0]:-${OUTDIR:-/root}}"; } > "$R2/etc/rxe-vm.env"
mkcpio "$R2" "$RUN/run.cpio"
cat "$BASE" "$RUN/run.cpio" > "$RUN/initrd.cpio"

# ---------------------------------------------------------------- boot
# shellcheck disable=SC2054  # the commas are qemu's
QARGS=(-nographic -no-reboot -nic none -m "$MEM" -smp "$CPUS" -kernel "$VMLINUZ" -initrd "$RUN/initrd.cpio"
       -append "console=ttyS0 quiet loglevel=3 panic=-1 rdinit=/init"
       -accel tcg,thread=multi -cpu max
       -virtfs "local,path=/,mount_tag=hostroot,security_model=none,readonly=on,multidevs=remap")
i=0; for d in "${SHARES[@]}"; do QARGS+=(-virtfs "local,path=$d,mount_tag=share$i,security_model=none"); i=$((i+1)); done
if [ -n "$OUTDIR" ]; then QARGS+=(-virtfs "local,path=$OUTDIR,mount_tag=out,security_model=none"); fi
LOG=$RUN/console.log; : > "$LOG"
T0=$(date +%s.%N)
qemu-system-x86_64 "${QARGS[@]}" </dev/null >"$LOG" 2>&1 &
QPID=$!
if [ "$QUIET" = 0 ]; then tail -n +1 -f --pid="$QPID" "$LOG" | sed -u 's/\r$//' >&2 & TPID=$!; fi
LIMIT=$((TMO + BOOT_MARGIN)); timed_out=0; ready=
while kill -0 "$QPID" 2>/dev/null; do
  now=$(date +%s.%N)
  if [ -z "$ready" ] && grep -q RXE_VM_READY "$LOG"; then ready=$(awk "BEGIN{printf \"%.1f\", $now-$T0}"); fi
  if awk "BEGIN{exit !($now-$T0 > $LIMIT)}"; then timed_out=1; kill "$QPID"; sleep 2; kill -9 "$QPID" 2>/dev/null || true; break; fi
  sleep 0.5
done
wait "$QPID" 2>/dev/null || true; QPID=
if [ -n "$TPID" ]; then sleep 0.3; kill "$TPID" 2>/dev/null || true; wait "$TPID" 2>/dev/null || true; TPID=; fi
T1=$(date +%s.%N)
rc=$(tr -d '\r' < "$LOG" | sed -n 's/.*RXE_VM_EXIT=\([0-9]*\)$/\1/p' | tail -n1)
echo "run-in-rxe-vm: guest-ready-after=${ready:-never}s total=$(awk "BEGIN{printf \"%.1f\", $T1-$T0}")s exit=${rc:-none}" >&2
if [ -z "$rc" ]; then
  [ "$QUIET" = 1 ] && tr -d '\r' < "$LOG" | tail -n 60 >&2
  [ "$timed_out" = 1 ] && { echo "run-in-rxe-vm: VM killed after ${LIMIT}s" >&2; exit 124; }
  echo "run-in-rxe-vm: VM exited without reporting a status" >&2; exit 125
fi
if [ "$QUIET" = 1 ]; then tr -d '\r' < "$LOG" | sed -n '/RXE_VM_READY uptime=/,/RXE_VM_EXIT=[0-9]*$/{/RXE_VM_READY uptime=/d;s/RXE_VM_EXIT=[0-9]*$//;/^$/d;p}'; fi
exit "$rc"
