"""A Python subscriber of the outbox's SNS topic, as docs/events.md ("Large
events") shows it: the SQS Extended Client on the topic's raw-delivery
queue. Receives the queue's messages (up to 10) and prints their bodies as
a JSON list: for a claim check, the whole envelope the client fetched from
S3. It never deletes the object (delete_payload_from_s3 stays off: other
subscribers share it). Loopback only: the environment's AWS_ENDPOINT_URL.

usage: extended_client.py QUEUE_URL
"""
import json
import os
import sys

import boto3
import sqs_extended_client  # noqa: F401  (its SQS client reads pointers)


def main(queue_url):
    if not os.environ.get("AWS_ENDPOINT_URL", "").startswith("http://127."):
        sys.exit("extended_client.py: AWS_ENDPOINT_URL must be a loopback endpoint")
    sqs = boto3.client("sqs")
    response = sqs.receive_message(
        QueueUrl=queue_url,
        MaxNumberOfMessages=10,
        MessageAttributeNames=["All"],
        WaitTimeSeconds=1,
    )
    print(json.dumps([m["Body"] for m in response.get("Messages", [])]))


if __name__ == "__main__":
    main(sys.argv[1])
