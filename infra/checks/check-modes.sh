#!/usr/bin/env bash
# Runs every template check (check-template.sh: sam validate, cfn-lint with
# the serverless and outbox rules, the offline translation, checkov) on both
# templates at their defaults and as deployed in each sink mode, all in one
# check-template.sh run (each tool starts once). The defaults are EventBridge; the
# copies' parameter defaults select an SNS topic: for the orders example
# (template.yaml) one it creates, standard and FIFO; for the reusable stack
# (infra/outbox.yaml) an existing FIFO topic's ARN instead of a bus. The
# eventbridge-bus copies: the example creating a Custom Event Bus, the
# reusable stack given one's ARN. The claim check's copies: the reusable
# stack creating its payload bucket, and given a team's own.
set -euo pipefail
root=$(cd "$(dirname "$0")/../.." && pwd)
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
sns='/^  Sink:/,/Description/ s/Default: eventbridge/Default: sns/'
fifo='/^  SnsFifo:/,/Description/ s/Default: "false"/Default: "true"/'
limit='/^  MaxEventBytes:/,/Description/ s/Default: 0/Default: 262144/'
custom_bus='/^  Sink:/,/Description/ s/Default: eventbridge/Default: eventbridge-bus/'
bus_arn='/^  EventBusArn:/,/Description/ s/Default: ""/Default: "arn:aws:events:us-east-1:123456789012:event-busv2\/orders\/abcdefghij0123456789abcde"/'
payload_create='/^  PayloadBucket:/,/Description/ s/Default: ""/Default: create/'
payload_own='/^  PayloadBucket:/,/Description/ s/Default: ""/Default: my-team-payloads/'
topic='/^  EventTopicArn:/,/Description/ s/Default: ""/Default: "arn:aws:sns:us-east-1:123456789012:orders-events.fifo"/'
sed -e "$sns" "$root/template.yaml" >"$work/sns.yaml"
sed -e "$sns" -e "$fifo" -e "$limit" "$root/template.yaml" >"$work/sns-fifo.yaml"
sed -e "$custom_bus" "$root/template.yaml" >"$work/custom-bus.yaml"
sed -e "$payload_create" "$root/template.yaml" >"$work/payload-bucket.yaml"
# The copies of template.yaml nest infra/outbox.yaml beside them.
mkdir -p "$work/infra"
cp "$root/infra/outbox.yaml" "$work/infra/outbox.yaml"
sed -e "$topic" -e "$limit" "$root/infra/outbox.yaml" >"$work/infra/outbox-sns-fifo.yaml"
sed -e "$bus_arn" "$root/infra/outbox.yaml" >"$work/infra/outbox-custom-bus.yaml"
sed -e "$payload_create" "$root/infra/outbox.yaml" >"$work/infra/outbox-payload-bucket.yaml"
sed -e "$payload_own" "$root/infra/outbox.yaml" >"$work/infra/outbox-own-payload-bucket.yaml"
templates=("$root/infra/outbox.yaml" "$root/template.yaml")
for mode in sns sns-fifo custom-bus payload-bucket infra/outbox-sns-fifo infra/outbox-custom-bus infra/outbox-payload-bucket infra/outbox-own-payload-bucket; do
  original=$root/template.yaml
  [[ $mode == infra/* ]] && original=$root/infra/outbox.yaml
  if cmp -s "$work/$mode.yaml" "$original"; then
    echo "check-modes: the $mode edit changed nothing (fix the sed expression)" >&2
    exit 1
  fi
  templates+=("$work/$mode.yaml")
done
"$root/infra/checks/check-template.sh" "${templates[@]}"
