#!/bin/sh
# make fresh-check: does what a newcomer does, on a minimal Debian 12 made for the purpose.
# debootstraps bookworm (minbase plus git) into a directory of its own under /var/tmp, mounts what a
# root needs to run eBPF tools, clones this repository's committed HEAD into it with its own git,
# then runs the README's two commands inside a chroot, exactly: ./dev demo, then ./dev test.
# Prints each step, how long each command took and the total; exits non-zero if either fails.
# Every mount is undone on every exit path; the directory is removed unless --keep (or
# FRESH_KEEP=1) is given. Needs root. Reaches no network but the Debian mirror.
#   --keep        leave the directory (its path is printed; nothing stays mounted)
#   --tmpfs-tmp   /tmp on a tmpfs, as on Debian 13; Debian 12 keeps /tmp on the root file system
#   --ci          then also time `CI=true bash .ci/run` on a second clean clone, as CI runs it
set -eu

MIRROR=http://deb.debian.org/debian
SUITE=bookworm
CHROOT_PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin

keep=${FRESH_KEEP:-0}
tmpfs_tmp=0
ci=0
for arg in "$@"; do
  case "$arg" in
    --keep) keep=1 ;;
    --tmpfs-tmp) tmpfs_tmp=1 ;;
    --ci) ci=1 ;;
    -h | --help)
      echo "usage: scripts/fresh_check.sh [--keep] [--tmpfs-tmp] [--ci]   (as root; see its top)"
      exit 0
      ;;
    *) echo "fresh-check: unknown argument: $arg" >&2; exit 2 ;;
  esac
done
if [ "$(id -u)" != 0 ]; then
  echo "fresh-check: run as root (debootstrap, mount and chroot need it)" >&2
  exit 1
fi

repo=$(cd "$(dirname "$0")/.." && pwd)
head=$(git -C "$repo" rev-parse HEAD)
start=$(date +%s)

say() { echo "fresh-check $(date +%T): $*"; }
# elapsed SINCE: "4m 07s" since the epoch second SINCE.
elapsed() { s=$(($(date +%s) - $1)); printf '%dm %02ds' $((s / 60)) $((s % 60)); }

