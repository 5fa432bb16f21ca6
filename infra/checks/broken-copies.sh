#!/usr/bin/env bash
# Proves the template checks rule by rule: each copy of a template (the
# reusable stack, infra/outbox.yaml, where the publisher and the sweeper
# are; or the orders example, template.yaml, where the writer and the
# projector are) breaks one setting where outbox bugs live, and the checks must reject it with
# exactly the findings the copy declares: the rule it targets first (its id
# and a fragment of its message), then any other rule that guards the same
# setting. A copy fails this script when it passes, when a declared finding
# is missing, or when anything else is reported (another rule, a warning
# such as an unused parameter, a translation error): a copy can never pass
# on some other failure.
set -uo pipefail
root=$(cd "$(dirname "$0")/../.." && pwd)
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
passed=0
failed=0
# The template the next copies break (set before each group).
target=$root/infra/outbox.yaml
# The publisher's stream mapping, from its event name to its destination.
mapping='/^        OutboxStream:/,/Destination: !GetAtt PublisherFailureQueue.Arn/'

# expect NAME 'RULE fragment;RULE fragment…' SED-EXPRESSION…
expect() {
  local name=$1 expected=$2
  shift 2
  local copy="$work/$name.yaml" args=()
  for e in "$@"; do args+=(-e "$e"); done
  sed "${args[@]}" "$target" >"$copy"
  if cmp -s "$copy" "$target"; then
    echo "not ok - $name: the edit changed nothing (fix the sed expression)"
    failed=$((failed + 1))
    return
  fi
  if "$root/infra/checks/check-template.sh" --rules-only "$copy" >"$work/$name.log" 2>&1; then
    echo "not ok - $name: a broken template passed the checks"
    failed=$((failed + 1))
    return
  fi
  local findings problems=""
  findings=$(grep -E '^[EWI][0-9]+ ' "$work/$name.log" || true)
  # Every declared finding is reported...
  local IFS=';'
  for want in $expected; do
    local rule=${want%% *} text=${want#* }
    grep -F -- "$rule " <<<"$findings" | grep -qF -- "$text" \
      || problems+=" missing [$want];"
  done
  # ...and nothing else is.
  while IFS= read -r line; do
    [ -n "$line" ] || continue
    local known=false
    for want in $expected; do
      local rule=${want%% *} text=${want#* }
      if [[ $line == "$rule "* && $line == *"$text"* ]]; then known=true; fi
    done
    $known || problems+=" unexpected [$line];"
  done <<<"$findings"
  if [ -z "$findings" ]; then
    problems+=" no rule finding (rejected for another reason: $(tail -n 3 "$work/$name.log" | tr '\n' ' '))"
  fi
  if [ -n "$problems" ]; then
    echo "not ok - $name:$problems"
    failed=$((failed + 1))
  else
    echo "ok - $name: ${expected//;/ + }"
    passed=$((passed + 1))
  fi
}

# E9101: the publisher's stream mapping (infra/outbox.yaml).
expect starting-position-latest 'E9101 StartingPosition must be TRIM_HORIZON' \
  "$mapping s/StartingPosition: TRIM_HORIZON/StartingPosition: LATEST/"
expect no-partial-batch-response 'E9101 FunctionResponseTypes must include ReportBatchItemFailures' \
  "$mapping s/FunctionResponseTypes: \[ReportBatchItemFailures\]/FunctionResponseTypes: []/"
expect no-bisect 'E9101 BisectBatchOnFunctionError must be true' \
  "$mapping s/BisectBatchOnFunctionError: true/BisectBatchOnFunctionError: false/"
expect unbounded-retries 'E9101 MaximumRetryAttempts must be set' \
  "$mapping { /MaximumRetryAttempts: !Ref PublisherMaximumRetryAttempts/d }" \
  '/^  PublisherMaximumRetryAttempts:/,/Description: Retries of a failing batch/d'
expect infinite-retries-default 'E9101 MaximumRetryAttempts must be bounded' \
  '/PublisherMaximumRetryAttempts:/,/MaxValue/ s/MinValue: 0/MinValue: -1/'
# E9103 guards the same setting (the age bound and the sweeper's threshold
# are one parameter).
expect record-age-unset 'E9101 MaximumRecordAgeInSeconds must be set;E9103 MaximumRecordAgeInSeconds (None) must be one parameter' \
  "$mapping { /MaximumRecordAgeInSeconds: !Ref StrandedAfterSeconds/d }"
expect record-age-below-a-minute 'E9101 MaximumRecordAgeInSeconds must be bounded' \
  '/^  StrandedAfterSeconds:/,/MaxValue/ s/MinValue: 60/MinValue: 30/'
expect no-on-failure-destination 'E9101 an OnFailure destination is required' \
  "$mapping { /DestinationConfig:/,/Destination: !GetAtt PublisherFailureQueue.Arn/d }"
expect filter-matches-remove 'E9101 filter pattern must be' \
  's/"envelope":{"S":\[{"exists":true}\]},//'
expect filter-matches-bookkeeping 'E9101 filter pattern must be' \
  's/,"lastError":{"S":\[{"exists":false}\]}//'
expect filter-prefix-typo 'E9101 filter pattern must be' \
  's/"prefix":"${OutboxPrefix}"/"prefix":"OUTBOX"/'
# The pattern is built from the key schema's parameters: the wrong one.
expect filter-on-partition-key 'E9101 filter pattern must be' \
  's/"Keys":{"${SortKey}"/"Keys":{"${PartitionKey}"/'
# The home-region rule's two patterns: the one for items written without a
# region loses its clause, so it admits every region's items (each region
# would publish every replicated event).
expect filter-home-region-admits-every-region 'E9101 the two home-region patterns together' \
  's/,"homeRegion":{"S":\[{"exists":false}\]}//'
# E9105 (a key DynamoDB mappings never filter on); E9101's exact pattern
# catches the same copy.
expect filter-on-event-name "E9105 filter key 'eventName';E9101 filter pattern must be" \
  's/- Pattern: !Sub .{"dynamodb"/- Pattern: !Sub '"'"'{"eventName":["INSERT"],"dynamodb"/'
# E9103: one threshold for the mapping and the sweeper.
expect stranded-threshold-disagrees 'E9103 STRANDED_AFTER_SECONDS (3600) and MaximumRecordAgeInSeconds' \
  's/STRANDED_AFTER_SECONDS: !Ref StrandedAfterSeconds/STRANDED_AFTER_SECONDS: "3600"/'
# E9104: the OnFailure queue feeds the sweeper.
expect on-failure-not-swept 'E9104 the OnFailure queue must be an event source of the sweeper' \
  '/        OnFailureQueue:/,/              MaximumConcurrency: 2/d'
# E9104 and E9107 both guard the OnFailure dead-letter queue's alarm.
expect on-failure-dlq-unalarmed 'E9104 the OnFailure dead-letter queue needs an alarm;E9107 the dead-letter queue of PublisherFailureQueue needs an alarm' \
  's/Value: !GetAtt OnFailureDeadLetterQueue.QueueName/Value: !GetAtt PublisherFailureQueue.QueueName/'
# E9104 and E9107 both require the sweeper's OnFailure mapping to report
# partial batch failures.
expect on-failure-no-partial-batch "E9104 the sweeper's SQS mapping must report partial batch failures;E9107 SweeperFunctionOnFailureQueue: an SQS mapping must report partial batch failures" \
  '/        OnFailureQueue:/,/              MaximumConcurrency: 2/ s/FunctionResponseTypes: \[ReportBatchItemFailures\]/FunctionResponseTypes: []/'
# E9106: alarm topics CloudWatch can publish to.
expect alarm-topic-aws-managed-key 'E9106 AWS managed key alias/aws/sns' \
  's/      KmsMasterKeyId: !Ref AlarmKey/      KmsMasterKeyId: alias\/aws\/sns/'
expect alarm-key-without-cloudwatch 'E9106 must let cloudwatch.amazonaws.com use it' \
  's/Principal: { Service: cloudwatch.amazonaws.com }/Principal: { Service: sns.amazonaws.com }/'
# E9108: an outbox alarm reads its own stack's metric (the Stack
# dimension, the functions' STACK_NAME).
expect alarm-without-stack-dimension 'E9108 DeadLetterAlarm: an alarm on a DynamoDbOutbox metric must read the Stack dimension' \
  '/^  DeadLetterAlarm:/,/AlarmActions:/ { /- { Name: Stack, Value: /d }'
expect functions-without-stack-name 'E9108 PublisherFunction: STACK_NAME must be set;E9108 SweeperFunction: STACK_NAME must be set' \
  '/^        STACK_NAME: /d'
# E9102 in the reusable stack: the sweeper's table grant.
expect wildcard-action-sweeper 'E9102 wildcard action dynamodb:*' \
  '0,/Action: \[dynamodb:BatchWriteItem, dynamodb:DeleteItem, dynamodb:UpdateItem\]/ s/Action: \[dynamodb:BatchWriteItem, dynamodb:DeleteItem, dynamodb:UpdateItem\]/Action: [dynamodb:*]/'
# The orders example (template.yaml): the writer's and the projector's.
target=$root/template.yaml
# E9102: least privilege.
expect wildcard-action 'E9102 wildcard action dynamodb:*' \
  's/Action: \[dynamodb:GetItem, /Action: [dynamodb:*, /'
# E9107, each branch: partial batch responses, visibility timeout, a redrive
# policy, an alarmed dead-letter queue.
expect projector-no-partial-batch 'E9107 ProjectorFunctionQueue: an SQS mapping must report partial batch failures' \
  '/Queue: !GetAtt ProjectorQueue.Arn/,/MaximumConcurrency: 10/ s/FunctionResponseTypes: \[ReportBatchItemFailures\]/FunctionResponseTypes: []/'
expect projector-short-visibility 'E9107 VisibilityTimeout (30) must be at least six times' \
  's/      VisibilityTimeout: 180$/      VisibilityTimeout: 30/'
expect projector-no-redrive-policy 'E9107 ProjectorQueue: an SQS-triggered queue needs a redrive policy' \
  '/      VisibilityTimeout: 180$/,/maxReceiveCount: 5/ { /RedrivePolicy:/d; /deadLetterTargetArn: !GetAtt ProjectorDeadLetterQueue.Arn/d; /maxReceiveCount: 5/d }'
# E9108: the projector's lag alarm on another stack's name.
expect projection-lag-alarm-other-stack "E9108 ProjectionLagAlarm: the Stack dimension must be the functions' STACK_NAME" \
  '/^  ProjectionLagAlarm:/,/AlarmActions:/ s/- { Name: Stack, Value: !Ref AWS::StackName }/- { Name: Stack, Value: orders }/'
expect projector-dlq-unalarmed 'E9107 the dead-letter queue of ProjectorQueue needs an alarm' \
  's/Value: !GetAtt ProjectorDeadLetterQueue.QueueName/Value: !GetAtt ProjectorQueue.QueueName/'

echo "$passed passed, $failed failed"
[ "$failed" -eq 0 ]
