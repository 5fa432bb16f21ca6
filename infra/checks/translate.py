"""Translates template.yaml (SAM) into plain CloudFormation, offline.

cfn-lint no longer expands SAM resources, so a wrong StartingPosition inside
an AWS::Serverless::Function event passes it. The translated template has the
real AWS::Lambda::EventSourceMapping, which our rules and cfn-lint then check.

usage: translate.py TEMPLATE OUT.json [TEMPLATE OUT.json ...]

Several templates translate in one process (the broken copies' check runs
dozens). A template that does not translate is reported on one line,
`translate.py: TEMPLATE: message`, no JSON is written for it, the others are
still translated, and the exit status is 1.
"""
import json
import logging
import os
import sys

# The translator asks a boto session for the region; no call is made.
os.environ.setdefault("AWS_DEFAULT_REGION", "us-east-1")
os.environ.setdefault("AWS_EC2_METADATA_DISABLED", "true")

# The translator records metrics it never publishes here, and says so when
# they are collected: one line per template after the first.
logging.getLogger("samtranslator.metrics.metrics").setLevel(logging.ERROR)

from samtranslator.model.exceptions import InvalidDocumentException
from samtranslator.translator.transform import transform
from samtranslator.yaml_helper import yaml_parse


class NoManagedPolicies:
    """The stack gives every function an explicit role: no managed policy is
    looked up, so no IAM call (and no network) is needed."""

    def load(self):
        return {}


def translate(template_path, out_path):
    with open(template_path) as f:
        template = yaml_parse(f.read())
    # What `sam package` does: local code becomes an S3 object, and a local
    # nested template (the reusable stack, checked on its own) an S3 URL.
    for resource in template.get("Resources", {}).values():
        props = resource.get("Properties") or {}
        if resource.get("Type") == "AWS::Serverless::Function" and not str(props.get("CodeUri", "")).startswith("s3://"):
            props["CodeUri"] = "s3://packaged-code/function.zip"
        location = props.get("Location")
        if resource.get("Type") == "AWS::Serverless::Application" and isinstance(location, str) and not location.startswith("https://"):
            props["Location"] = f"https://packaged-code.s3.amazonaws.com/{os.path.basename(location)}"
    parameters = {
        "AWS::Region": "us-east-1",
        "AWS::AccountId": "123456789012",
        "AWS::Partition": "aws",
        "AWS::StackName": "outbox",
        "AWS::URLSuffix": "amazonaws.com",
    }
    translated = transform(template, parameters, NoManagedPolicies())
    ignore_destination_rule_on_sqs_mappings(translated)
    with open(out_path, "w") as f:
        json.dump(translated, f, indent=1, default=str)


def ignore_destination_rule_on_sqs_mappings(template):
    """cfn-lint-serverless's ES1001 asks every event source mapping for an
    OnFailure destination, but Lambda accepts DestinationConfig only for
    stream and Kafka sources: an SQS mapping's failures go to its queue's
    redrive policy (the sweeper's OnFailure queue has one, with an alarm).
    Stream mappings keep the rule."""
    resources = template.get("Resources", {})
    queues = {name for name, r in resources.items() if r.get("Type") == "AWS::SQS::Queue"}
    for resource in resources.values():
        if resource.get("Type") != "AWS::Lambda::EventSourceMapping":
            continue
        source = (resource.get("Properties") or {}).get("EventSourceArn")
        target = source.get("Fn::GetAtt", [None])[0] if isinstance(source, dict) else None
        if target in queues:
            config = resource.setdefault("Metadata", {}).setdefault("cfn-lint", {}).setdefault("config", {})
            config.setdefault("ignore_checks", []).append("ES1001")


def main(args):
    if not args or len(args) % 2:
        sys.exit("usage: translate.py TEMPLATE OUT.json [TEMPLATE OUT.json ...]")
    failed = False
    for template_path, out_path in zip(args[::2], args[1::2]):
        try:
            translate(template_path, out_path)
        except InvalidDocumentException as e:
            failed = True
            causes = "; ".join(c.message for c in e.causes) or e.message
            print(f"translate.py: {template_path}: {causes}", file=sys.stderr)
        except Exception as e:  # a YAML error, a template the translator trips on
            failed = True
            text = " ".join(str(e).split())
            print(f"translate.py: {template_path}: {type(e).__name__}: {text}", file=sys.stderr)
    sys.exit(1 if failed else 0)


if __name__ == "__main__":
    main(sys.argv[1:])
