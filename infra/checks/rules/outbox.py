"""cfn-lint rules for the settings where outbox bugs live.

They run on the *translated* template (infra/checks/translate.py), where the
stream mapping is a real AWS::Lambda::EventSourceMapping. Each is proven by
infra/checks/broken-copies.sh, which feeds a copy of a template (infra/outbox.yaml,
the reusable stack, or template.yaml) with one setting broken and expects
the check to fail.
"""
import json
import re

from cfnlint.rules import CloudFormationLintRule, RuleMatch

# DynamoDB mappings only filter on the `dynamodb` key. Outbox keys; a
# NewImage with the envelope (a REMOVE has none: the publisher's own deletes
# drop out); no lastError, deadLetteredAt, heldBehind, claimedUntil or
# keysRepairedAt (the sweeper's bookkeeping, dead-letter, hold, claim and
# key-repair MODIFYs drop out).
OUTBOX_PATTERN = json.loads(
    '{"dynamodb":{"Keys":{"SK":{"S":[{"prefix":"OUTBOX#"}]}},'
    '"NewImage":{"envelope":{"S":[{"exists":true}]},'
    '"lastError":{"S":[{"exists":false}]},'
    '"deadLetteredAt":{"S":[{"exists":false}]},'
    '"heldBehind":{"S":[{"exists":false}]},'
    '"claimedUntil":{"N":[{"exists":false}]},'
    '"keysRepairedAt":{"N":[{"exists":false}]}}}}'
)

# The region the translation is checked in (translate.py's AWS::Region).
REGION = "us-east-1"


def _in_region(region_matcher):
    pattern = json.loads(json.dumps(OUTBOX_PATTERN))
    pattern["dynamodb"]["NewImage"]["homeRegion"] = {"S": [region_matcher]}
    return pattern


# With the home-region rule (global tables): the stack's region's items, and
# items written without a region. KeySchema::stream_filter_patterns.
OUTBOX_PATTERNS_HOME_REGION = [_in_region(REGION), _in_region({"exists": False})]


def _is_stream_mapping(props):
    """A mapping on a table's stream: the stream of a table in this template
    (`!GetAtt T.StreamArn`), or a stream ARN given as a parameter (the
    reusable stack, infra/outbox.yaml, takes an existing table's)."""
    arn = props.get("EventSourceArn")
    if not isinstance(arn, dict):
        return False
    if "Fn::GetAtt" in arn:
        return arn["Fn::GetAtt"][1] == "StreamArn"
    return isinstance(arn.get("Ref"), str) and arn["Ref"].endswith("StreamArn")


def _nests_a_stack(cfn):
    """Whether the template nests another (the orders example nests the
    reusable stack, which has the publisher and the sweeper; that template
    is checked on its own)."""
    return bool(cfn.get_resources(["AWS::CloudFormation::Stack"]))


def _holds(cfn, name):
    """A condition `Fn::Equals [Ref Parameter, literal]` at the parameter's
    default; None when it is not of that shape."""
    condition = cfn.template.get("Conditions", {}).get(name)
    if not isinstance(condition, dict) or "Fn::Equals" not in condition:
        return None
    parameters = cfn.template.get("Parameters", {})

    def side(value):
        if isinstance(value, dict) and "Ref" in value:
            return str(parameters.get(value["Ref"], {}).get("Default"))
        return str(value)

    left, right = condition["Fn::Equals"]
    return side(left) == side(right)


def _filters(cfn, props):
    """The mapping's filters, each `Fn::If` chosen at the parameters'
    defaults (AWS::NoValue dropped)."""
    chosen = []
    for f in (props.get("FilterCriteria") or {}).get("Filters") or []:
        if isinstance(f, dict) and "Fn::If" in f:
            name, then, otherwise = f["Fn::If"]
            f = then if _holds(cfn, name) else otherwise
            if isinstance(f, dict) and f.get("Ref") == "AWS::NoValue":
                continue
        chosen.append(f)
    return chosen


def _with_defaults(cfn, value):
    """A string, or `Fn::Sub` of a string whose every variable is a
    parameter (or AWS::Region), resolved to the parameters' defaults (and
    REGION); None otherwise."""
    if isinstance(value, str):
        return value
    if isinstance(value, dict) and isinstance(value.get("Fn::Sub"), str):
        parameters = cfn.template.get("Parameters", {})
        unknown = []

        def default(match):
            name = match.group(1)
            if name == "AWS::Region":
                return REGION
            if name not in parameters or "Default" not in parameters[name]:
                unknown.append(name)
                return ""
            return str(parameters[name]["Default"])

        text = re.sub(r"\$\{([^}!]+)\}", default, value["Fn::Sub"])
        return None if unknown else text
    return None


