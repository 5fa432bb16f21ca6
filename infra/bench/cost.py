"""The cost of one million orders created and paid (two events each), from
what the benches count (.local/bench/*.json, written by `cargo bench --bench
aws_calls`; the handler's CPU per record from criterion's output when
present) and the prices and assumptions in infra/bench/prices.json. Prints
Markdown. Three designs on the same workload:

  ours       - batched PutEvents (10 per call) and BatchWriteItem deletes (25)
  card       - the design card's publisher: one PutEvents and one DeleteItem per event
  pipes      - EventBridge Pipes, stream source -> bus target; outbox items
               expire by TTL (no publisher, no pending index, no sweeper)

usage: cost.py BENCH_DIR PRICES_JSON
"""
import json
import math
import pathlib
import re
import sys

ORDERS = 1_000_000
EVENTS = 2 * ORDERS
KB = 1024


def units(size, unit):
    return max(1, math.ceil(size / unit))


def refuse(message):
    sys.exit(f"cost.py: {message}; run `make bench` first")


def read_json(path):
    if not path.exists():
        refuse(f"{path} is missing")
    return json.loads(path.read_text())


def criterion(path, bench):
    """The median time (µs) criterion printed for `bench` in `path`."""
    if not path.exists():
        refuse(f"{path} is missing (criterion's output)")
    m = re.search(re.escape(bench) + r"\s+time:\s+\[\S+ \S+ (\S+) (\S+)", path.read_text())
    if not m:
        refuse(f"no '{bench}' figure in {path}")
    return float(m.group(1)) * {"ns": 1e-3, "µs": 1, "us": 1, "ms": 1e3, "s": 1e6}[m.group(2)]


def records_per_invocation(arrival, batch_size):
    """Records per publisher invocation under the stated arrival: the
    mapping polls each shard `polls_per_second` times a second and invokes
    with what arrived since (no batching window), one record at least, the
    batch size at most."""
    events_per_second = 2 * arrival["orders_per_day"] / 86_400
    per_poll = events_per_second / arrival["stream_shards"] / arrival["polls_per_second"]
    return min(batch_size, max(1.0, per_poll))


