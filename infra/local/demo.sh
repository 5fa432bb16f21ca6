#!/usr/bin/env bash
# The local end-to-end demo. Run it through `make demo`, which starts a moto
# server on 127.0.0.1 and exports the loopback environment first.
set -euo pipefail
root=$(cd "$(dirname "$0")/../.." && pwd)
cd "$root"
: "${AWS_ENDPOINT_URL:?run through make demo}"
python=".venv/bin/python"
state=".local/demo"
mkdir -p "$state"

say() { printf '\n\033[1m== %s\033[0m\n' "$*"; }
free_port() { "$python" -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])'; }

table="demo-orders-$(date +%s)"
bus="demo-bus-$(date +%s)"
export TABLE_NAME="$table" EVENT_BUS_NAME="$bus" EVENT_SOURCE=outbox.orders OUTBOX_SHARDS=8 RUST_LOG=warn

say "Building the functions and outboxctl (first run compiles the AWS SDK: a few minutes)"
cargo build --quiet --locked --bins

say "Provisioning the local stack on $AWS_ENDPOINT_URL"
target/debug/outboxctl provision "$table" "$bus" outbox.orders

say "Starting the functions under cargo lambda watch (loopback only)"
port=$(free_port)
cargo lambda watch --invoke-address 127.0.0.1 --invoke-port "$port" --ignore-changes \
  --env-var "TABLE_NAME=$table,EVENT_BUS_NAME=$bus,EVENT_SOURCE=outbox.orders,OUTBOX_SHARDS=8,AWS_ENDPOINT_URL=$AWS_ENDPOINT_URL,AWS_REGION=us-east-1,AWS_ACCESS_KEY_ID=test,AWS_SECRET_ACCESS_KEY=test,AWS_EC2_METADATA_DISABLED=true" \
  >"$state/watch.log" 2>&1 &
watch_pid=$!
trap 'kill "$watch_pid" 2>/dev/null || true; wait "$watch_pid" 2>/dev/null || true' EXIT
for _ in $(seq 1 100); do
  "$python" -c "import socket,sys; socket.create_connection(('127.0.0.1', $port), 1)" 2>/dev/null && break
  sleep 0.3
done

invoke() { cargo lambda invoke "$1" --invoke-address 127.0.0.1 --invoke-port "$port" --data-file "$2" --output-format json; }
field() { "$python" -c "import json,sys; r=json.load(sys.stdin); print(json.loads(r['body'])$1)"; }
show() { "$python" -c "import json,sys; r=json.load(sys.stdin); print(r['statusCode'], r['body'])"; }

say "POST /orders (events/writer-create-order-idempotent.json)"
created=$(invoke writer events/writer-create-order-idempotent.json)
echo "$created" | show
order_id=$(echo "$created" | field "['orderId']")

say "The same request again, same Idempotency-Key: replayed, nothing new written"
invoke writer events/writer-create-order-idempotent.json | show

say "The same key with a different body: 422"
invoke writer events/writer-create-order-key-reused.json | show

say "Bad input: 400 with the field named, nothing written"
invoke writer events/writer-create-order-invalid.json | show

say "POST /orders/$order_id/payment"
sed "s/01JDQ3V7X8KZ4M2N5P6R7S8T9V/$order_id/g" events/writer-pay-order.json >"$state/pay.json"
invoke writer "$state/pay.json" | show

say "GET /orders/$order_id"
sed "s/01JDQ3V7X8KZ4M2N5P6R7S8T9V/$order_id/g" events/writer-get-order.json >"$state/get.json"
invoke writer "$state/get.json" | show

say "Items in $table: the order, its two outbox events, the idempotency records"
target/debug/outboxctl items "$table"
