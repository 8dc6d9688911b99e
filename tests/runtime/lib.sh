# Shell helpers for RUN_SH cases; source with `. {runtime}/lib.sh`. BPFTOOL must be set.

# Number of BPF programs / links loaded on the whole machine.
count_progs() { "$BPFTOOL" prog show 2>/dev/null | grep -cE '^[0-9]+: '; }
count_links() { "$BPFTOOL" link show 2>/dev/null | grep -cE '^[0-9]+: '; }

# Dynamic probe definitions left in tracefs (a legacy-attach leak would show up here).
count_probe_events() {
  t=/sys/kernel/tracing
  cat "$t/uprobe_events" "$t/kprobe_events" 2>/dev/null | grep -c .
}

# wait_for_file FILE TENTHS: polls for FILE, up to TENTHS tenths of a second.
wait_for_file() {
  i=0
  while [ ! -e "$1" ] && [ "$i" -lt "$2" ]; do sleep 0.1; i=$((i + 1)); done
  [ -e "$1" ]
}

# wait_for_baseline PROGS LINKS EVENTS TENTHS: the kernel frees programs asynchronously after the
# last fd closes, so poll before calling anything a leak.
wait_for_baseline() {
  i=0
  while [ "$i" -lt "$4" ]; do
    if [ "$(count_progs)" -le "$1" ] && [ "$(count_links)" -le "$2" ] &&
       [ "$(count_probe_events)" -le "$3" ]; then
      return 0
    fi
    sleep 0.1
    i=$((i + 1))
  done
  return 1
}

# report_leaks PROGS LINKS EVENTS: one line per kind, as the cases' EXPECT lines want them.
report_leaks() {
  echo "leaked programs: $(( $(count_progs) - $1 ))"
  echo "leaked links: $(( $(count_links) - $2 ))"
  echo "leaked probe events: $(( $(count_probe_events) - $3 ))"
}

# A workload for `-c` that signals (by creating a file) that it runs, i.e. that fay has attached,
# records its pid, then idles. write_idle_workload DIR SECONDS
write_idle_workload() {
  cat >"$1/work.sh" <<EOS
echo \$\$ > "$1/child"
touch "$1/started"
exec sleep $2
EOS
}

# Ends the idle workload if fay left it behind.
stop_idle_workload() {
  [ -s "$1/child" ] && kill "$(cat "$1/child")" 2>/dev/null
  return 0
}
