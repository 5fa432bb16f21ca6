"""How much of a sweeper's burst one moto process serves (docs/reliability.md).

Runs under infra/local/with-local.sh (the pinned moto on 127.0.0.1, dummy
credentials, AWS_ENDPOINT_URL): creates an EventBridge bus whose rule
targets an SQS queue (the chaos run's subscriber), then `--callers` threads
send `--events` events in PutEvents calls of 10 with the functions' client
settings (a 5 s attempt timeout, 3 attempts: crates/runtime/src/aws.rs),
while `--readers` threads receive and delete the queue's messages, as the
chaos run's subscriber reader does. Every 10 s, and at the end, it prints
what was sent, the calls that failed and what the readers took out.

The sweeper sends from every shard at once: 8 shards x SEND_CONCURRENCY 5
is 40 calls in flight. Run it as the 20,000-order runs met it, and with
fewer callers:

    infra/local/with-local.sh .venv/bin/python infra/local/moto_load.py --callers 40 --readers 1
    infra/local/with-local.sh .venv/bin/python infra/local/moto_load.py --callers 8 --readers 4

and with a gate that holds each call while the queue holds more than
`--max-unread` unread events or `--in-flight` calls are at moto, giving it
up unsent once the caller's attempt timeout has passed (as the chaos
run's proxies do in front of moto, tests/support/proxy/gate.rs):

    infra/local/with-local.sh .venv/bin/python infra/local/moto_load.py --callers 40 --readers 1 --max-unread 10 --in-flight 4

Each run has its own bus, rule and queue, so runs can share one moto.
It refuses an AWS_ENDPOINT_URL outside 127.0.0.0/8.
"""

import argparse
import ipaddress
import json
import os
import sys
import threading
import time
import uuid
from urllib.parse import urlparse

import boto3
from botocore.config import Config


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--callers", type=int, default=40, help="PutEvents calls in flight")
    parser.add_argument("--readers", type=int, default=1, help="subscriber reader loops")
    parser.add_argument("--events", type=int, default=6000, help="events to send")
    parser.add_argument("--limit", type=int, default=240, help="seconds before it stops")
    parser.add_argument(
        "--max-unread",
        type=int,
        default=0,
        help="hold a call while more events than this are sent and not read "
        "(0: never); a call held past the attempt timeout is given up unsent",
    )
    parser.add_argument(
        "--in-flight",
        type=int,
        default=0,
        help="at most this many calls at moto at once, the others held "
        "(0: no limit); as --max-unread, one held too long is given up unsent",
    )
    args = parser.parse_args()

    url = os.environ.get("AWS_ENDPOINT_URL", "")
    host = urlparse(url).hostname or ""
    try:
        loopback = ipaddress.ip_address(host).is_loopback
    except ValueError:
        loopback = False
    if not loopback:
        parser.error(f"AWS_ENDPOINT_URL {url!r} is not on 127.0.0.0/8: run under infra/local/with-local.sh")
    return run(args, url)


def run(args: argparse.Namespace, url: str) -> int:
    functions = Config(
        connect_timeout=2,
        read_timeout=5,
        retries={"max_attempts": 3, "mode": "standard"},
        max_pool_connections=args.callers + 1,
    )
    patient = Config(read_timeout=60, max_pool_connections=args.readers + 1)
    events = boto3.client("events", endpoint_url=url, config=functions)
    sqs = boto3.client("sqs", endpoint_url=url, config=patient)
    name = f"moto-load-{uuid.uuid4().hex[:12]}"
    queue = sqs.create_queue(QueueName=name)["QueueUrl"]
    arn = sqs.get_queue_attributes(QueueUrl=queue, AttributeNames=["QueueArn"])
    events.create_event_bus(Name=name)
    events.put_rule(
        Name="all",
        EventBusName=name,
        EventPattern=json.dumps({"source": ["outbox.orders"]}),
    )
    events.put_targets(
        Rule="all",
        EventBusName=name,
        Targets=[{"Id": "subscriber", "Arn": arn["Attributes"]["QueueArn"]}],
    )

    lock = threading.Lock()
    counts = {
        "sent": 0,
        "failed calls": 0,
        "given up unsent": 0,
        "taken out": 0,
        "reader errors": 0,
    }
    delivered = [0]  # events of the calls that succeeded
    in_flight = threading.BoundedSemaphore(args.in_flight or args.callers)
    stop = threading.Event()

    def caller() -> None:
        while not stop.is_set():
            with lock:
                if counts["sent"] >= args.events:
                    return
                first = counts["sent"]
                counts["sent"] += 10
            entries = [
                {
                    "Source": "outbox.orders",
                    "DetailType": "OrderCreated",
                    "Detail": json.dumps({"eventId": str(first + i), "pad": "x" * 300}),
                    "EventBusName": name,
                }
                for i in range(10)
            ]
            held = time.monotonic()
            while args.max_unread and not stop.is_set():
                with lock:
                    unread = delivered[0] - counts["taken out"]
                if unread <= args.max_unread:
                    break
                if time.monotonic() - held > 5:
                    break
                time.sleep(0.05)
            left = 5 - (time.monotonic() - held)
            if left <= 0 or not in_flight.acquire(timeout=left):
                # The caller's attempt timeout passed while the call was
                # held: it is never sent (the chaos proxy's gate).
                with lock:
                    counts["given up unsent"] += 1
                    counts["sent"] -= 10
                continue
            try:
                events.put_events(Entries=entries)
                with lock:
                    delivered[0] += 10
            except Exception:
                with lock:
                    counts["failed calls"] += 1
            finally:
                in_flight.release()

    def reader() -> None:
        while not stop.is_set():
            try:
                got = sqs.receive_message(
                    QueueUrl=queue, MaxNumberOfMessages=10, WaitTimeSeconds=1
                ).get("Messages", [])
                if got:
                    with lock:
                        counts["taken out"] += len(got)
                    sqs.delete_message_batch(
                        QueueUrl=queue,
                        Entries=[
                            {"Id": str(i), "ReceiptHandle": m["ReceiptHandle"]}
                            for i, m in enumerate(got)
                        ],
                    )
            except Exception:
                with lock:
                    counts["reader errors"] += 1

    callers = [threading.Thread(target=caller, daemon=True) for _ in range(args.callers)]
    readers = [threading.Thread(target=reader, daemon=True) for _ in range(args.readers)]
    started = time.monotonic()
    for t in callers + readers:
        t.start()

    def line() -> str:
        with lock:
            shown = ", ".join(f"{k} {v}" for k, v in counts.items())
        return f"{time.monotonic() - started:5.0f} s: {shown}"

    while time.monotonic() - started < args.limit:
        time.sleep(10)
        print(line(), flush=True)
        with lock:
            sent_all = counts["sent"] >= args.events
            caught_up = counts["taken out"] >= counts["sent"] - 10 * counts["failed calls"]
        if sent_all and caught_up and not any(t.is_alive() for t in callers):
            break
    stop.set()
    print(f"callers {args.callers}, readers {args.readers}: {line()}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
