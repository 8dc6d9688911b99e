#!/bin/sh
# check_install.sh BUILD_DIR: what `make install` and `make deb` put where a user finds it.
#   1. cmake --install into a scratch PREFIX: the binary prints its version and revision, and
#      finds its in-process runtime under PREFIX/lib/fay (an in-process probe runs through it).
#   2. cpack's .deb, unpacked with dpkg-deb -x into a scratch root: every file in place, its
#      dependencies declared, the unit pointing at /usr/bin/fay, every man page rendering with no
#      warning, the bash completion registering, the zsh one parsing.
# Prints one line per check; exits 1 at the first failure. Only scratch directories are written.
set -eu
build=$(cd "$1" && pwd)
tmp=$(mktemp -d /tmp/fay-install.XXXXXX)
trap 'rm -rf "$tmp"' EXIT
fail() { echo "FAIL: $*"; exit 1; }

# 1. make install PREFIX=...
cmake --install "$build" --prefix "$tmp/prefix" >/dev/null
fay="$tmp/prefix/bin/fay"
"$fay" --version | grep -Eq '^fay [0-9]+\.[0-9]+\.[0-9]+ \(([0-9a-f]{7,}|unknown)(-dirty)?\)$' ||
  fail "fay --version: $("$fay" --version)"
echo "install: $("$fay" --version)"
[ -f "$tmp/prefix/lib/fay/libfay_inproc.so" ] || fail "no lib/fay/libfay_inproc.so"
hammer="$build/tests/testprogs/hammer"
"$fay" query -v --uprobes inprocess -c "$hammer 1 1000" "uprobe:$hammer:fay_hot | count()" \
  >"$tmp/q.out" 2>"$tmp/q.err" || fail "installed fay's in-process query: $(cat "$tmp/q.err")"
grep -q '^fay: in-process probes: 1 process, 1 function patched$' "$tmp/q.err" ||
  fail "installed fay did not run the probe in the process: $(cat "$tmp/q.err")"
grep -q '^ *1000$' "$tmp/q.out" || fail "installed fay's count: $(cat "$tmp/q.out")"
echo "install: the installed fay runs in-process probes through PREFIX/lib/fay"

# 2. make deb
cpack -G DEB -B "$tmp/pkg" --config "$build/CPackConfig.cmake" >/dev/null
deb=$(ls "$tmp"/pkg/fay_*_amd64.deb)
dpkg-deb -I "$deb" | grep -q '^ Depends:.*libbpf1.*libzydis' || fail "Depends: $(dpkg-deb -I "$deb")"
dpkg-deb -x "$deb" "$tmp/root"
for f in usr/bin/fay usr/lib/fay/libfay_inproc.so usr/share/man/man1/fay.1 \
  usr/share/man/man1/fay-query.1 usr/share/man/man1/fay-cluster-status.1 \
  usr/share/bash-completion/completions/fay usr/share/zsh/vendor-completions/_fay \
  usr/lib/systemd/system/fay-agent.service; do
  [ -f "$tmp/root/$f" ] || fail "the .deb has no /$f"
done
grep -q '^ExecStart=/usr/bin/fay agent ' "$tmp/root/usr/lib/systemd/system/fay-agent.service" ||
  fail "the unit's ExecStart"
echo "deb: $(basename "$deb"), its files in place, the unit runs /usr/bin/fay"
pages=0
for page in "$tmp"/root/usr/share/man/man1/*.1; do
  MANWIDTH=80 man --warnings -l "$page" >"$tmp/page.txt" 2>"$tmp/page.err" || fail "man -l $page"
  [ -s "$tmp/page.err" ] && fail "man -l $(basename "$page"): $(cat "$tmp/page.err")"
  grep -q '^NAME' "$tmp/page.txt" || fail "$(basename "$page") has no NAME"
  pages=$((pages + 1))
done
# One page per command the CLI has: fay, each subcommand, and cluster status.
subs=$("$fay" --help | sed -n '/^Subcommands:/,$p' | grep -c '^  [a-z]')
[ "$pages" -eq $((subs + 2)) ] || fail "$pages man pages for $subs subcommands"
echo "deb: $pages man pages render with no warning"
bash -c ". '$tmp/root/usr/share/bash-completion/completions/fay' && complete -p fay" |
  grep -q -- '-F _fay fay$' || fail "bash completion"
out=$(bash -c ". '$tmp/root/usr/share/bash-completion/completions/fay'
  COMP_WORDS=(fay rec); COMP_CWORD=1; _fay; echo \${COMPREPLY[*]}
  COMP_WORDS=(fay record --back); COMP_CWORD=2; _fay; echo \${COMPREPLY[*]}")
[ "$out" = "record
--backend" ] || fail "bash completion answers: $out"
echo "deb: bash completion: complete -p fay, and it completes subcommands and options"
if command -v zsh >/dev/null; then
  zsh -n "$tmp/root/usr/share/zsh/vendor-completions/_fay" || fail "zsh completion syntax"
  echo "deb: zsh completion parses"
fi
echo "install: ok"
