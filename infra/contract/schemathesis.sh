#!/usr/bin/env bash
# The orders API against its contract, docs/openapi.yaml: the document is
# validated (openapi-spec-validator), then schemathesis generates requests
# for every operation (valid and invalid ones) and sends them to the real
# `writer` binary under `cargo lambda watch` on 127.0.0.1, backed by the
# moto server. Both kinds of data: valid requests (positive) and requests
# the document forbids (negative). Its checks: no 5xx; every status, content
# type, header and body as documented; a valid request is never refused for
# its shape (positive_data_acceptance) and a forbidden one always is
# (negative_data_rejection); a missing required header is refused; an
# undocumented method is 405 with `Allow`. So the document and the code
# cannot drift apart silently (schemathesis.toml: the one state answer, 422). Run through `make test` (a bounded number of examples
# per operation) or `make fuzz` (FUZZ_EXAMPLES, default 500).
#
# cargo lambda watch has no authorizer: the writer runs with
# WRITER_LOCAL_CALLER (which the template never sets); the owner rule and
# the 401 are tested in tests/writer_api/callers.rs.
set -euo pipefail
root=$(cd "$(dirname "$0")/../.." && pwd)
cd "$root"
export PATH="$root/.venv/bin:$PATH"  # cargo-lambda
: "${AWS_ENDPOINT_URL:?run through make test or make fuzz (infra/local/with-local.sh)}"
examples=${FUZZ_EXAMPLES:-25}
seed=${FUZZ_SEED:-1}
state=".local/contract"
mkdir -p "$state"
python=".venv/bin/python"

echo "contract: docs/openapi.yaml is a valid OpenAPI 3.1 document"
.venv/bin/openapi-spec-validator docs/openapi.yaml

cargo build --quiet --locked --bin writer --bin devkit
suffix=$(date +%s)-$$
eval "$(target/debug/devkit provision "contract-orders-$suffix" "contract-bus-$suffix" outbox.orders)"

source infra/local/lib.sh
port=$(free_port)
# The writer's environment as the templates give it (devkit env), plus the
# local caller (cargo lambda watch has no authorizer; the template never
# sets WRITER_LOCAL_CALLER).
start_watch "$port" "$(target/debug/devkit env --table "$table" --stream "$stream" --bus "$bus" writer),WRITER_LOCAL_CALLER=contract" "$state/watch.log"
trap 'kill "$watch_pid" 2>/dev/null || true; wait "$watch_pid" 2>/dev/null || true' EXIT
wait_listening "$port" "$state/watch.log"

echo "contract: schemathesis, $examples examples per operation (seed $seed)"
# infra/contract/hooks.py drops only the local emulator's own 500s (see there).
SCHEMATHESIS_HOOKS=hooks PYTHONPATH=infra/contract .venv-contract/bin/schemathesis \
  --config-file infra/contract/schemathesis.toml run docs/openapi.yaml \
  --url "http://127.0.0.1:$port/lambda-url/writer" \
  --mode all \
  --checks not_a_server_error,status_code_conformance,content_type_conformance,response_headers_conformance,response_schema_conformance,negative_data_rejection,positive_data_acceptance,missing_required_header,unsupported_method,allow_header_conformance \
  --max-examples "$examples" \
  --seed "$seed" \
  --generation-database none \
  --request-timeout 30 \
  --workers 1 \
  --no-color \
  --output-sanitize false \
  --report junit --report-dir "$state/report"
