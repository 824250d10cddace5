#!/usr/bin/env bash
# Runs a guest script inside a qemu VM (software emulation, no KVM needed) booted from Debian's
# own kernel, with Soft-RoCE: two independent "wires" (veth pairs), each with an rxe device at
# both ends:
#   wire 0: rxe0 on veth0 (10.0.0.1) <-> rxe1 on veth1 (10.0.0.2)
#   wire 1: rxe2 on veth2 (10.0.1.1) <-> rxe3 on veth3 (10.0.1.2)
# so a process on rxe0+rxe2 and one on rxe1+rxe3 are two hosts joined by two NICs, and taking
# one wire down (ip link set veth1 down) leaves the other intact. The VM has no network device
# to the host (-nic none), so the guest's addresses never leave it. Host-built binaries and libraries run unchanged in the
# guest (the initramfs carries this host's userspace: glibc, libibverbs, the rxe provider).
#
# usage: rxe-vm.sh WORKDIR GUEST_SCRIPT [FILE...]
#   FILEs are copied into the guest with their shared libraries: executables to /usr/bin,
#   *.so* libraries (and symlinks to them) to /usr/lib/x86_64-linux-gnu.
#   The exit code is the guest script's (99: no exit code reported, 124: timeout).
#   RXE_VM_TIMEOUT (seconds, default 300) bounds the whole VM run.
# Needs root only for apt-get (qemu-system-x86, busybox-static, ibverbs-utils, rdma-core,
# iproute2, cpio; perftest optional); the kernel package is downloaded and unpacked, never
# installed.
set -euo pipefail
WORK=$(realpath -m "$1")
GUEST=$(realpath "$2")
shift 2
FILES=()
for f in "$@"; do FILES+=("$(realpath -s "$f")"); done
mkdir -p "$WORK"
cd "$WORK"
export DEBIAN_FRONTEND=noninteractive