def _parameter_bounds(cfn, value):
    """A literal, or a Ref to a parameter: (default, min) of what it can be."""
    if isinstance(value, dict) and "Ref" in value:
        param = cfn.template.get("Parameters", {}).get(value["Ref"], {})
        return param.get("Default"), param.get("MinValue")
    return value, value


class OutboxStreamMapping(CloudFormationLintRule):
    id = "E9101"
    shortdesc = "Outbox stream mapping"
    description = (
        "The publisher's DynamoDB stream mapping starts at TRIM_HORIZON, reports partial batch "
        "failures, bisects, has bounded retries and record age, an OnFailure destination, and "
        "filters on INSERT of OUTBOX# keys only"
    )
    tags = ["outbox"]

    def match(self, cfn):
        matches = []
        mappings = {
            name: res.get("Properties", {})
            for name, res in cfn.get_resources(["AWS::Lambda::EventSourceMapping"]).items()
            if _is_stream_mapping(res.get("Properties", {}))
        }
        if not mappings and not _nests_a_stack(cfn):
            matches.append(RuleMatch(["Resources"], "no DynamoDB stream mapping for the publisher"))
        for name, props in mappings.items():
            path = ["Resources", name, "Properties"]

            def fail(key, message):
                matches.append(RuleMatch(path + [key], f"{name}: {message}"))

            if props.get("StartingPosition") != "TRIM_HORIZON":
                fail("StartingPosition", "StartingPosition must be TRIM_HORIZON (LATEST can miss records written while the mapping starts)")
            if "ReportBatchItemFailures" not in (props.get("FunctionResponseTypes") or []):
                fail("FunctionResponseTypes", "FunctionResponseTypes must include ReportBatchItemFailures (otherwise the partial batch response is ignored)")
            if props.get("BisectBatchOnFunctionError") is not True:
                fail("BisectBatchOnFunctionError", "BisectBatchOnFunctionError must be true")
            for key, lowest in (("MaximumRetryAttempts", 0), ("MaximumRecordAgeInSeconds", 60)):
                if key not in props:
                    fail(key, f"{key} must be set (the default, -1, retries a bad record for 24 hours)")
                    continue
                default, minimum = _parameter_bounds(cfn, props[key])
                for v in (default, minimum):
                    if v is None or int(v) < lowest:
                        fail(key, f"{key} must be bounded (at least {lowest}, never -1)")
                        break
            if not (props.get("DestinationConfig", {}).get("OnFailure", {}).get("Destination")):
                fail("DestinationConfig", "an OnFailure destination is required")
            filters = _filters(cfn, props)
            if not filters:
                fail("FilterCriteria", "FilterCriteria must only let outbox INSERTs through")
            patterns = []
            for f in filters:
                # A pattern built from the key schema's parameters is
                # checked with their defaults (today's names).
                try:
                    pattern = json.loads(_with_defaults(cfn, f.get("Pattern")) or "")
                except (TypeError, ValueError):
                    fail("FilterCriteria", "a filter pattern is not JSON")
                    continue
                patterns.append(pattern)
            # One pattern (no home-region rule), or the two of the rule.
            if patterns and patterns != [OUTBOX_PATTERN] and patterns != OUTBOX_PATTERNS_HOME_REGION:
                for pattern in patterns:
                    if pattern != OUTBOX_PATTERN and pattern not in OUTBOX_PATTERNS_HOME_REGION:
                        fail("FilterCriteria", f"filter pattern must be {json.dumps(OUTBOX_PATTERN)}, alone or as the two home-region patterns (outbox inserts only: the publisher's deletes and the sweeper's updates share the keys)")
                        break
                else:
                    fail("FilterCriteria", "filter pattern must be the two home-region patterns together (this region's items, and items without a region), or the plain one alone")
        return matches


