#!/usr/bin/env bash
# Runs every template check (check-template.sh: sam validate, cfn-lint with
# the serverless and outbox rules, the offline translation, checkov) on the
# template as deployed in each sink mode: the default (EventBridge) and
# copies whose parameter defaults select an SNS topic, standard and FIFO.
set -euo pipefail
root=$(cd "$(dirname "$0")/../.." && pwd)
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
sns='/^  Sink:/,/Description/ s/Default: eventbridge/Default: sns/'
fifo='/^  SnsFifo:/,/Description/ s/Default: "false"/Default: "true"/'
limit='/^  MaxEventBytes:/,/Description/ s/Default: 0/Default: 262144/'
sed -e "$sns" "$root/template.yaml" >"$work/sns.yaml"
sed -e "$sns" -e "$fifo" -e "$limit" "$root/template.yaml" >"$work/sns-fifo.yaml"
for mode in sns sns-fifo; do
  if cmp -s "$work/$mode.yaml" "$root/template.yaml"; then
    echo "check-modes: the $mode edit changed nothing (fix the sed expression)" >&2
    exit 1
  fi
  echo "check-modes: Sink $mode"
  "$root/infra/checks/check-template.sh" "$work/$mode.yaml"
done
