#!/usr/bin/env bash
# Proves the template checks: each copy of template.yaml breaks one setting
# where outbox bugs live, and the checks must fail on every one of them.
set -uo pipefail
root=$(cd "$(dirname "$0")/../.." && pwd)
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
passed=0
failed=0

expect_failure() {
  local name=$1 expr=$2
  local copy="$work/$name.yaml"
  sed -e "$expr" "$root/template.yaml" >"$copy"
  if cmp -s "$copy" "$root/template.yaml"; then
    echo "not ok - $name: the edit changed nothing (fix the sed expression)"
    failed=$((failed + 1))
    return
  fi
  if "$root/infra/checks/check-template.sh" --rules-only "$copy" >"$work/$name.log" 2>&1; then
    echo "not ok - $name: a broken template passed the checks"
    failed=$((failed + 1))
  else
    echo "ok - $name: $(grep -m1 -E '^E[0-9]+' "$work/$name.log" || echo rejected)"
    passed=$((passed + 1))
  fi
}

expect_failure starting-position-latest 's/StartingPosition: TRIM_HORIZON/StartingPosition: LATEST/'
expect_failure no-partial-batch-response 's/FunctionResponseTypes: \[ReportBatchItemFailures\]/FunctionResponseTypes: []/'
expect_failure filter-on-event-name 's/- Pattern: .{"dynamodb"/- Pattern: '"'"'{"eventName":["INSERT"],"dynamodb"/'
expect_failure filter-matches-remove 's/"envelope":{"S":\[{"exists":true}\]},//'
expect_failure filter-matches-bookkeeping 's/,"lastError":{"S":\[{"exists":false}\]}//'
expect_failure filter-prefix-typo 's/"prefix":"OUTBOX#"/"prefix":"OUTBOX"/'
expect_failure no-bisect 's/BisectBatchOnFunctionError: true/BisectBatchOnFunctionError: false/'
expect_failure unbounded-retries '/MaximumRetryAttempts: !Ref PublisherMaximumRetryAttempts/d'
expect_failure infinite-retries-default '/PublisherMaximumRetryAttempts:/,/MaxValue/ s/MinValue: 0/MinValue: -1/'
expect_failure no-on-failure-destination '/DestinationConfig:/,/Destination: !GetAtt PublisherFailureQueue.Arn/d'
expect_failure wildcard-action 's/Action: \[dynamodb:GetItem, /Action: [dynamodb:*, /'
expect_failure on-failure-not-swept '/        OnFailureQueue:/,/              MaximumConcurrency: 2/d'
expect_failure on-failure-dlq-unalarmed 's/Value: !GetAtt OnFailureDeadLetterQueue.QueueName/Value: !GetAtt PublisherFailureQueue.QueueName/'
expect_failure alarm-topic-aws-managed-key 's/      KmsMasterKeyId: !Ref AlarmKey/      KmsMasterKeyId: alias\/aws\/sns/'
expect_failure alarm-key-without-cloudwatch 's/Principal: { Service: cloudwatch.amazonaws.com }/Principal: { Service: sns.amazonaws.com }/'
expect_failure stranded-threshold-disagrees 's/STRANDED_AFTER_SECONDS: !Ref StrandedAfterSeconds/STRANDED_AFTER_SECONDS: "3600"/'
expect_failure projector-no-partial-batch '/Queue: !GetAtt ProjectorQueue.Arn/,/MaximumConcurrency: 10/ s/FunctionResponseTypes: \[ReportBatchItemFailures\]/FunctionResponseTypes: []/'
expect_failure projector-short-visibility 's/      VisibilityTimeout: 180$/      VisibilityTimeout: 30/'
expect_failure projector-dlq-unalarmed 's/Value: !GetAtt ProjectorDeadLetterQueue.QueueName/Value: !GetAtt ProjectorQueue.QueueName/'

echo "$passed passed, $failed failed"
[ "$failed" -eq 0 ]
