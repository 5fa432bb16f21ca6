#!/usr/bin/env bash
# Runs a command against a fresh moto server on 127.0.0.1 (a free port),
# with the environment every local run needs, and stops the server after.
#
#   infra/local/with-moto.sh cargo test --workspace
#
# Exported to the command: AWS_ENDPOINT_URL (loopback), dummy credentials,
# a region, AWS_EC2_METADATA_DISABLED=true, and no profile or config files,
# so no credential provider can reach beyond this machine.
set -euo pipefail
root=$(cd "$(dirname "$0")/../.." && pwd)
moto="$root/.venv/bin/moto_server"
python="$root/.venv/bin/python"
[ -x "$moto" ] || { echo "with-moto: $moto missing; run 'make venv'" >&2; exit 2; }

mkdir -p "$root/.local"
port=$("$python" -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')
log="$root/.local/moto-$port.log"
"$moto" -H 127.0.0.1 -p "$port" >"$log" 2>&1 &
pid=$!
trap 'kill "$pid" 2>/dev/null || true; wait "$pid" 2>/dev/null || true' EXIT INT TERM

for _ in $(seq 1 150); do
  if "$python" - "$port" <<'PY' 2>/dev/null; then break; fi
import sys, urllib.request
urllib.request.urlopen(f"http://127.0.0.1:{sys.argv[1]}/moto-api/", timeout=1)
PY
  kill -0 "$pid" 2>/dev/null || { echo "with-moto: moto server exited; see $log" >&2; exit 2; }
  sleep 0.2
done

export AWS_ENDPOINT_URL="http://127.0.0.1:$port"
export AWS_ACCESS_KEY_ID=test AWS_SECRET_ACCESS_KEY=test
export AWS_REGION=us-east-1 AWS_DEFAULT_REGION=us-east-1
export AWS_EC2_METADATA_DISABLED=true
export AWS_CONFIG_FILE=/dev/null AWS_SHARED_CREDENTIALS_FILE=/dev/null
unset AWS_PROFILE AWS_SESSION_TOKEN AWS_CONTAINER_CREDENTIALS_FULL_URI AWS_CONTAINER_CREDENTIALS_RELATIVE_URI AWS_WEB_IDENTITY_TOKEN_FILE || true
echo "with-moto: moto server on $AWS_ENDPOINT_URL" >&2
"$@"
