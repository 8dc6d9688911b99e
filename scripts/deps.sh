#!/bin/sh
# Installs every Debian package fay needs to build, test and benchmark, or only the packages named
# as arguments (scripts/fresh_check.sh asks for debootstrap this way). Idempotent and silent when
# everything is already installed. A minimal Debian 12 has neither make nor a compiler:
# build-essential brings both, make is named too since ./dev runs it.
set -e
PKGS="build-essential make cmake pkg-config git libbpf-dev libelf-dev zlib1g-dev libzstd-dev
libxxhash-dev libisal-dev libcli11-dev libfmt-dev nlohmann-json3-dev libgtest-dev libgmock-dev bpftool
bpftrace strace linux-perf sqlite3 python3 babeltrace2 zstd time clang libclang-rt-14-dev
libgrpc++-dev libprotobuf-dev protobuf-compiler protobuf-compiler-grpc openssl iproute2
libzydis-dev man-db zsh dpkg-dev libcpp-httplib-dev prometheus clickhouse-server"
[ $# -gt 0 ] && PKGS="$*"
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
