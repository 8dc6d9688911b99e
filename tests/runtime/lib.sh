# Shell helpers for RUN_SH cases; source with `. {runtime}/lib.sh`. BPFTOOL must be set.

# held_bpf_objects PID: the BPF programs and links that process PID holds, one "prog ID" or
# "link ID" a line, sorted, read from the kernel's fdinfo of each of its descriptors (a link's
# program counts as held too). Other processes' objects never appear, so a tracer running beside
# the test changes nothing. (Debian's bpftool is built without the pid iterator: its `-j` listings
# carry no owning pids.)
held_bpf_objects() {
  for f in /proc/"$1"/fdinfo/*; do
    awk '/^link_id:/ { print "link " $2 } /^prog_id:/ { print "prog " $2 }' "$f" 2>/dev/null
  done | sort -u
}

# Every BPF program and link on the machine, in held_bpf_objects' form. Ids are allocated
# cyclically, so a freed id is not handed to another program within a test.
live_bpf_objects() {
  {
    "$BPFTOOL" prog show 2>/dev/null | sed -nE 's/^([0-9]+): .*/prog \1/p'
    "$BPFTOOL" link show 2>/dev/null | sed -nE 's/^([0-9]+): .*/link \1/p'
  } | sort -u
}

# still_held FILE: the objects listed in FILE (held_bpf_objects' output) that still exist.
still_held() { live_bpf_objects | comm -12 - "$1"; }

# Dynamic probe definitions left in tracefs that are fay's: named after it, or placed on a test
# program. fay places uprobes through the perf PMU and defines none; a legacy-attach leak would
# show up here. Other tracers' definitions are not counted.
count_probe_events() {
  t=/sys/kernel/tracing
  cat "$t/uprobe_events" "$t/kprobe_events" 2>/dev/null | grep -ciF -e fay -e "${FAY_TESTPROGS:-fay}"
}

# wait_for_file FILE TENTHS: polls for FILE, up to TENTHS tenths of a second.
wait_for_file() {
  i=0
  while [ ! -e "$1" ] && [ "$i" -lt "$2" ]; do sleep 0.1; i=$((i + 1)); done
  [ -e "$1" ]
}

# wait_for_release FILE EVENTS TENTHS: the kernel frees programs and links asynchronously after the
# last fd closes, so poll until none of those listed in FILE exists and the probe events are back
# to EVENTS before calling anything a leak.
wait_for_release() {
  i=0
  while [ "$i" -lt "$3" ]; do
    if [ -z "$(still_held "$1")" ] && [ "$(count_probe_events)" -le "$2" ]; then
      return 0
    fi
    sleep 0.1
    i=$((i + 1))
  done
  return 1
}

# report_held FILE: what fay held while it ran (FILE from held_bpf_objects).
report_held() {
  grep -q '^prog ' "$1" && echo "fay had programs loaded"
  grep -q '^link ' "$1" && echo "fay had links attached"
  return 0
}

# report_leaks FILE EVENTS: one line per kind, as the cases' EXPECT lines want them: how many of
# fay's programs and links still exist, and how many probe events more than EVENTS are fay's.
report_leaks() {
  echo "leaked programs: $(still_held "$1" | grep -c '^prog ')"
  echo "leaked links: $(still_held "$1" | grep -c '^link ')"
  echo "leaked probe events: $(($(count_probe_events) - $2))"
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

# wait_for_line FILE ERE TENTHS: polls until a line of FILE matches ERE, up to TENTHS tenths of a
# second. "probes attached" (`fay query -v`) and "attached to process" (`fay record -p`) say the
# probes are live, or the threads seized: a
# test releases its workload then, rather than after a sleep a slow machine may outlast.
wait_for_line() {
  _wfl=0
  while ! grep -qE "$2" "$1" 2>/dev/null && [ "$_wfl" -lt "$3" ]; do sleep 0.1; _wfl=$((_wfl + 1)); done
  grep -qE "$2" "$1" 2>/dev/null
}

# wait_in_sleep PID TENTHS: polls until process PID is in clock_nanosleep (230 in
# /proc/PID/syscall), up to TENTHS tenths of a second: a test program started in the background
# has then left the shell and the dynamic loader, and waits where the test means it to.
wait_in_sleep() {
  _wis=0
  while ! grep -q '^230 ' /proc/"$1"/syscall 2>/dev/null && [ "$_wis" -lt "$2" ]; do
    sleep 0.1
    _wis=$((_wis + 1))
  done
}