class NoWildcardActions(CloudFormationLintRule):
    id = "E9102"
    shortdesc = "Least-privilege IAM"
    description = "No IAM statement allows '*' or 'service:*' actions"
    tags = ["outbox", "iam"]

    def match(self, cfn):
        matches = []
        for name, res in cfn.get_resources(["AWS::IAM::Role", "AWS::IAM::Policy", "AWS::IAM::ManagedPolicy"]).items():
            props = res.get("Properties", {})
            documents = [p.get("PolicyDocument", {}) for p in props.get("Policies", [])]
            if "PolicyDocument" in props:
                documents.append(props["PolicyDocument"])
            for document in documents:
                for statement in document.get("Statement", []):
                    actions = statement.get("Action", [])
                    actions = actions if isinstance(actions, list) else [actions]
                    for action in actions:
                        if isinstance(action, str) and (action == "*" or action.endswith(":*")):
                            matches.append(RuleMatch(["Resources", name], f"{name}: wildcard action {action}"))
                    if statement.get("NotAction"):
                        matches.append(RuleMatch(["Resources", name], f"{name}: NotAction grants everything else"))
            if props.get("ManagedPolicyArns"):
                matches.append(RuleMatch(["Resources", name], f"{name}: managed policies are broader than the function needs"))
        return matches


class StrandedThresholdAgrees(CloudFormationLintRule):
    id = "E9103"
    shortdesc = "One threshold for the mapping and the sweeper"
    description = "The mapping's MaximumRecordAgeInSeconds and the sweeper's STRANDED_AFTER_SECONDS come from the same parameter"
    tags = ["outbox"]

    def match(self, cfn):
        matches = []
        ages = [
            res.get("Properties", {}).get("MaximumRecordAgeInSeconds")
            for res in cfn.get_resources(["AWS::Lambda::EventSourceMapping"]).values()
            if _is_stream_mapping(res.get("Properties", {}))
        ]
        stranded = [
            (name, res.get("Properties", {}).get("Environment", {}).get("Variables", {}).get("STRANDED_AFTER_SECONDS"))
            for name, res in cfn.get_resources(["AWS::Lambda::Function"]).items()
            if "STRANDED_AFTER_SECONDS" in res.get("Properties", {}).get("Environment", {}).get("Variables", {})
        ]
        if not stranded and not _nests_a_stack(cfn):
            matches.append(RuleMatch(["Resources"], "no function sets STRANDED_AFTER_SECONDS (the sweeper)"))
        for name, value in stranded:
            for age in ages:
                if value != age or not (isinstance(value, dict) and "Ref" in value):
                    matches.append(RuleMatch(["Resources", name], f"{name}: STRANDED_AFTER_SECONDS ({value}) and MaximumRecordAgeInSeconds ({age}) must be one parameter"))
        return matches


def _ref_name(value):
    """The resource a Ref or Fn::GetAtt points at, or None."""
    if isinstance(value, dict):
        if "Ref" in value:
            return value["Ref"]
        if "Fn::GetAtt" in value:
            target = value["Fn::GetAtt"]
            return target[0] if isinstance(target, list) else str(target).split(".")[0]
    return None


def _alarmed(cfn):
    """The resources some alarm watches (a dimension naming their attribute)."""
    return {
        dimension.get("Value", {}).get("Fn::GetAtt", [None])[0]
        for res in cfn.get_resources(["AWS::CloudWatch::Alarm"]).values()
        for dimension in res.get("Properties", {}).get("Dimensions", [])
        if isinstance(dimension.get("Value"), dict)
    }


class OnFailureQueueFeedsTheSweeper(CloudFormationLintRule):
    id = "E9104"
    shortdesc = "The OnFailure queue feeds the sweeper"
    description = (
        "The publisher mapping's OnFailure queue is read by the sweeper (an SQS mapping that "
        "reports partial batch failures, on a function that sets STRANDED_AFTER_SECONDS), and "
        "the queue redrives to a dead-letter queue that an alarm watches"
    )
    tags = ["outbox"]

    def match(self, cfn):
        matches = []
        resources = cfn.template.get("Resources", {})
        mappings = cfn.get_resources(["AWS::Lambda::EventSourceMapping"])
        queues = set()
        for res in mappings.values():
            props = res.get("Properties", {})
            if _is_stream_mapping(props):
                destination = props.get("DestinationConfig", {}).get("OnFailure", {}).get("Destination")
                if _ref_name(destination):
                    queues.add(_ref_name(destination))
        sweepers = {
            name
            for name, res in cfn.get_resources(["AWS::Lambda::Function"]).items()
            if "STRANDED_AFTER_SECONDS" in res.get("Properties", {}).get("Environment", {}).get("Variables", {})
        }
        alarmed = _alarmed(cfn)
        for queue in sorted(queues):
            readers = [
                props
                for props in (res.get("Properties", {}) for res in mappings.values())
                if _ref_name(props.get("EventSourceArn")) == queue
                and _ref_name(props.get("FunctionName")) in sweepers
            ]
            if not readers:
                matches.append(RuleMatch(["Resources", queue], f"{queue}: the OnFailure queue must be an event source of the sweeper (otherwise abandoned batches wait a day)"))
            for props in readers:
                if "ReportBatchItemFailures" not in (props.get("FunctionResponseTypes") or []):
                    matches.append(RuleMatch(["Resources", queue], f"{queue}: the sweeper's SQS mapping must report partial batch failures"))
            matches.extend(_dead_letter_queue_matches(
                queue, resources.get(queue, {}).get("Properties", {}), alarmed,
                f"{queue}: needs a redrive policy to a dead-letter queue",
                "the OnFailure dead-letter queue needs an alarm"))
        return matches


