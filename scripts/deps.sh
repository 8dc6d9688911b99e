#!/bin/sh
# Installs every Debian package fay needs to build, test and benchmark. Idempotent and silent when
# everything is already installed.
set -e
PKGS="build-essential cmake pkg-config git libbpf-dev libelf-dev zlib1g-dev libzstd-dev
libxxhash-dev libisal-dev libcli11-dev libfmt-dev nlohmann-json3-dev libgtest-dev libgmock-dev bpftool
bpftrace strace linux-perf sqlite3 python3 babeltrace2"
missing=""
for p in $PKGS; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing="$missing $p"
done
[ -z "$missing" ] && exit 0
if [ "$(id -u)" != 0 ]; then
  echo "fay: missing packages:$missing" >&2
  echo "fay: run as root: apt-get install -y$missing" >&2
  exit 1
fi
echo "fay: installing$missing" >&2
export DEBIAN_FRONTEND=noninteractive
apt-get update -qq >/dev/null
apt-get install -y -qq --no-install-recommends $missing >/dev/null