def main():
    bench = pathlib.Path(sys.argv[1])
    prices = json.loads(pathlib.Path(sys.argv[2]).read_text())
    inputs = read_json(bench / "cost-inputs.json")
    publisher = read_json(bench / "publisher-calls.json")
    a = prices["assumptions"]
    lat = a["latency_ms"]
    sizes = inputs["item_bytes"]
    meta, outbox, idem = sizes["order_meta"], sizes["outbox_item"], sizes["idempotency_record"]
    envelope = sizes["envelope"]
    key_share = a["idempotency_key_share"]

    # Handler CPU, measured by criterion (`make bench` writes both files):
    # the whole publisher invocation per record, and the writer's create
    # transaction build. No fallback: a missing input stops the model.
    cpu_us = criterion(bench / "decode.txt", "publisher_invocation_instant_sink/100") / 100
    writer_cpu_us = criterion(bench / "transaction.txt", "writer_build_create_order_transaction")

    # --- DynamoDB units per order (create + pay), from the measured sizes.
    # Transactional writes cost 2 units per KB; the pending index (GSI1,
    # projection ALL) is written with the outbox item, at 1 unit per KB.
    tx_create = 2 * units(meta, KB) + 2 * units(outbox, KB) + key_share * 2 * units(idem, KB)
    tx_pay = 2 * units(meta, KB) + 2 * units(outbox, KB) + key_share * 2 * units(idem, KB)
    gsi_put = 2 * units(outbox, KB)  # both events enter the pending index
    reads_pay = units(meta, 4 * KB)  # the strongly consistent GetItem of pay
    delete = 2 * (units(outbox, KB) + units(outbox, KB))  # both events: item + index entry
    writer_wru = ORDERS * (tx_create + tx_pay + gsi_put)
    writer_rru = ORDERS * reads_pay

    dd = prices["dynamodb"]
    lam = prices["lambda"]
    gbs_price = lam["gb_second"][lam["architecture"]]

    def lambda_cost(invocations, ms, memory_mb):
        billed_ms = math.ceil(ms)
        gb_s = invocations * billed_ms / 1000 * memory_mb / 1024
        return invocations * lam["requests_per_million"] / 1e6 + gb_s * gbs_price, gb_s

    # Writer: create = one transaction; pay = one read + one transaction.
    create_ms = lat["TransactWriteItems"] + writer_cpu_us / 1000 + a["lambda_overhead_ms"]
    pay_ms = lat["GetItem"] + lat["TransactWriteItems"] + writer_cpu_us / 1000 + a["lambda_overhead_ms"]
    w_mem = a["memory_mb"]["writer"]
    writer_create, gbs_c = lambda_cost(ORDERS, create_ms, w_mem)
    writer_pay, gbs_p = lambda_cost(ORDERS, pay_ms, w_mem)

    # Publisher (ours). The bench measures full batches (every event
    # committed before the mapping reads); the calls per invocation follow
    # from the API limits (10 entries per PutEvents, 25 per BatchWriteItem),
    # checked here against that measurement, and the records per
    # invocation from the stated arrival pattern.
    full = publisher["events"] / publisher["invocations"]
    expected = (math.ceil(full / 10) * publisher["invocations"], math.ceil(full / 25) * publisher["invocations"])
    measured = (publisher["put_events"], publisher["batch_write_item"])
    if expected != measured:
        refuse(f"the measured full batches ({measured}) disagree with the call arithmetic ({expected})")
    arrival = a["arrival"]
    batch = records_per_invocation(arrival, publisher["batch_size"])
    invocations = EVENTS / batch
    put_per_inv = math.ceil(batch / 10)
    bw_per_inv = math.ceil(batch / 25)
    pub_ms = put_per_inv * lat["PutEvents"] + bw_per_inv * lat["BatchWriteItem"] \
        + batch * cpu_us / 1000 + a["lambda_overhead_ms"]
    p_mem = a["memory_mb"]["publisher"]
    pub_ours, gbs_ours = lambda_cost(invocations, pub_ms, p_mem)
    # The design card's publisher: one PutEvents and one DeleteItem per event.
    card_ms = batch * (lat["PutEvents"] + lat["DeleteItem"]) + batch * cpu_us / 1000 + a["lambda_overhead_ms"]
    pub_card, gbs_card = lambda_cost(invocations, card_ms, p_mem)
    # Cold starts: the calls the bench saw besides the sends and deletes,
    # per cold start (measured), times the assumed cold starts.
    cold_calls = publisher["other_calls"] / max(1, publisher["cold_starts"])
    cold_starts = arrival["cold_starts_per_million_orders"]

    chunks = units(envelope, prices["eventbridge"]["chunk_bytes"])
    eb = EVENTS * chunks * prices["eventbridge"]["custom_events_per_million"] / 1e6
    pipes = EVENTS * units(envelope, prices["pipes"]["chunk_bytes"]) * prices["pipes"]["requests_per_million"] / 1e6
    sqs_req = EVENTS * (1 + 2 / a["sqs_receive_batch"])  # send + batched receive and delete
    sqs = sqs_req * prices["sqs"]["requests_per_million"] / 1e6
    logs_gb = (2 * ORDERS * a["log_bytes_per_invocation"]["writer"]
               + invocations * a["log_bytes_per_invocation"]["publisher"]) / 1024 ** 3
    logs = logs_gb * prices["cloudwatch"]["logs_ingestion_per_gb"]
    logs_card = logs  # same invocations, same lines
    logs_pipes = 2 * ORDERS * a["log_bytes_per_invocation"]["writer"] / 1024 ** 3 * prices["cloudwatch"]["logs_ingestion_per_gb"]
    metrics = a["custom_metrics"] * prices["cloudwatch"]["custom_metric_month"]

    wru = lambda n: n * dd["write_request_units_per_million"] / 1e6
    rru = lambda n: n * dd["read_request_units_per_million"] / 1e6
    ddb_writer = wru(writer_wru) + rru(writer_rru)
    ddb_delete = wru(ORDERS * delete)
    # Pipes: no pending index (nothing would remove its entries), no deletes (TTL is free).
    ddb_pipes = wru(ORDERS * (tx_create + tx_pay)) + rru(writer_rru)

    rows = [
        ("DynamoDB: the writer's transactions (and the pending index)", ddb_writer, ddb_writer, ddb_pipes,
         "computed from measured item sizes"),
        ("DynamoDB: deleting published items (item + index entry)", ddb_delete, ddb_delete, 0.0,
         "computed; Pipes: TTL deletes are free"),
        ("DynamoDB Streams read by Lambda or Pipes", 0.0, 0.0, 0.0, "free"),
        ("Lambda: writer (2M requests)", writer_create + writer_pay, writer_create + writer_pay,
         writer_create + writer_pay, "computed: CPU measured, latencies assumed"),
        ("Lambda: publisher", pub_ours, pub_card, 0.0,
         "computed: invocations from the assumed arrival, calls per invocation from the API limits "
         "(checked against the measured full batches), CPU measured, latencies assumed"),
        ("EventBridge Pipes requests", 0.0, 0.0, pipes, "computed"),
        ("EventBridge PutEvents (per 64 KB chunk)", eb, eb, eb, "computed from the measured envelope size"),
        ("SQS: the subscriber queue", sqs, sqs, sqs, "computed"),
        ("CloudWatch Logs ingestion", logs, logs_card, logs_pipes, "assumed bytes per invocation"),
    ]
    totals = [sum(r[i] for r in rows) for i in (1, 2, 3)]

    print(f"One million orders created and paid: {EVENTS:,} events. {prices['region']}, list prices as of "
          f"{prices['as_of']} (infra/bench/prices.json), Lambda on {lam['architecture']}, "
          f"every request with an Idempotency-Key ({key_share:.0%}).\n")
    print("| cost | ours | design card publisher | EventBridge Pipes | how |")
    print("|---|---|---|---|---|")
    for name, ours, card, pipe, how in rows:
        print(f"| {name} | ${ours:,.2f} | ${card:,.2f} | ${pipe:,.2f} | {how} |")
    print(f"| **total** | **${totals[0]:,.2f}** | **${totals[1]:,.2f}** | **${totals[2]:,.2f}** | |")
    print(f"| per month, whatever the volume: {a['custom_metrics']} custom metrics (EMF) | "
          f"${metrics:,.2f} | ${metrics:,.2f} | – | |\n")
    print("Inputs:\n")
    print(f"- item sizes (bytes, as DynamoDB counts them, measured): order {meta}, outbox item {outbox}, "
          f"idempotency record {idem}, envelope {envelope}")
    print(f"- write units per order: create transaction {tx_create:g}, pay transaction {tx_pay:g}, "
          f"pending index {gsi_put:g}, deletes {delete:g}; read units per order {reads_pay:g}")
    print(f"- arrival (assumed): {arrival['orders_per_day']:,} orders a day, evenly, on "
          f"{arrival['stream_shards']} stream shard(s) polled {arrival['polls_per_second']} times a second, "
          f"no batching window: {batch:.1f} records per publisher invocation, {invocations:,.0f} invocations, "
          f"{put_per_inv} PutEvents and {bw_per_inv} BatchWriteItem each")
    print(f"- publisher, full batches (measured through the mapping emulator, BatchSize {publisher['batch_size']}, "
          f"the binary under the local runtime): {publisher['put_events']} PutEvents and "
          f"{publisher['batch_write_item']} BatchWriteItem for {publisher['events']} events in "
          f"{publisher['invocations']} invocations; {cold_calls:g} other calls per cold start "
          f"({', '.join(k for k in publisher['calls'] if k not in ('events:PutEvents', 'dynamodb:BatchWriteItem'))}), "
          f"times {cold_starts} assumed cold starts: {cold_calls * cold_starts:,.0f} calls, under a cent")
    print(f"- publisher duration per invocation: ours {pub_ms:.0f} ms, design card {card_ms:.0f} ms "
          f"(handler CPU {cpu_us:.2f} µs per record, measured: criterion, decode.txt); "
          f"GB-seconds {gbs_ours:,.0f} vs {gbs_card:,.0f}")
    print(f"- writer duration: create {create_ms:.0f} ms, pay {pay_ms:.0f} ms at {w_mem} MB "
          f"(CPU {writer_cpu_us:.1f} µs per transaction build, measured: criterion, transaction.txt; "
          f"round trips assumed); "
          f"GB-seconds {gbs_c + gbs_p:,.0f}")


if __name__ == "__main__":
    main()
