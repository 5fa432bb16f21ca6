# Shared by the local scripts (demo.sh, infra/contract/schemathesis.sh):
# functions to run functions under `cargo lambda watch` on 127.0.0.1.
# Source it from the project root with `python` set to the venv's.

# A free TCP port on 127.0.0.1.
free_port() { "$python" -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])'; }

# The loopback AWS environment a function needs, as `cargo lambda watch
# --env-var` takes it (comma-separated), after the function's own "$1"
# (the local Custom Event Bus's endpoint too, when one is exported).
watch_env() { echo "$1,AWS_ENDPOINT_URL=$AWS_ENDPOINT_URL,AWS_ENDPOINT_URL_DYNAMODB=$AWS_ENDPOINT_URL_DYNAMODB,AWS_ENDPOINT_URL_DYNAMODB_STREAMS=$AWS_ENDPOINT_URL_DYNAMODB_STREAMS,AWS_REGION=us-east-1,AWS_ACCESS_KEY_ID=test,AWS_SECRET_ACCESS_KEY=test,AWS_EC2_METADATA_DISABLED=true${AWS_ENDPOINT_URL_EVENTBRIDGEV2:+,AWS_ENDPOINT_URL_EVENTBRIDGEV2=$AWS_ENDPOINT_URL_EVENTBRIDGEV2}"; }

# start_watch PORT ENV LOG: `cargo lambda watch` in the background on
# 127.0.0.1:PORT with ENV (watch_env adds the loopback part); sets watch_pid.
start_watch() {
  cargo lambda watch --invoke-address 127.0.0.1 --invoke-port "$1" --ignore-changes \
    --env-var "$(watch_env "$2")" >"$3" 2>&1 &
  watch_pid=$!
}

# wait_listening PORT LOG: until 127.0.0.1:PORT accepts (the first start
# compiles), at most 5 minutes.
wait_listening() {
  for _ in $(seq 1 600); do
    "$python" -c "import socket; socket.create_connection(('127.0.0.1', $1), 1)" 2>/dev/null && return 0
    sleep 0.5
  done
  echo "cargo lambda watch did not listen on 127.0.0.1:$1; see $2" >&2
  return 1
}

# export_env ENV: exports each NAME=VALUE of a comma-separated list (what
# `devkit env` prints) into this shell.
export_env() {
  local pair
  while IFS= read -r pair; do [ -n "$pair" ] && export "$pair"; done < <(tr ',' '\n' <<<"$1")
}