class DynamoDbFiltersUseOnlyTheDynamodbKey(CloudFormationLintRule):
    id = "E9105"
    shortdesc = "DynamoDB stream filters on the dynamodb key only"
    description = (
        "Lambda's DynamoDB event source mappings only support filtering on the `dynamodb` key; "
        "a pattern on eventName (or any other top-level key) may match nothing, and then "
        "nothing is ever published"
    )
    tags = ["outbox"]

    def match(self, cfn):
        matches = []
        for name, res in cfn.get_resources(["AWS::Lambda::EventSourceMapping"]).items():
            props = res.get("Properties", {})
            if not _is_stream_mapping(props):
                continue
            for f in _filters(cfn, props):
                try:
                    pattern = json.loads(_with_defaults(cfn, f.get("Pattern")) or "")
                except (TypeError, ValueError):
                    continue
                for key in pattern if isinstance(pattern, dict) else []:
                    if key != "dynamodb":
                        matches.append(RuleMatch(["Resources", name, "Properties", "FilterCriteria"], f"{name}: filter key {key!r}: DynamoDB mappings only filter on the dynamodb key"))
        return matches


class AlarmTopicsCanBeReached(CloudFormationLintRule):
    id = "E9106"
    shortdesc = "Alarm topics CloudWatch can publish to"
    description = (
        "Every SNS topic an alarm notifies is encrypted with a customer managed key: CloudWatch "
        "cannot use the AWS managed alias/aws/sns key, so its actions would fail silently"
    )
    tags = ["outbox", "alarms"]

    def match(self, cfn):
        matches = []
        resources = cfn.template.get("Resources", {})
        targets = set()
        for res in cfn.get_resources(["AWS::CloudWatch::Alarm"]).values():
            props = res.get("Properties", {})
            for key in ("AlarmActions", "OKActions", "InsufficientDataActions"):
                for action in props.get(key) or []:
                    if _ref_name(action):
                        targets.add(_ref_name(action))
        for name in sorted(targets):
            topic = resources.get(name, {})
            if topic.get("Type") != "AWS::SNS::Topic":
                continue
            key = topic.get("Properties", {}).get("KmsMasterKeyId")
            if isinstance(key, str) and key.startswith("alias/aws/"):
                matches.append(RuleMatch(["Resources", name, "Properties", "KmsMasterKeyId"], f"{name}: alarms cannot publish to a topic encrypted with the AWS managed key {key}; use a customer managed key whose policy admits cloudwatch.amazonaws.com"))
            elif _ref_name(key) and resources.get(_ref_name(key), {}).get("Type") == "AWS::KMS::Key":
                policy = resources[_ref_name(key)].get("Properties", {}).get("KeyPolicy", {})
                admitted = any(
                    "cloudwatch.amazonaws.com" in json.dumps(st.get("Principal", {}))
                    and st.get("Effect") == "Allow"
                    for st in policy.get("Statement", [])
                )
                if not admitted:
                    matches.append(RuleMatch(["Resources", _ref_name(key)], f"{_ref_name(key)}: the key of alarm topic {name} must let cloudwatch.amazonaws.com use it"))
        return matches


