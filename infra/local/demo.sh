#!/usr/bin/env bash
# The local end-to-end demo. Run it through `make demo`, which starts a moto
# server on 127.0.0.1 and exports the loopback environment first.
#
#   writer (HTTP route) → table → stream → devkit pump (the event source
#   mapping, settings and filter from template.yaml) → publisher → EventBridge
#   → subscriber queue; then a batch the mapping gives up on, recovered at
#   once by the sweeper from the OnFailure queue (its SQS trigger); then the
#   consumer side: the bus's rule → projector queue → devkit deliver (the
#   SQS mapping) → projector → the read model, each event counted once.
#
# DEMO_SINK=eventbridge-bus (`make demo DEMO_SINK=eventbridge-bus`) runs the
# same on the eventbridge-bus sink: a Custom Event Bus on the local bus
# (`devkit bus`, on 127.0.0.1), whose FIFO subscribers feed SQS FIFO queues
# (the subscriber's and the projector's) in each order's event order.
set -euo pipefail
root=$(cd "$(dirname "$0")/../.." && pwd)
cd "$root"
: "${AWS_ENDPOINT_URL:?run through make demo}"
python=".venv/bin/python"
state=".local/demo"
mkdir -p "$state"

say() { printf '\n\033[1m== %s\033[0m\n' "$*"; }
source infra/local/lib.sh
devkit() { target/debug/devkit "$@"; }

suffix=$(date +%s)
sink=${DEMO_SINK:-eventbridge}
case "$sink" in
  eventbridge) bus_kind="the EventBridge bus"; provision_flags=() ;;
  eventbridge-bus) bus_kind="the Custom Event Bus"; provision_flags=(--custom-bus) ;;
  *) echo "DEMO_SINK=$sink: expected eventbridge or eventbridge-bus" >&2; exit 2 ;;
esac
say "Building the functions and the local kit (devkit) (the first run compiles the AWS SDK: a few minutes)"
cargo build --quiet --locked --bins

pids=()
trap 'kill "${pids[@]}" 2>/dev/null || true; wait "${pids[@]}" 2>/dev/null || true' EXIT
if [ "$sink" = eventbridge-bus ]; then
  say "Starting the local Custom Event Bus (devkit bus: no local server implements its API) on 127.0.0.1"
  bport=$(free_port)
  devkit bus --port "$bport" >"$state/bus.log" 2>&1 &
  pids+=($!)
  wait_listening "$bport" "$state/bus.log"
  export AWS_ENDPOINT_URL_EVENTBRIDGEV2="http://127.0.0.1:$bport"
fi

say "Provisioning the local stack on $AWS_ENDPOINT_URL (sink: $sink)"
# (Printed with echo, not `tee /dev/stderr`: tee reopens a redirected
# stderr's file from its start, over the lines before.)
provisioned=$(devkit provision ${provision_flags[@]+"${provision_flags[@]}"} "demo-orders-$suffix" "demo-bus-$suffix" outbox.orders)
echo "$provisioned"
eval "$provisioned"
export ON_FAILURE_QUEUE_URL="$on_failure"

say "Starting writer, publisher and sweeper under cargo lambda watch (127.0.0.1 only)"
port=$(free_port)
# Each function's environment is the one the templates give it at their
# defaults on this stack (devkit env: template.yaml and the
# infra/outbox.yaml it nests, in us-east-1, so the items carry the region's
# keys as in AWS). cargo lambda watch has no authorizer: the writer also
# acts as the local caller `demo` (WRITER_LOCAL_CALLER; the template never
# sets it).
functions_env=$(devkit env --table "$table" --stream "$stream" --bus "$bus" writer publisher sweeper)
start_watch "$port" "$functions_env,WRITER_LOCAL_CALLER=demo" "$state/watch.log"
pids+=("$watch_pid")
# The projector reads another table (TABLE_NAME is the read model's), so it
# runs under its own cargo lambda watch.
pport=$(free_port)
start_watch "$pport" "$(devkit env --table "$table" --stream "$stream" --bus "$bus" --read-model "$read_model" projector)" "$state/watch-projector.log"
pids+=("$watch_pid")
wait_listening "$port" "$state/watch.log"
wait_listening "$pport" "$state/watch-projector.log"

