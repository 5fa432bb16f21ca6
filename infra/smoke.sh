#!/usr/bin/env bash
# The smoke test of a deployed orders example (template.yaml), against YOUR
# AWS account: it is never run by `make test` or any local run.
#
#   infra/smoke.sh STACK REGION
#
# Reads the stack's outputs, creates an order and pays it through the API
# (POST /orders, POST /orders/{id}/payment, signed with SigV4 by curl), then
# waits until the order's outbox items are gone from the table (published
# and deleted by the publisher) and, with the EventBridge sink, until both
# events reached the example subscriber queue. Exits 0 when they did.
#
# Needs: the AWS CLI (v2 for profiles and SSO: credentials are taken from
# `aws configure export-credentials` when AWS_ACCESS_KEY_ID is not set) and
# curl 7.76 or newer (--aws-sigv4, --fail-with-body). The caller needs
# cloudformation:DescribeStacks, execute-api:Invoke on the API,
# dynamodb:Query on the table and, with EventBridge, sqs:ReceiveMessage and
# sqs:DeleteMessage on the subscriber queue. With ApiAuth=JWT, set SMOKE_JWT
# to a token the API accepts instead of signing.
set -euo pipefail

if [ $# -ne 2 ]; then
  echo "usage: $0 STACK REGION   (the orders example's stack, as deployed by make deploy)" >&2
  exit 2
fi
stack=$1
region=$2
wait_seconds=${SMOKE_WAIT_SECONDS:-120}

fail() { echo "smoke: $*" >&2; exit 1; }
say() { echo "smoke: $*"; }

output() {
  aws cloudformation describe-stacks --region "$region" --stack-name "$stack" \
    --query "Stacks[0].Outputs[?OutputKey=='$1'].OutputValue | [0]" --output text
}
parameter() {
  aws cloudformation describe-stacks --region "$region" --stack-name "$stack" \
    --query "Stacks[0].Parameters[?ParameterKey=='$1'].ParameterValue | [0]" --output text
}

api=$(output ApiUrl)
table=$(output TableName)
queue=$(output SubscriberQueueUrl)
auth=$(parameter ApiAuth)
if [ -z "$api" ] || [ "$api" = None ]; then
  fail "stack $stack in $region has no ApiUrl output (is it the orders example, template.yaml?)"
fi
if [ -z "$table" ] || [ "$table" = None ]; then
  fail "stack $stack in $region has no TableName output"
fi
say "API $api, table $table, ApiAuth $auth"

# How each request is authorised: SigV4 with the caller's credentials
# (ApiAuth IAM, the default), or a bearer token (ApiAuth JWT).
auth_args=()
if [ "$auth" = JWT ]; then
  [ -n "${SMOKE_JWT:-}" ] || fail "ApiAuth is JWT: set SMOKE_JWT to a token from the stack's JwtIssuer for its JwtAudience"
  auth_args=(-H "authorization: Bearer $SMOKE_JWT")
else
  if [ -z "${AWS_ACCESS_KEY_ID:-}" ]; then
    credentials=$(aws configure export-credentials --format env) \
      || fail "no AWS_ACCESS_KEY_ID, and aws configure export-credentials (AWS CLI v2) gave none"
    eval "$credentials"
  fi
  : "${AWS_SECRET_ACCESS_KEY:?AWS_ACCESS_KEY_ID is set without AWS_SECRET_ACCESS_KEY}"
  auth_args=(--aws-sigv4 "aws:amz:$region:execute-api" --user "$AWS_ACCESS_KEY_ID:$AWS_SECRET_ACCESS_KEY")
  if [ -n "${AWS_SESSION_TOKEN:-}" ]; then
    auth_args+=(-H "x-amz-security-token: $AWS_SESSION_TOKEN")
  fi
fi

# POST with a JSON body: PATH BODY IDEMPOTENCY-KEY; prints the response body.
post() {
  curl --silent --show-error --fail-with-body --max-time 30 "${auth_args[@]}" \
    -X POST "$api$1" \
    -H "content-type: application/json" -H "idempotency-key: $3" \
    --data "$2"
}

run=smoke-$(date +%s)-$$
created=$(post /orders \
  '{"customerId":"smoke-test","currency":"EUR","items":[{"sku":"SMOKE-1","quantity":1,"unitPriceCents":100}]}' \
  "$run-create") || fail "POST /orders failed: $created"
order_id=$(printf '%s' "$created" | sed -n 's/.*"orderId" *: *"\([0-9A-HJKMNP-TV-Z]\{26\}\)".*/\1/p')
[ -n "$order_id" ] || fail "POST /orders answered without an orderId: $created"
say "created order $order_id"
paid=$(post "/orders/$order_id/payment" '{}' "$run-pay") || fail "POST /orders/$order_id/payment failed: $paid"
say "paid order $order_id: two events (OrderCreated, OrderPaid) are in the outbox"

# The outbox items of the order (PK ORDER#<id>, SK OUTBOX#<event id>) are
# deleted by the publisher once published; a dead letter stays.
remaining() {
  aws dynamodb query --region "$region" --table-name "$table" --consistent-read \
    --key-condition-expression "PK = :pk AND begins_with(SK, :outbox)" \
    --expression-attribute-values "{\":pk\":{\"S\":\"ORDER#$order_id\"},\":outbox\":{\"S\":\"OUTBOX#\"}}" \
    --select COUNT --query Count --output text
}
deadline=$((SECONDS + wait_seconds))
left=$(remaining)
while [ "$left" != 0 ] && [ "$SECONDS" -lt "$deadline" ]; do
  sleep 3
  left=$(remaining)
done
if [ "$left" != 0 ]; then
  aws dynamodb query --region "$region" --table-name "$table" --consistent-read \
    --key-condition-expression "PK = :pk AND begins_with(SK, :outbox)" \
    --expression-attribute-values "{\":pk\":{\"S\":\"ORDER#$order_id\"},\":outbox\":{\"S\":\"OUTBOX#\"}}" \
    --projection-expression "SK, eventType, attempts, deadLetterReason, lastError" --output json >&2 || true
  fail "$left outbox item(s) of order $order_id still in $table after ${wait_seconds}s (above: dead-lettered ones name deadLetterReason; docs/runbook.md)"
fi
say "the outbox drained: both events published"

if [ -z "$queue" ] || [ "$queue" = None ]; then
  say "no example subscriber queue with this sink (sns: subscribe a queue to the EventTopicArn output; eventbridge-bus: the projector's FIFO subscriber reads the events)"
  say "OK"
  exit 0
fi

# Both events on the example subscriber queue (every event of ours lands
# there). Other messages are left on the queue.
declare -A seen=()
while [ "${#seen[@]}" -lt 2 ] && [ "$SECONDS" -lt "$((deadline + 60))" ]; do
  lines=$(aws sqs receive-message --region "$region" --queue-url "$queue" \
    --max-number-of-messages 10 --wait-time-seconds 10 --visibility-timeout 30 \
    --query "Messages[?contains(Body, '$order_id')].[MessageId, ReceiptHandle]" --output text)
  while read -r id handle; do
    if [ -z "$id" ] || [ "$id" = None ]; then continue; fi
    seen[$id]=1
    aws sqs delete-message --region "$region" --queue-url "$queue" --receipt-handle "$handle"
  done <<<"$lines"
done
[ "${#seen[@]}" -ge 2 ] || fail "${#seen[@]} of the 2 events of order $order_id reached the subscriber queue $queue"
say "both events of order $order_id reached the subscriber queue"
say "OK"
