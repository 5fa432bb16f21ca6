#!/usr/bin/env bash
# Proves infra/local/with-local.sh's promises (docs/local.md): a missing
# Java, a port already taken and a server that does not answer in time each
# give one error line and exit status 2; the servers are stopped when the
# command ends, when it fails, and on Ctrl-C (SIGINT).
set -uo pipefail
root=$(cd "$(dirname "$0")/../.." && pwd)
with="$root/infra/local/with-local.sh"
python="$root/.venv/bin/python"
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
failed=0
ok() { echo "ok - $1"; }
not_ok() { echo "not ok - $1"; failed=$((failed + 1)); }

# expect_error NAME PATTERN ENV... : with-local exits 2 with one line matching PATTERN.
expect_error() {
  local name=$1 pattern=$2
  shift 2
  env "$@" "$with" true >"$work/out" 2>"$work/err"
  local status=$?
  local lines
  lines=$(wc -l <"$work/err")
  if [ "$status" -eq 2 ] && [ "$lines" -eq 1 ] && grep -q -- "$pattern" "$work/err"; then
    ok "$name: $(cat "$work/err")"
  else
    not_ok "$name: status $status, $lines lines: $(cat "$work/err")"
  fi
}

# Is anything listening on 127.0.0.1:$1?
listening() { "$python" -c 'import socket,sys; s=socket.socket(); s.settimeout(1); sys.exit(0 if s.connect_ex(("127.0.0.1", int(sys.argv[1]))) == 0 else 1)' "$1"; }
# The two ports with-local announced on stderr.
ports() { grep -o '127\.0\.0\.1:[0-9]*' "$1" | cut -d: -f2; }

expect_error "missing java" "java (/nonexistent/java) is missing" JAVA=/nonexistent/java

# A port already taken (a listener of ours holds it).
"$python" -c 'import socket,time; s=socket.socket(); s.bind(("127.0.0.1", 0)); s.listen(); print(s.getsockname()[1], flush=True); time.sleep(60)' >"$work/port" &
holder=$!
for _ in $(seq 50); do [ -s "$work/port" ] && break; sleep 0.1; done
taken=$(cat "$work/port")
expect_error "port taken" "port $taken on 127.0.0.1 is already taken" DYNAMODB_PORT="$taken"
kill "$holder" 2>/dev/null; wait "$holder" 2>/dev/null

expect_error "no answer in time" "did not answer within 0s" LOCAL_SERVER_START_SECONDS=0

# Stopped after the command: success, failure.
for outcome in true false; do
  "$with" "$outcome" 2>"$work/err"
  left=""
  for p in $(ports "$work/err"); do listening "$p" && left+=" $p"; done
  [ -z "$left" ] && [ -n "$(ports "$work/err")" ] \
    && ok "servers stopped after a command that returns $outcome" \
    || not_ok "servers still listening after '$outcome':$left"
done

# Stopped on Ctrl-C: SIGINT to the job's process group while its command
# runs, as a terminal sends it. The job gets a group of its own from
# setsid, and SIGINT back at its default: a shell without job control (no
# controlling terminal, as under make in CI; `set -m` does not always give
# it) starts its background jobs with SIGINT ignored, which no script can
# undo, and the Ctrl-C would never arrive.
: >"$work/err"
setsid env --default-signal=INT "$with" sleep 120 2>"$work/err" &
pid=$!
for _ in $(seq 300); do grep -q "DynamoDB Local on" "$work/err" && break; sleep 0.2; done
kill -INT -- "-$pid"
wait "$pid"
status=$?
sleep 1
left=""
for p in $(ports "$work/err"); do listening "$p" && left+=" $p"; done
[ -z "$left" ] && [ "$status" -ne 0 ] && [ -n "$(ports "$work/err")" ] \
  && ok "servers stopped on Ctrl-C (exit $status)" \
  || not_ok "after Ctrl-C: exit $status, still listening:$left"

[ "$failed" -eq 0 ]