# HTTP to the writer's function URL on cargo lambda watch: METHOD PATH [BODY] [IDEMPOTENCY-KEY]
http() {
  "$python" - "$port" "$@" <<'PY'
import json, sys, urllib.request, urllib.error
port, method, path = sys.argv[1], sys.argv[2], sys.argv[3]
body = sys.argv[4].encode() if len(sys.argv) > 4 and sys.argv[4] else None
req = urllib.request.Request(f"http://127.0.0.1:{port}/lambda-url/writer{path}", data=body, method=method)
req.add_header("Content-Type", "application/json")
if len(sys.argv) > 5:
    req.add_header("Idempotency-Key", sys.argv[5])
try:
    with urllib.request.urlopen(req, timeout=60) as r:
        status, text = r.status, r.read().decode()
except urllib.error.HTTPError as e:
    status, text = e.code, e.read().decode()
print(status, text)
PY
}
order() { printf '{"customerId":"cust-%s","currency":"EUR","items":[{"sku":"BOOK-%s","quantity":%s,"unitPriceCents":1500}]}' "$1" "$1" "$1"; }

say "Creating three orders through the writer's HTTP route (POST /orders)"
ids=()
for i in 1 2 3; do
  response=$(http POST /orders "$(order "$i")" "demo-$suffix-$i")
  echo "$response" | cut -c1-160
  ids+=("$(echo "$response" | cut -d' ' -f2- | "$python" -c 'import json,sys; print(json.load(sys.stdin)["orderId"])')")
done
say "Retrying the first request with the same Idempotency-Key: the stored response, nothing new"
http POST /orders "$(order 1)" "demo-$suffix-1" | cut -c1-160
say "Bad input: 400, the field named, nothing written"
http POST /orders '{"customerId":"c","currency":"EUR","items":[{"sku":"A","quantity":0,"unitPriceCents":1}]}'
say "Paying two of them (POST /orders/{id}/payment)"
for id in "${ids[@]:0:2}"; do http POST "/orders/$id/payment" | cut -c1-160; done

say "The table: orders, their outbox events (not published yet), idempotency records"
devkit items "$table"

say "Pumping the stream into the publisher (devkit pump: the event source mapping)"
devkit pump "$table" "$port"
say "What the subscriber's queue received"
devkit receive "$subscriber" | tee "$state/received-1.txt"
say "The outbox items are gone; the orders stay"
devkit items "$table"

say "Publisher unavailable: a new order's event strands"
response=$(http POST /orders "$(order 4)")
echo "$response" | cut -c1-160
dead_port=$(free_port)   # nothing listens there
devkit pump "$table" "$dead_port" || true
say "The mapping gave up after its retries and moved on; the outbox item is still in the table"
devkit items "$table" | grep -E "^PK|OUTBOX#"
devkit pump "$table" "$port" >/dev/null   # the mapping moved on: nothing left to deliver

say "The OnFailure queue feeds the sweeper (its SQS trigger): it republishes that batch's window now, not in 24 hours"
devkit deliver "$on_failure" "$port" sweeper
devkit receive "$subscriber" | tee "$state/received-2.txt"

say "The scheduled sweep: nothing stranded; its EMF line carries OldestPendingAgeSeconds"
cargo lambda invoke sweeper --invoke-address 127.0.0.1 --invoke-port "$port" --data-file events/sweeper-scheduled.json
echo

say "The consumer: $bus_kind fed every event into the projector's queue; devkit deliver is its SQS mapping"
devkit deliver "$projector_queue" "$pport" projector
say "A sample batch with one event delivered twice (events/projector-duplicate.json): applied once, then a Duplicate"
cargo lambda invoke projector --invoke-address 127.0.0.1 --invoke-port "$pport" --data-file events/projector-duplicate.json
echo
grep -oE '"Applied":[0-9.]+,"Duplicate":[0-9.]+' "$state/watch-projector.log" | tail -1 || true
say "The read model, built from what the bus delivered (devkit read-model)"
devkit read-model "$read_model" | tee "$state/read-model.txt"

say "Summary"
delivered=$( (grep -ohE '^  [0-9A-Z]{26}' "$state"/received-*.txt || true) | wc -l)
distinct=$( (grep -ohE '^  [0-9A-Z]{26}' "$state"/received-*.txt || true) | sort -u | wc -l)
dead=$(devkit items "$table" | grep -c "dead-lettered" || true)
left=$(devkit items "$table" | grep -c "OUTBOX#" || true)
echo "orders written:      4 (3 created and 2 paid through the API, 1 recovered from the OnFailure queue)"
echo "events delivered:    $delivered ($distinct distinct event ids)"
echo "duplicates:          $((delivered - distinct))"
echo "dead letters:        $dead"
echo "outbox items left:   $left"
applied=$(grep -oE 'inbox records \(events applied\): [0-9]+' "$state/read-model.txt" | grep -oE '[0-9]+$')
echo "read model:          $applied events applied once each ($((distinct + 1)) distinct events: $distinct delivered + 1 in the sample batch)"
