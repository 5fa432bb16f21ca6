#!/usr/bin/env bash
# Proves the template checks rule by rule: each copy of a template (the
# reusable stack, infra/outbox.yaml, where the publisher and the sweeper
# are; or the orders example, template.yaml, where the writer and the
# projector are) breaks one setting where outbox bugs live, and the checks must reject it with
# exactly the findings the copy declares: the rule it targets first (its id
# and a fragment of its message), then any other rule that guards the same
# setting (ours, cfn-lint's or the serverless rules'). A copy fails this
# script when it passes, when a declared finding is missing, or when
# anything else is reported: a finding of any linter the checks run
# (cfn-lint's E/W/I ids, among them its parse and transform errors, the
# serverless rules' ES/WS/IS ids, ours E91xx), or any other output line
# (a translation error, a tool's warning): a copy can never pass on some
# other failure.
set -uo pipefail
root=$(cd "$(dirname "$0")/../.." && pwd)
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
copies=$work/copies
mkdir -p "$copies"
passed=0
failed=0
# The copies to check, and the findings each declares (filled by expect).
names=()
declare -A expected_of
# The template the next copies break (set before each group).
target=$root/infra/outbox.yaml
# The publisher's stream mapping, from its event name to its destination.
mapping='/^        OutboxStream:/,/Destination: !GetAtt PublisherFailureQueue.Arn/'

# expect NAME 'RULE fragment;RULE fragment…' SED-EXPRESSION…
# Writes the copy; every copy is checked at the end, in one run.
expect() {
  local name=$1 expected=$2
  shift 2
  local copy="$copies/$name.yaml" args=()
  for e in "$@"; do args+=(-e "$e"); done
  sed "${args[@]}" "$target" >"$copy"
  if cmp -s "$copy" "$target"; then
    echo "not ok - $name: the edit changed nothing (fix the sed expression)"
    failed=$((failed + 1))
    rm -f "$copy"
    return
  fi
  names+=("$name")
  expected_of[$name]=$expected
}