class SqsConsumersReportAndDeadLetter(CloudFormationLintRule):
    id = "E9107"
    shortdesc = "SQS-triggered functions report failures and dead-letter"
    description = (
        "Every SQS event source mapping reports partial batch failures (otherwise one bad "
        "message retries its whole batch), its queue's visibility timeout is at least six times "
        "the function's timeout, and the queue redrives to a dead-letter queue an alarm watches"
    )
    tags = ["outbox", "consumer"]

    def match(self, cfn):
        matches = []
        resources = cfn.template.get("Resources", {})
        alarmed = _alarmed(cfn)
        for name, res in cfn.get_resources(["AWS::Lambda::EventSourceMapping"]).items():
            props = res.get("Properties", {})
            queue = _ref_name(props.get("EventSourceArn"))
            if resources.get(queue, {}).get("Type") != "AWS::SQS::Queue":
                continue
            if "ReportBatchItemFailures" not in (props.get("FunctionResponseTypes") or []):
                matches.append(RuleMatch(["Resources", name], f"{name}: an SQS mapping must report partial batch failures (ReportBatchItemFailures)"))
            queue_props = resources[queue].get("Properties", {})
            function = resources.get(_ref_name(props.get("FunctionName")), {})
            timeout = function.get("Properties", {}).get("Timeout", 3)
            visibility = queue_props.get("VisibilityTimeout", 30)
            if isinstance(timeout, int) and isinstance(visibility, int) and visibility < 6 * timeout:
                matches.append(RuleMatch(["Resources", queue], f"{queue}: VisibilityTimeout ({visibility}) must be at least six times the function's timeout ({timeout})"))
            matches.extend(_dead_letter_queue_matches(
                queue, queue_props, alarmed,
                f"{queue}: an SQS-triggered queue needs a redrive policy to a dead-letter queue",
                f"the dead-letter queue of {queue} needs an alarm"))
        return matches


def _dead_letter_queue_matches(queue, queue_props, alarmed, no_redrive, no_alarm):
    """A queue's redrive policy to a dead-letter queue, and that queue's
    alarm: the match `no_redrive` on the queue without one, `no_alarm` on a
    dead-letter queue no alarm reads."""
    dlq = _ref_name(queue_props.get("RedrivePolicy", {}).get("deadLetterTargetArn"))
    if not dlq:
        return [RuleMatch(["Resources", queue], no_redrive)]
    if dlq not in alarmed:
        return [RuleMatch(["Resources", dlq], f"{dlq}: {no_alarm}")]
    return []


def _alarm_metrics(props):
    """(namespace, dimensions) of each metric an alarm reads: its own, or
    each of its metric-math `Metrics` with a `MetricStat`."""
    if "Namespace" in props:
        yield props.get("Namespace"), props.get("Dimensions") or []
    for metric in props.get("Metrics") or []:
        stat = (metric or {}).get("MetricStat", {}).get("Metric", {})
        if stat:
            yield stat.get("Namespace"), stat.get("Dimensions") or []


class MetricsNameTheirStack(CloudFormationLintRule):
    id = "E9108"
    shortdesc = "Outbox metrics are read with their stack's Stack dimension"
    description = (
        "The functions emit every DynamoDbOutbox metric with the dimensions Stack (their "
        "STACK_NAME) and Function: every function sets STACK_NAME, and every alarm on a "
        "DynamoDbOutbox metric reads the Stack dimension with the functions' STACK_NAME, so "
        "that two outbox stacks in one account never read each other's metrics"
    )
    tags = ["outbox", "alarms"]

    def match(self, cfn):
        matches = []
        names = {}
        for name, res in cfn.get_resources(["AWS::Lambda::Function"]).items():
            variables = res.get("Properties", {}).get("Environment", {}).get("Variables", {})
            if "STACK_NAME" not in variables:
                matches.append(RuleMatch(["Resources", name], f"{name}: STACK_NAME must be set (the Stack dimension of its metrics)"))
            else:
                names[json.dumps(variables["STACK_NAME"], sort_keys=True)] = name
        for name, res in cfn.get_resources(["AWS::CloudWatch::Alarm"]).items():
            for namespace, dimensions in _alarm_metrics(res.get("Properties", {})):
                if namespace != "DynamoDbOutbox":
                    continue
                values = {d.get("Name"): d.get("Value") for d in dimensions if isinstance(d, dict)}
                if "Stack" not in values:
                    matches.append(RuleMatch(["Resources", name], f"{name}: an alarm on a DynamoDbOutbox metric must read the Stack dimension (without it, it reads no metric the functions emit)"))
                elif names and json.dumps(values["Stack"], sort_keys=True) not in names:
                    matches.append(RuleMatch(["Resources", name], f"{name}: the Stack dimension must be the functions' STACK_NAME"))
                if "Function" not in values:
                    matches.append(RuleMatch(["Resources", name], f"{name}: an alarm on a DynamoDbOutbox metric must read the Function dimension"))
        return matches