# 1. Host packages.
need=()
for p in qemu-system-x86 busybox-static ibverbs-utils ibverbs-providers rdma-core iproute2 cpio; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || need+=("$p")
done
if [ ${#need[@]} -gt 0 ]; then
  apt-get update -qq
  apt-get install -y -qq --no-install-recommends "${need[@]}" >/dev/null
fi

# 2. The guest kernel and the handful of modules we need. The ABI name (6.1.0-NN) changes with
#    Debian point releases, so it is resolved through the linux-image-amd64 metapackage.
if [ ! -f vmlinuz ] || [ ! -d mods ]; then
  kpkg() { apt-cache depends linux-image-amd64 2>/dev/null |
             awk '/Depends: linux-image-[0-9]/{print $2; exit}'; }
  KPKG=$(kpkg)
  [ -n "$KPKG" ] || { apt-get update -qq; KPKG=$(kpkg); }
  rm -rf kdeb kroot mods
  mkdir -p kdeb kroot mods
  (cd kdeb && apt-get download -qq "$KPKG" 2>/dev/null) ||
    { apt-get update -qq; (cd kdeb && apt-get download -qq "$KPKG"); }
  dpkg -x kdeb/*.deb kroot
  KVER=$(ls kroot/lib/modules)
  for m in net/ipv4/udp_tunnel net/ipv6/ip6_udp_tunnel crypto/crc32_generic \
           drivers/infiniband/core/ib_core drivers/infiniband/core/ib_uverbs \
           drivers/infiniband/sw/rxe/rdma_rxe drivers/net/veth net/sched/sch_netem; do
    cp "kroot/lib/modules/$KVER/kernel/$m.ko" mods/
  done
  cp kroot/boot/vmlinuz-* vmlinuz.tmp && mv vmlinuz.tmp vmlinuz
  rm -rf kroot kdeb
fi

# 3. The initramfs: busybox, the modules, and host binaries with their libraries.
R=$WORK/root
rm -rf "$R"
mkdir -p "$R"/{bin,proc,sys,dev,tmp,lib64,usr/bin,usr/lib/x86_64-linux-gnu/libibverbs,etc/libibverbs.d,mods}
ln -s usr/lib "$R/lib"
cp /bin/busybox "$R/bin/"
for applet in $("$R/bin/busybox" --list); do
  [ "$applet" = busybox ] || ln -sf busybox "$R/bin/$applet"
done
cp mods/*.ko "$R/mods/"
libs_of() {
  ldd "$1" 2>/dev/null | awk '/=> \//{print $3} /^[ \t]*\/lib64\//{print $1}'
}
add_libs() {
  local l d
  for l in $(libs_of "$1"); do
    case $l in /lib64/*) d=$R/lib64 ;; *) d=$R/usr/lib/x86_64-linux-gnu ;; esac
    [ -e "$d/$(basename "$l")" ] || cp -L "$l" "$d/"
  done
}
add_exe() { install -D -m755 "$1" "$R/usr/bin/$(basename "$1")"; add_libs "$1"; }
for b in /usr/bin/ibv_devices /usr/bin/ibv_devinfo /usr/bin/ibv_rc_pingpong /usr/bin/rdma \
         /usr/sbin/ip /usr/sbin/tc; do
  add_exe "$b"
done
# perftest, when installed (autopilot ibbench compares with it).
for b in /usr/bin/ib_write_bw; do
  [ -x "$b" ] && add_exe "$b"
done
# libibverbs is what our plugin dlopens; the rxe provider is dlopened by libibverbs.
cp -L /usr/lib/x86_64-linux-gnu/libibverbs.so.1 "$R/usr/lib/x86_64-linux-gnu/"
cp -L /usr/lib/x86_64-linux-gnu/libibverbs/librxe-rdmav*.so "$R/usr/lib/x86_64-linux-gnu/libibverbs/"
add_libs /usr/lib/x86_64-linux-gnu/libibverbs.so.1
cp /etc/libibverbs.d/rxe.driver "$R/etc/libibverbs.d/"
for f in ${FILES[@]+"${FILES[@]}"}; do
  case $(basename "$f") in
    *.so|*.so.*)
      if [ -L "$f" ]; then
        cp -P "$f" "$R/usr/lib/x86_64-linux-gnu/"
      else
        cp -L "$f" "$R/usr/lib/x86_64-linux-gnu/"
        add_libs "$f"
      fi
      ;;
    *) add_exe "$f" ;;
  esac
done
cp "$GUEST" "$R/guest.sh"

cat > "$R/init" <<'INIT'
#!/bin/busybox sh
export PATH=/usr/bin:/bin
mount -t proc p /proc; mount -t sysfs s /sys; mount -t devtmpfs d /dev; mount -t tmpfs t /tmp
for m in udp_tunnel ip6_udp_tunnel crc32_generic ib_core ib_uverbs rdma_rxe veth sch_netem; do
  insmod /mods/$m.ko || echo "insmod $m failed"
done
IP=/usr/bin/ip   # busybox sh would run its own, much smaller, ip applet for a bare 'ip'
$IP link set lo up
# Traffic between two local addresses must cross the veth pair, not lo (rxe drops packets that
# arrive on lo): move the 'local' rule behind per-device tables.
$IP rule add pref 1000 lookup local
$IP rule del pref 0
for w in 0 1; do
  a=veth$((2 * w)); b=veth$((2 * w + 1))
  $IP link add $a type veth peer name $b
  for d in $a $b; do echo 1 > /proc/sys/net/ipv6/conf/$d/disable_ipv6; done
  $IP addr add 10.0.$w.1/32 dev $a
  $IP addr add 10.0.$w.2/32 dev $b
  $IP rule add pref $((10 + 2 * w)) iif lo from 10.0.$w.1 to 10.0.$w.2 lookup $((100 + 2 * w))
  $IP rule add pref $((11 + 2 * w)) iif lo from 10.0.$w.2 to 10.0.$w.1 lookup $((101 + 2 * w))
done
for f in all default veth0 veth1 veth2 veth3 lo; do
  echo 1 > /proc/sys/net/ipv4/conf/$f/accept_local
  echo 0 > /proc/sys/net/ipv4/conf/$f/rp_filter
done
rxe-net-up
for d in 0 1 2 3; do rdma link add rxe$d type rxe netdev veth$d; done
echo "RXE_READY uptime=$(cut -d' ' -f1 /proc/uptime)"
sh /guest.sh
rc=$?
echo "GUEST_EXIT_CODE=$rc uptime=$(cut -d' ' -f1 /proc/uptime)"
poweroff -f
INIT
chmod 755 "$R/init"
cat > "$R/usr/bin/rxe-net-up" <<'NETUP'
#!/bin/sh
# (Re)creates both veth "wires": link down flushes the per-device routes and neighbours.
IP=/usr/bin/ip
for w in 0 1; do
  a=veth$((2 * w)); b=veth$((2 * w + 1))
  $IP link set $a up; $IP link set $b up
  $IP route replace 10.0.$w.2 dev $a table $((100 + 2 * w))
  $IP route replace 10.0.$w.1 dev $b table $((101 + 2 * w))
  $IP neigh replace 10.0.$w.2 lladdr $(cat /sys/class/net/$b/address) dev $a nud permanent
  $IP neigh replace 10.0.$w.1 lladdr $(cat /sys/class/net/$a/address) dev $b nud permanent
done
NETUP
chmod 755 "$R/usr/bin/rxe-net-up"
(cd "$R" && find . | cpio -o -H newc --quiet | gzip -1) > initrd.img

# 4. Boot. -cpu qemu64 is faster under emulation than -cpu max; -smp 2 so two busy-polling
#    processes do not starve each other.
rm -f console.log
set +e
timeout "${RXE_VM_TIMEOUT:-300}" qemu-system-x86_64 -machine q35 -accel tcg -cpu qemu64 -smp 2 \
  -m 1536 -nographic -no-reboot -nic none -kernel vmlinuz -initrd initrd.img \
  -append "console=ttyS0 quiet panic=-1" </dev/null | tr -d '\r' | tee console.log
qemu_rc=${PIPESTATUS[0]}
set -e
[ "$qemu_rc" = 124 ] && { echo "rxe-vm: timed out" >&2; exit 124; }
rc=$(sed -n 's/^GUEST_EXIT_CODE=\([0-9]*\).*/\1/p' console.log | tail -1)
[ -n "$rc" ] || { echo "rxe-vm: the guest reported no exit code" >&2; exit 99; }
exit "$rc"