# judge NAME: the copy's findings in the run's log against its declaration.
judge() {
  local name=$1 expected=${expected_of[$1]}
  local findings others problems=""
  # Every finding of every linter check-template.sh --rules-only runs
  # (cfn-lint with the serverless rules and ours, parseable format) on this
  # copy's translation, as `ID message` (E0000, W2001, ES1001, WS1003, E9101…).
  findings=$(sed -nE "s#^.*/$name\.json:[0-9]+:[0-9]+:[0-9]+:[0-9]+:([A-Z]+[0-9]+):#\1 #p" "$work/run.log")
  # What else the run said of this copy: that it did not translate.
  others=$(grep -F "translate.py: $copies/$name.yaml:" "$work/run.log" || true)
  # Every declared finding is reported...
  local IFS=';'
  for want in $expected; do
    local rule=${want%% *} text=${want#* } seen=false
    while IFS= read -r line; do
      if [[ $line == "$rule "* && $line == *"$text"* ]]; then seen=true; fi
    done <<<"$findings"
    $seen || problems+=" missing [$want];"
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
  if [ -n "$others" ]; then
    problems+=" unexpected output [$(head -n 3 <<<"$others" | tr '\n' ' ')];"
  fi
  if [ -z "$findings" ] && [ -z "$others" ]; then
    problems+=" a broken template passed the checks;"
  elif [ -z "$findings" ]; then
    problems+=" no rule finding (rejected for another reason);"
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
# No mapping at all: the publisher's Events go, and with them the parameters
# only the mapping reads (cfn-lint would report them unused, W2001).
expect no-stream-mapping 'E9101 no DynamoDB stream mapping for the publisher' \
  '/^  PublisherFunction:/,/^  SweeperFunction:/ { /^      Events:/,/Destination: !GetAtt PublisherFailureQueue.Arn/d }' \
  '/^  PublisherBatchSize:/,/MaxValue: 10000/d' \
  '/^  PublisherBatchingWindowSeconds:/,/MaxValue: 300/d' \
  '/^  PublisherParallelizationFactor:/,/Raise it when IteratorAge grows/d' \
  '/^  PublisherMaximumRetryAttempts:/,/Description: Retries of a failing batch/d' \
  's/PublisherBatchSize, PublisherBatchingWindowSeconds, PublisherParallelizationFactor, //; s/, PublisherMaximumRetryAttempts\]/]/'
expect starting-position-latest 'E9101 StartingPosition must be TRIM_HORIZON' \
  "$mapping s/StartingPosition: TRIM_HORIZON/StartingPosition: LATEST/"
expect no-partial-batch-response 'E9101 FunctionResponseTypes must include ReportBatchItemFailures' \
  "$mapping s/FunctionResponseTypes: \[ReportBatchItemFailures\]/FunctionResponseTypes: []/"
expect no-bisect 'E9101 BisectBatchOnFunctionError must be true' \
  "$mapping s/BisectBatchOnFunctionError: true/BisectBatchOnFunctionError: false/"
expect unbounded-retries 'E9101 MaximumRetryAttempts must be set' \
  "$mapping { /MaximumRetryAttempts: !Ref PublisherMaximumRetryAttempts/d }" \
  '/^  PublisherMaximumRetryAttempts:/,/Description: Retries of a failing batch/d' \
  's/, PublisherMaximumRetryAttempts\]/]/'
expect infinite-retries-default 'E9101 MaximumRetryAttempts must be bounded' \
  '/PublisherMaximumRetryAttempts:/,/MaxValue/ s/MinValue: 0/MinValue: -1/'
# E9103 guards the same setting (the age bound and the sweeper's threshold
# are one parameter).
expect record-age-unset 'E9101 MaximumRecordAgeInSeconds must be set;E9103 MaximumRecordAgeInSeconds (None) must be one parameter' \
  "$mapping { /MaximumRecordAgeInSeconds: !Ref StrandedAfterSeconds/d }"
expect record-age-below-a-minute 'E9101 MaximumRecordAgeInSeconds must be bounded' \
  '/^  StrandedAfterSeconds:/,/MaxValue/ s/MinValue: 60/MinValue: 30/'
# cfn-lint-serverless's ES1001 guards the same setting (stream mappings keep
# it; translate.py exempts SQS mappings only).
expect no-on-failure-destination 'E9101 an OnFailure destination is required;ES1001 Lambda event source mapping PublisherFunctionOutboxStream should have a DestinationConfig.OnFailure.Destination' \
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
# No FilterCriteria: every write of the table reaches the publisher.
expect filter-missing 'E9101 FilterCriteria must only let outbox INSERTs through' \
  "$mapping { /^            FilterCriteria:/,/- !Ref AWS::NoValue/d }"
# A typo that leaves this region's pattern not JSON (a brace short); what
# the rule can read is then the other home-region pattern alone, which it
# reports too.
expect filter-not-json 'E9101 a filter pattern is not JSON;E9101 the two home-region patterns together' \
  's/"homeRegion":{"S":\["${AWS::Region}"\]}}}}/"homeRegion":{"S":["${AWS::Region}"]}}}/'
# E9103: one threshold for the mapping and the sweeper.
expect stranded-threshold-disagrees 'E9103 STRANDED_AFTER_SECONDS (3600) and MaximumRecordAgeInSeconds' \
  's/STRANDED_AFTER_SECONDS: !Ref StrandedAfterSeconds/STRANDED_AFTER_SECONDS: "3600"/'
# No sweeper: no function sets STRANDED_AFTER_SECONDS. E9104 knows the
# sweeper by that variable, so it finds the OnFailure queue unread too.
expect sweeper-without-stranded-threshold 'E9103 no function sets STRANDED_AFTER_SECONDS (the sweeper);E9104 PublisherFailureQueue: the OnFailure queue must be an event source of the sweeper' \
  '/^          STRANDED_AFTER_SECONDS: !Ref StrandedAfterSeconds$/d'
# E9104: the OnFailure queue feeds the sweeper.
expect on-failure-not-swept 'E9104 the OnFailure queue must be an event source of the sweeper' \
  '/        OnFailureQueue:/,/              MaximumConcurrency: 2/d'
# The OnFailure queue without a redrive policy: E9104 (the OnFailure
# queue), E9107 (an SQS-triggered queue, the sweeper's) and cfn-lint-serverless's
# ES6000 (every queue but a dead-letter queue) all guard that setting.
expect on-failure-no-redrive-policy 'E9104 PublisherFailureQueue: needs a redrive policy to a dead-letter queue;E9107 PublisherFailureQueue: an SQS-triggered queue needs a redrive policy;ES6000 SQS Queue PublisherFailureQueue should have a RedrivePolicy property' \
  '/^  PublisherFailureQueue:/,/maxReceiveCount: 10/ { /RedrivePolicy:/d; /deadLetterTargetArn: !GetAtt OnFailureDeadLetterQueue.Arn/d; /maxReceiveCount: 10/d }'
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
# An alarm that reads the Stack dimension but not the Function one (the
# functions emit both, so it reads no metric they emit).
expect alarm-without-function-dimension 'E9108 DeadLetterAlarm: an alarm on a DynamoDbOutbox metric must read the Function dimension' \
  '/^  DeadLetterAlarm:/,/AlarmActions:/ { /- { Name: Function, Value: sweeper }/d }'
expect functions-without-stack-name 'E9108 PublisherFunction: STACK_NAME must be set;E9108 SweeperFunction: STACK_NAME must be set' \
  '/^        STACK_NAME: /d'
# E9102 in the reusable stack: the sweeper's table grant (cfn-lint-serverless's
# WS1003, stars in a Lambda role's actions, guards the same setting).
expect wildcard-action-sweeper 'E9102 SweeperRole: wildcard action dynamodb:*;WS1003 IAM Role SweeperRole with Lambda as principal has policy actions with stars' \
  '0,/Action: \[dynamodb:BatchWriteItem, dynamodb:DeleteItem, dynamodb:UpdateItem\]/ s/Action: \[dynamodb:BatchWriteItem, dynamodb:DeleteItem, dynamodb:UpdateItem\]/Action: [dynamodb:*]/'
# Every action of every service ("*"), not a service's wildcard.
expect star-action-sweeper 'E9102 SweeperRole: wildcard action *;WS1003 IAM Role SweeperRole with Lambda as principal has policy actions with stars' \
  '0,/Action: \[dynamodb:BatchWriteItem, dynamodb:DeleteItem, dynamodb:UpdateItem\]/ s/Action: \[dynamodb:BatchWriteItem, dynamodb:DeleteItem, dynamodb:UpdateItem\]/Action: ["*"]/'
# A policy of its own attached to the sweeper's role (E9102 reads
# AWS::IAM::Policy and AWS::IAM::ManagedPolicy statements too).
expect wildcard-action-attached-policy 'E9102 SweeperExtraPolicy: wildcard action dynamodb:*' \
  '/^  SweeperRole:$/i\
  SweeperExtraPolicy:\
    Type: AWS::IAM::Policy\
    Properties:\
      PolicyName: extra\
      Roles: [!Ref SweeperRole]\
      PolicyDocument:\
        Version: "2012-10-17"\
        Statement:\
          - Effect: Allow\
            Action: dynamodb:*\
            Resource: !Sub "arn:${AWS::Partition}:dynamodb:${AWS::Region}:${AWS::AccountId}:table/${TableName}"'
# The publisher's table grant as NotAction: every other action allowed.
expect not-action-publisher 'E9102 PublisherRole: NotAction grants everything else' \
  's/Action: \[dynamodb:BatchWriteItem, dynamodb:DeleteItem, dynamodb:UpdateItem, dynamodb:Query, dynamodb:BatchGetItem\]/NotAction: [dynamodb:BatchWriteItem, dynamodb:DeleteItem, dynamodb:UpdateItem, dynamodb:Query, dynamodb:BatchGetItem]/'
# The orders example (template.yaml): the writer's and the projector's.
target=$root/template.yaml
# E9102: least privilege (WS1003 guards the same setting, as above).
expect wildcard-action 'E9102 WriterRole: wildcard action dynamodb:*;WS1003 IAM Role WriterRole with Lambda as principal has policy actions with stars' \
  's/Action: \[dynamodb:GetItem, /Action: [dynamodb:*, /'
# A managed policy on the writer's role (AWSLambdaBasicExecutionRole: logs
# on every log group).
expect managed-policy-writer 'E9102 WriterRole: managed policies are broader than the function needs' \
  '/^  WriterRole:/,/^    Properties:/ s|^    Properties:$|&\n      ManagedPolicyArns: [!Sub "arn:${AWS::Partition}:iam::aws:policy/service-role/AWSLambdaBasicExecutionRole"]|'
# E9107, each branch: partial batch responses, visibility timeout, a redrive
# policy, an alarmed dead-letter queue.
expect projector-no-partial-batch 'E9107 ProjectorFunctionQueue: an SQS mapping must report partial batch failures' \
  '/Queue: !GetAtt ProjectorQueue.Arn/,/MaximumConcurrency: 10/ s/FunctionResponseTypes: \[ReportBatchItemFailures\]/FunctionResponseTypes: []/'
expect projector-short-visibility 'E9107 VisibilityTimeout (30) must be at least six times' \
  's/      VisibilityTimeout: 180$/      VisibilityTimeout: 30/'
# cfn-lint-serverless's ES6000 guards the same setting.
expect projector-no-redrive-policy 'E9107 ProjectorQueue: an SQS-triggered queue needs a redrive policy;ES6000 SQS Queue ProjectorQueue should have a RedrivePolicy property' \
  '/      VisibilityTimeout: 180$/,/maxReceiveCount: 5/ { /RedrivePolicy:/d; /deadLetterTargetArn: !GetAtt ProjectorDeadLetterQueue.Arn/d; /maxReceiveCount: 5/d }'
# E9108: the projector's lag alarm on another stack's name.
expect projection-lag-alarm-other-stack "E9108 ProjectionLagAlarm: the Stack dimension must be the functions' STACK_NAME" \
  '/^  ProjectionLagAlarm:/,/AlarmActions:/ s/- { Name: Stack, Value: !Ref AWS::StackName }/- { Name: Stack, Value: orders }/'
expect projector-dlq-unalarmed 'E9107 the dead-letter queue of ProjectorQueue needs an alarm' \
  's/Value: !GetAtt ProjectorDeadLetterQueue.QueueName/Value: !GetAtt ProjectorQueue.QueueName/'

# One check-template.sh run for every copy (each tool's start-up is most of
# its time), then each copy judged on its own lines.
files=()
for name in "${names[@]}"; do files+=("$copies/$name.yaml"); done
"$root/infra/checks/check-template.sh" --rules-only --parseable "${files[@]}" >"$work/run.log" 2>&1
for name in "${names[@]}"; do judge "$name"; done
# Any line of the run that is neither progress nor a copy's finding or
# translation error (a tool's warning, a message on more than one line)
# fails the whole check: a copy can never pass on some other failure.
stray=$(grep -vE "^(check-template: |translate\.py: $copies/[a-z0-9-]+\.yaml: |.*/[a-z0-9-]+\.json:[0-9]+:[0-9]+:[0-9]+:[0-9]+:[A-Z]+[0-9]+:|$)" "$work/run.log" || true)
if [ -n "$stray" ]; then
  echo "not ok - the run printed what no copy accounts for: $(head -n 5 <<<"$stray" | tr '\n' ' ')"
  failed=$((failed + 1))
fi
echo "$passed passed, $failed failed"
[ "$failed" -eq 0 ]