base=""
root=""
# Mount points at or under the root, one a line (mountinfo's fifth field).
mounts_under() {
  [ -n "$root" ] || return 0
  awk -v r="$root" '$5 == r || index($5, r "/") == 1 { print $5 }' /proc/self/mountinfo
}
# Unmounts everything under the root, deepest first; mounts stacked on one point take more rounds.
unmount_all() {
  for _ in 1 2 3 4 5 6 7 8; do
    points=$(mounts_under | awk '{ print length($0), $0 }' | sort -rn | cut -d' ' -f2-)
    [ -z "$points" ] && return 0
    for m in $points; do
      umount "$m" 2>/dev/null || umount -l "$m" 2>/dev/null || true
    done
  done
  [ -z "$(mounts_under)" ]
}
# Ends every process whose root directory is the fresh root (a stray daemon, a test left behind).
kill_inside() {
  [ -n "$root" ] || return 0
  for _ in 1 2 3 4 5 6 7 8 9 10; do
    found=""
    for p in /proc/[0-9]*; do
      r=$(readlink "$p/root" 2>/dev/null) || continue
      case "$r" in
        "$root" | "$root"/*) kill -9 "${p#/proc/}" 2>/dev/null && found=1 ;;
      esac
    done
    [ -z "$found" ] && return 0
    sleep 0.5
  done
}
# run_waited COMMAND...: runs COMMAND in the background and waits for it, so that a signal runs the
# traps at once (a shell runs them only after a foreground command ends). The shell starts
# background commands with SIGINT and SIGQUIT ignored; perl (Essential in Debian) restores them,
# so the commands and the tests see what they would in a terminal.
bg_pid=""
run_waited() {
  perl -e '$SIG{INT} = $SIG{QUIT} = "DEFAULT"; exec { $ARGV[0] } @ARGV or die "$ARGV[0]: $!\n"' "$@" &
  bg_pid=$!
  wait_rc=0
  wait "$bg_pid" || wait_rc=$?
  bg_pid=""
  return "$wait_rc"
}
cleanup() {
  rc=$?
  trap - EXIT INT TERM HUP
  [ -n "$bg_pid" ] && kill "$bg_pid" 2>/dev/null
  [ -n "$base" ] || exit "$rc"
  kill_inside
  if ! unmount_all; then
    say "could not unmount everything under $root; left in place:" >&2
    mounts_under >&2
    exit 1
  fi
  if [ "$keep" = 1 ]; then
    say "kept $base"
  else
    rm -rf --one-file-system "$base"
  fi
  exit "$rc"
}
trap cleanup EXIT
trap 'exit 130' INT
trap 'exit 143' TERM
trap 'exit 129' HUP

say "checking $head"
say "step 1: debootstrap (installed on this machine first if missing)"
"$repo/scripts/deps.sh" debootstrap
base=$(mktemp -d /var/tmp/fay-fresh-XXXXXX)
root=$base/root
t=$(date +%s)
say "step 2: debootstrap --variant=minbase --include=git $SUITE $root $MIRROR"
if ! run_waited debootstrap --variant=minbase --include=git "$SUITE" "$root" "$MIRROR" >"$base/debootstrap.log" 2>&1; then
  tail -n 30 "$base/debootstrap.log" >&2
  say "debootstrap failed (log above)" >&2
  exit 1
fi
say "debootstrap done in $(elapsed "$t")"

say "step 3: mounts: the root itself, /proc, /sys (with tracefs, bpffs, cgroups), /dev, /dev/pts, /run, $([ "$tmpfs_tmp" = 1 ] && echo "/tmp" || echo "not /tmp (on the root file system, as on Debian 12)")"
# The root is a mount point of its own, as / is on a machine: a mount namespace made inside can
# then make / private (mount(2) refuses to change the propagation of a directory that is not one).
mount --bind "$root" "$root"
mount --make-private "$root"
mount -t proc proc "$root/proc"
# Slaves: a test that unmounts something in there never unmounts it on this machine.
mount --rbind /sys "$root/sys"
mount --make-rslave "$root/sys"
# What systemd mounts at boot on a Debian 12 machine, where this one has not.
if [ ! -d "$root/sys/kernel/tracing/events" ]; then
  mount -t tracefs tracefs "$root/sys/kernel/tracing"
fi
if ! mounts_under | grep -qx "$root/sys/fs/bpf"; then
  mount -t bpf bpf "$root/sys/fs/bpf"
fi
mount --rbind /dev "$root/dev"
mount --make-rslave "$root/dev"
mount -t tmpfs -o mode=755,nosuid,nodev tmpfs "$root/run"
if [ "$tmpfs_tmp" = 1 ]; then
  mount -t tmpfs -o mode=1777,nosuid,nodev tmpfs "$root/tmp"
fi

in_root() {
  run_waited chroot "$root" /usr/bin/env -i HOME=/root PATH="$CHROOT_PATH" TERM="${TERM:-dumb}" \
    /bin/sh -c "$1" </dev/null
}

say "step 4: git clone of this repository's committed HEAD, with the new system's git"
mkdir "$root/mnt/origin"
mount --bind "$repo" "$root/mnt/origin"
mount -o remount,bind,ro "$root/mnt/origin"
in_root "git clone -q --no-local /mnt/origin /root/fay && git -C /root/fay checkout -q --detach $head"
[ "$ci" = 1 ] && in_root "git clone -q --no-local /mnt/origin /root/fay-ci && git -C /root/fay-ci checkout -q --detach $head"
umount "$root/mnt/origin"
rmdir "$root/mnt/origin"
say "cloned into $root/root/fay at $(in_root 'git -C /root/fay log -1 --format=%h')"

# run_step N DIR COMMAND: COMMAND inside the root in the clone DIR, timed; sets rc_N and time_N.
failed=0
run_step() {
  n=$1
  dir=$2
  shift 2
  say "step $n: cd $dir && $*"
  t=$(date +%s)
  rc=0
  in_root "cd /root/$dir && $*" || rc=$?
  d=$(elapsed "$t")
  if [ "$rc" = 0 ]; then
    say "$*: ok in $d"
  else
    say "$*: FAILED (exit $rc) after $d"
    failed=1
  fi
  eval "time_$n=\"\$d\" rc_$n=$rc"
}
run_step 5 fay ./dev demo
run_step 6 fay ./dev test
[ "$ci" = 1 ] && run_step 7 fay-ci CI=true bash .ci/run

say "summary for $head on a fresh Debian 12 (minbase + git), $(nproc) cores:"
say "  ./dev demo  exit $rc_5  $time_5"
say "  ./dev test  exit $rc_6  $time_6"
[ "$ci" = 1 ] && say "  .ci/run on a second clean clone (packages installed)  exit $rc_7  $time_7"
say "  total (with debootstrap and clone)  $(elapsed "$start")"
[ "$failed" = 0 ] && say "PASS" || say "FAIL"
exit "$failed"
