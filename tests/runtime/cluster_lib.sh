# Shell helpers for tests/runtime/cases/cluster.test: agents on loopback, on ports of their own.
# Sourced with FAY set. Every agent is killed when the case's shell exits.
PORT_BASE=$((20000 + ($$ % 2000) * 16))
AGENT_PIDS=""
trap 'kill -9 $AGENT_PIDS 2>/dev/null; wait 2>/dev/null' EXIT

# start_agent I [flags...]: agent hI on 127.0.0.1:PORT_BASE+I, waits until it listens.
start_agent() {
  i=$1; shift
  "$FAY" agent --listen 127.0.0.1:$((PORT_BASE + i)) --name h$i "$@" 2>>agents.log &
  eval "AGENT_$i=$!"
  AGENT_PIDS="$AGENT_PIDS $!"
  for _ in $(seq 100); do
    ss -ltn 2>/dev/null | grep -q ":$((PORT_BASE + i)) " && return 0
    sleep 0.05
  done
  echo "agent h$i did not listen"
}

# hosts FROM TO: the comma-separated addresses of agents FROM..TO.
hosts() {
  out=""
  for i in $(seq $1 $2); do out="$out${out:+,}127.0.0.1:$((PORT_BASE + i))"; done
  echo "$out"
}

# wait_attached HOSTS N: until N queries are attached across the agents HOSTS (10 s at most).
wait_attached() {
  for _ in $(seq 200); do
    [ "$("$FAY" cluster status --insecure --hosts "$1" 2>/dev/null | grep -c 'attached, agent')" -ge "$2" ] && return 0
    sleep 0.05
  done
  echo "not attached: $("$FAY" cluster status --insecure --hosts "$1" 2>&1 | grep -c 'attached, agent') of $2"
}

# wait_windows FILE N: until the coordinator has printed N windows to FILE (text: a "hosts:"
# line each; JSON: rows of N distinct windows; 30 s at most). A window's output comes when it
# closes, so what runs next runs early in the window after.
windows_in() { { grep -E '^hosts: ' "$1"; grep -oE '"window": ?[0-9]+' "$1" | sort -u; } 2>/dev/null | wc -l; }
wait_windows() {
  for _ in $(seq 600); do
    [ "$(windows_in "$1")" -ge "$2" ] && return 0
    sleep 0.05
  done
  echo "windows: $(windows_in "$1") of $2"
}
