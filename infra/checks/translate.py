"""Translates template.yaml (SAM) into plain CloudFormation, offline.

cfn-lint no longer expands SAM resources, so a wrong StartingPosition inside
an AWS::Serverless::Function event passes it. The translated template has the
real AWS::Lambda::EventSourceMapping, which our rules and cfn-lint then check.

usage: translate.py TEMPLATE OUT.json
"""
import json
import os
import sys

# The translator asks a boto session for the region; no call is made.
os.environ.setdefault("AWS_DEFAULT_REGION", "us-east-1")
os.environ.setdefault("AWS_EC2_METADATA_DISABLED", "true")

from samtranslator.translator.transform import transform
from samtranslator.yaml_helper import yaml_parse


class NoManagedPolicies:
    """The stack gives every function an explicit role: no managed policy is
    looked up, so no IAM call (and no network) is needed."""

    def load(self):
        return {}


def main(template_path, out_path):
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


if __name__ == "__main__":
    main(sys.argv[1], sys.argv[2])
