"""The cost of one million orders created and paid (two events each), from
what the benches count (.local/bench/*.json, written by `cargo bench --bench
aws_calls`; the handler's CPU per record from criterion's output when
present) and the prices and assumptions in infra/bench/prices.json. Prints
Markdown. Three designs on the same workload:

  ours       - batched PutEvents (10 per call) and BatchWriteItem deletes (25;
               a lone key left over goes in a DeleteItem)
  card       - the design card's publisher: one PutEvents and one DeleteItem per event
  pipes      - EventBridge Pipes, stream source -> bus target; outbox items
               expire by TTL (no publisher, no pending index, no sweeper)

Then the fixed monthly cost of one stack, whatever the volume: the alarms,
the dashboard and the alarm key counted in template.yaml and
infra/outbox.yaml at their defaults, the custom metrics counted in the
functions' sources (the metric names each one emits), and the X-Ray traces
of the scheduled sweeps.

With DetailedMetrics at its default (false) the functions declare only the
core metrics (CORE_METRICS in crates/runtime/src/metrics.rs) to CloudWatch;
the options (DetailedMetrics, Dashboard, strict ordering) are priced after
the table.

usage: cost.py BENCH_DIR PRICES_JSON
       cost.py --fixed PRICES_JSON     (the fixed monthly cost alone; no bench run needed)
       cost.py --check-fixed PAGE PRICES_JSON
                                       (PAGE's fixed-cost block is this output, and the
                                       reusable stack's total is within IDLE_BUDGET)
       cost.py --large-events PRICES_JSON
                                       (what a million large events add through the claim
                                       check, docs/events.md "Large events")
       cost.py --check-large PAGE PRICES_JSON
                                       (PAGE's large-events block is that output)
"""
import json
import math
import pathlib
import re
import sys

import yaml

ROOT = pathlib.Path(__file__).resolve().parents[2]
# The reusable stack's fixed monthly cost at its defaults must stay within
# this (#64): what a stack costs before its first event.
IDLE_BUDGET = 3.00
ORDERS = 1_000_000
EVENTS = 2 * ORDERS
KB = 1024


def units(size, unit):
    return max(1, math.ceil(size / unit))


def deletes(records):
    """The delete calls for one invocation of `records` published events
    (rounded up): (BatchWriteItem, DeleteItem). The store deletes 25 keys
    per BatchWriteItem and a lone key left over with a DeleteItem."""
    full, rest = divmod(math.ceil(records), 25)
    return full + (1 if rest > 1 else 0), 1 if rest == 1 else 0


def delete_calls(batch_writes, delete_items):
    """The delete calls, as the notes name them."""
    parts = [f"{n} {name}" for n, name in ((batch_writes, "BatchWriteItem"), (delete_items, "DeleteItem")) if n]
    return " and ".join(parts) or "no deletes"


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


class TemplateLoader(yaml.SafeLoader):
    """YAML with CloudFormation's short tags (`!Ref X` → {"Ref": "X"})."""


def _tag(loader, suffix, node):
    if isinstance(node, yaml.ScalarNode):
        value = loader.construct_scalar(node)
    elif isinstance(node, yaml.SequenceNode):
        value = loader.construct_sequence(node, deep=True)
    else:
        value = loader.construct_mapping(node, deep=True)
    if suffix in ("Ref", "Condition"):
        return {suffix: value}
    if suffix == "GetAtt" and isinstance(value, str):
        value = value.split(".", 1)
    return {f"Fn::{suffix}": value}


TemplateLoader.add_multi_constructor("!", _tag)


def template(relative):
    return yaml.load((ROOT / relative).read_text(), Loader=TemplateLoader)


def condition_holds(tpl, name):
    """Whether condition `name` of `tpl` holds with every parameter at its
    default (a parameter without one is empty)."""
    params = {k: str(v.get("Default", "")) for k, v in tpl.get("Parameters", {}).items()}

    def value(x):
        if isinstance(x, dict) and "Ref" in x:
            return params.get(x["Ref"], "")
        if isinstance(x, dict) and "Condition" in x:
            return evaluate(tpl["Conditions"][x["Condition"]])
        if isinstance(x, dict):
            return evaluate(x)
        return str(x)

    def evaluate(c):
        if isinstance(c, dict) and "Condition" in c:
            return evaluate(tpl["Conditions"][c["Condition"]])
        (fn, args), = c.items()
        if fn == "Fn::Equals":
            return str(value(args[0])) == str(value(args[1]))
        if fn == "Fn::Not":
            return not value(args[0])
        if fn == "Fn::And":
            return all(value(a) for a in args)
        if fn == "Fn::Or":
            return any(value(a) for a in args)
        refuse(f"cannot evaluate the condition {c!r}")

    return evaluate(tpl["Conditions"][name])


def resources_at_defaults(relative, kind):
    """The resources of type `kind` in a template that exist at its defaults."""
    tpl = template(relative)
    return {name: r for name, r in tpl["Resources"].items()
            if r.get("Type") == kind and ("Condition" not in r or condition_holds(tpl, r["Condition"]))}


def alarm_metrics(alarms):
    """Alarm metrics, as CloudWatch bills them: one per alarm on a metric,
    one per metric of a metric-math alarm."""
    return sum(sum(1 for m in a["Properties"]["Metrics"] if "MetricStat" in m)
               if "Metrics" in a.get("Properties", {}) else 1
               for a in alarms.values())


def rust_block(relative, signature):
    """The text of the Rust function whose line contains `signature`, to its
    closing brace at the same indentation."""
    text = (ROOT / relative).read_text()
    at = text.find(signature)
    if at < 0:
        refuse(f"no `{signature}` in {relative} (where the cost model counts the emitted metrics)")
    line_start = text.rfind("\n", 0, at) + 1
    indent = text[line_start:at].split("fn")[0].split("pub")[0]
    end = text.find("\n" + indent + "}\n", at)
    return text[at:end]


# Where each function builds its EMF metrics (crates/runtime/src/metrics.rs
# writes them): (function, file, the function that lists the names).
EMITTERS = [
    ("publisher", "crates/publisher/src/lib.rs", "pub fn emf_lines("),
    ("sweeper", "crates/runtime/src/sweep_metrics.rs", "fn metrics("),
    ("projector", "crates/projector/src/lib.rs", "pub fn emf("),
]


def emitted_metrics():
    """{function: [metric names]} from the functions' sources, and the
    number of dimension sets each metric is published under."""
    names = {}
    for function, relative, signature in EMITTERS:
        found = re.findall(r'\(\s*"([A-Z][A-Za-z]*)",', rust_block(relative, signature))
        if not found:
            refuse(f"no metric names found in {relative} `{signature}`")
        # The latency distribution is named by a constant of metrics.rs.
        if re.search(r"\bCOMMIT_TO_PUBLISH\b", (ROOT / relative).read_text()):
            found.append(re.search(r'pub const COMMIT_TO_PUBLISH: &str = "(\w+)"',
                                   (ROOT / "crates/runtime/src/metrics.rs").read_text()).group(1))
        names[function] = list(dict.fromkeys(found))
    text = (ROOT / "crates/runtime/src/metrics.rs").read_text()
    at = text.find('"Dimensions":')
    if at < 0:
        refuse("no \"Dimensions\" in crates/runtime/src/metrics.rs")
    start = text.find("[", at)
    depth, sets = 0, 0
    for i in range(start, len(text)):
        if text[i] == "[":
            depth += 1
            sets += depth == 2
        elif text[i] == "]":
            depth -= 1
            if depth == 0:
                break
        elif depth == 1 and not text[i].isspace() and text[i] != ",":
            refuse("cannot read the EMF dimension sets in crates/runtime/src/metrics.rs")
    return names, max(1, sets)


def core_metrics():
    """CORE_METRICS of crates/runtime/src/metrics.rs: the metrics declared
    to CloudWatch unless DETAILED_METRICS is true."""
    text = (ROOT / "crates/runtime/src/metrics.rs").read_text()
    m = re.search(r"pub const CORE_METRICS: \[&str; \d+\] = \[(.*?)\];", text, re.S)
    if not m:
        refuse("no CORE_METRICS in crates/runtime/src/metrics.rs")
    return re.findall(r'"(\w+)"', m.group(1))


def rate_seconds(expression):
    m = re.fullmatch(r"rate\((\d+) (minute|hour|day)s?\)", expression.strip())
    if not m:
        refuse(f"cannot price the schedule {expression!r} (rate(N minutes|hours|days) only)")
    return int(m.group(1)) * {"minute": 60, "hour": 3600, "day": 86400}[m.group(2)]


def fixed_cost(prices, show=True):
    """Prints the fixed monthly cost block (unless not `show`); returns the
    orders example's total."""
    say = print if show else (lambda *_args, **_kw: None)
    cw, a = prices["cloudwatch"], prices["assumptions"]
    kind_alarm, kind_dash, kind_key = "AWS::CloudWatch::Alarm", "AWS::CloudWatch::Dashboard", "AWS::KMS::Key"
    example, reusable = "template.yaml", "infra/outbox.yaml"
    alarms = {t: alarm_metrics(resources_at_defaults(t, kind_alarm)) for t in (example, reusable)}
    dashboards = {t: len(resources_at_defaults(t, kind_dash)) for t in (example, reusable)}
    keys = {t: len(resources_at_defaults(t, kind_key)) for t in (example, reusable)}
    names, dimension_sets = emitted_metrics()
    core = core_metrics()
    tpl = template(reusable)
    detailed = condition_holds(tpl, "DeclaresDetailedMetrics")
    strict = condition_holds(tpl, "MayBeStrict")

    def declared(function, every=detailed, strict=strict):
        """The metric names `function` declares at these settings."""
        return [n for n in names[function]
                if (every or n in core) and (strict or n != "ParkedAggregates")]

    def count(functions, **settings):
        return sum(len(declared(f, **settings)) for f in functions) * dimension_sets

    outbox_functions = [f for f in names if f != "projector"]
    metrics_example = count(names)
    metrics_reusable = count(outbox_functions)
    schedule = template(reusable)["Parameters"]["SweepSchedule"]["Default"]
    tracing = template(reusable)["Parameters"]["Tracing"]["Default"]
    sweeps = a["hours_per_month"] * 3600 / rate_seconds(schedule)

    rows = [
        ("CloudWatch alarms (standard resolution, per alarm metric)",
         alarms[example] + alarms[reusable], alarms[reusable], cw["alarm_metric_month"],
         f"counted at the templates' defaults: {alarms[example]} in {example}, {alarms[reusable]} in {reusable}"),
        ("CloudWatch dashboard", dashboards[example] + dashboards[reusable], dashboards[reusable],
         cw["dashboard_month"], f"{reusable}"),
        ("CloudWatch custom metrics (EMF)", metrics_example, metrics_reusable, cw["custom_metric_month"],
         "the metric names the functions declare at DetailedMetrics "
         + ("true" if detailed else "false (CORE_METRICS, crates/runtime/src/metrics.rs)")
         + " (" + ", ".join(f"{f} {len(declared(f))} of {len(v)}" for f, v in names.items())
         + f"), each under {dimension_sets} dimension set(s); at most: a count is sent only when "
           "not zero, the projector's need the EventBridge sink"),
        ("KMS key (the alarm topic's)", keys[example] + keys[reusable], keys[reusable],
         prices["kms"]["key_month"],
         f"${prices['kms']['rotation_month']:,.2f} a month more after each of its first two yearly rotations"),
        ("X-Ray traces of the scheduled sweeps", sweeps, sweeps,
         prices["xray"]["traces_recorded_per_million"] / 1e6 if tracing == "Active" else 0.0,
         f"one trace per run at {schedule} ({a['hours_per_month']} hours a month) with Tracing Active; "
         f"the templates' default is {tracing}"),
    ]
    say(f"Fixed monthly cost of one stack, whatever the volume: {prices['region']}, list prices as of "
          f"{prices['as_of']} (infra/bench/prices.json), without free tiers; the templates at their defaults "
          f"(Sink eventbridge). The orders example is template.yaml (it nests {reusable}); "
          f"the reusable stack alone is {reusable} on your table (docs/adopt.md).\n")
    say("| per month | orders example: count | cost | reusable stack alone: count | cost | how |")
    say("|---|---|---|---|---|---|")
    totals = [0.0, 0.0]
    for name, n_example, n_reusable, price, how in rows:
        totals[0] += n_example * price
        totals[1] += n_reusable * price
        say(f"| {name} | {n_example:,.0f} | ${n_example * price:,.2f} | {n_reusable:,.0f} | "
              f"${n_reusable * price:,.2f} | {how} |")
    say(f"| **total** | | **${totals[0]:,.2f}** | | **${totals[1]:,.2f}** | |")
    metric, alarm = cw["custom_metric_month"], cw["alarm_metric_month"]
    more_metrics = count(outbox_functions, every=True) - metrics_reusable
    strict_metrics = count(outbox_functions, strict=True) - metrics_reusable
    say("\nEach option's price a month on the reusable stack, on top of that total:\n")
    say("| option | adds | per month |")
    say("|---|---|---|")
    say(f"| `DetailedMetrics=true` | {more_metrics} custom metrics | ${more_metrics * metric:,.2f} |")
    say(f"| `Dashboard=true` | 1 dashboard | ${cw['dashboard_month']:,.2f} |")
    say(f"| strict ordering (`Ordering=strict`, or an SNS FIFO topic at `auto`) | {strict_metrics} custom "
        f"metric and 1 alarm (ParkedAggregates; a standard SNS topic at `auto` gets the alarm alone, "
        f"${alarm:,.2f}) | ${strict_metrics * metric + alarm:,.2f} |")
    say(f"| `CommitToPublishAlarmMilliseconds` above 0 | 1 alarm, and the {more_metrics} metrics of "
        f"`DetailedMetrics=true` (the alarm reads one) | ${alarm + more_metrics * metric:,.2f} |")
    say("\nNot counted: the SQS mappings' pollers (Lambda's empty long polls are SQS requests), "
        "the scheduled sweeps' Lambda time and index queries (docs/performance.md, sweep cost), "
        "and storage by the GB (the tables, their point-in-time recovery, the logs).")
    return totals


def check_block(page, name, produce, command):
    """PAGE's `<!-- NAME:start -->` block is what `produce()` prints (the
    output of `command`); returns what `produce` returned."""
    import contextlib
    import io
    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        result = produce()
    text = (ROOT / page).read_text()
    m = re.search(rf"<!-- {name}:start -->\n(.*?)<!-- {name}:end -->", text, re.S)
    if not m:
        sys.exit(f"cost.py: {page} has no {name} block")
    if m.group(1).strip() != out.getvalue().strip():
        sys.exit(f"cost.py: {page}'s {name} block is stale; paste the output of `{command}` between its markers")
    return result


def check_fixed(page, prices):
    """PAGE's `fixed-cost` block is what `--fixed` prints, and the reusable
    stack's total is within IDLE_BUDGET."""
    totals = check_block(page, "fixed-cost", lambda: fixed_cost(prices),
                         "infra/bench/cost.py --fixed infra/bench/prices.json")
    if totals[1] > IDLE_BUDGET + 1e-9:
        sys.exit(f"cost.py: the reusable stack costs ${totals[1]:,.2f} a month idle, "
                 f"over the ${IDLE_BUDGET:,.2f} budget")
    print(f"cost.py: {page}'s fixed cost is current; the reusable stack idles at ${totals[1]:,.2f} "
          f"(budget ${IDLE_BUDGET:,.2f})")


def large_events(prices, subscribers=1):
    """What one million claim-checked events add, by envelope size: the
    writer's PutObject, the publisher's GetObject (and one per subscriber
    that resolves a stub or pointer), and the objects' storage for the
    stack's PayloadRetentionDays default; beside it, the bus's 64 KB chunks
    of what it carries (the whole envelope when it fits 1 MB, else the
    stub), which are paid with or without a claim check. Without one, an
    envelope over 400 KB cannot be committed at all."""
    s3 = prices["s3"]
    retention = template("infra/outbox.yaml")["Parameters"]["PayloadRetentionDays"]["Default"]
    events = 1_000_000
    eb_chunk = prices["eventbridge"]["chunk_bytes"]
    eb_price = prices["eventbridge"]["custom_events_per_million"]
    stub = 1 * KB
    print(f"One million large events through the claim check, {prices['region']}, list prices as of "
          f"{prices['as_of']} (infra/bench/prices.json); objects kept {retention} days "
          f"(PayloadRetentionDays), {subscribers} subscriber resolving stubs.\n")
    print("| envelope | S3 PUT | S3 GET (publisher, subscriber) | S3 storage | claim check adds | "
          "EventBridge chunks (paid either way) |")
    print("|---|---|---|---|---|---|")
    for size in (500 * KB, 900 * KB, 2 * KB * KB, 8 * KB * KB):
        put = events * s3["put_requests_per_thousand"] / 1000
        whole = size + 200 <= KB * KB
        gets = events * (1 + (0 if whole else subscribers)) * s3["get_requests_per_thousand"] / 1000
        storage = events * size / KB ** 3 * s3["standard_gb_month"] * retention / 30
        carried = size if whole else stub
        chunks = events * units(carried, eb_chunk) * eb_price / 1e6
        label = f"{size // KB:,} KB" if size < KB * KB else f"{size // (KB * KB)} MiB"
        print(f"| {label} ({'published whole' if whole else 'stub'}) | ${put:,.2f} | ${gets:,.2f} | "
              f"${storage:,.2f} | **${put + gets + storage:,.2f}** | ${chunks:,.2f} |")


def check_large(page, prices):
    """PAGE's `large-events` block is what `--large-events` prints."""
    check_block(page, "large-events", lambda: large_events(prices),
                "infra/bench/cost.py --large-events infra/bench/prices.json")
    print(f"cost.py: {page}'s cost of large events is current")


def main():
    if len(sys.argv) == 4 and sys.argv[1] == "--check-large":
        check_large(sys.argv[2], json.loads(pathlib.Path(sys.argv[3]).read_text()))
        return
    if len(sys.argv) == 3 and sys.argv[1] == "--large-events":
        large_events(json.loads(pathlib.Path(sys.argv[2]).read_text()))
        return
    if len(sys.argv) == 2 and sys.argv[1] in ("-h", "--help"):
        print(__doc__)
        return
    if len(sys.argv) == 4 and sys.argv[1] == "--check-fixed":
        check_fixed(sys.argv[2], json.loads(pathlib.Path(sys.argv[3]).read_text()))
        return
    if len(sys.argv) == 3 and sys.argv[1] == "--fixed":
        fixed_cost(json.loads(pathlib.Path(sys.argv[2]).read_text()))
        return
    if len(sys.argv) != 3:
        sys.exit(__doc__)
    bench = pathlib.Path(sys.argv[1])
    prices = json.loads(pathlib.Path(sys.argv[2]).read_text())
    inputs = read_json(bench / "cost-inputs.json")
    publisher = read_json(bench / "publisher-calls.json")
    # Log bytes per invocation, measured: the binaries' output that Lambda's
    # log-level filter lets through at the templates' LogLevel.
    logs_measured = read_json(bench / "logs.json")
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

    # The writer's calls per command, measured (the round-trips bench):
    # each one priced at its assumed latency and its units.
    writer_calls = inputs["writer_calls"]
    for command in ("create", "pay"):
        if command not in writer_calls:
            refuse(f"no '{command}' in the writer's measured calls")
        unknown = [c for c in writer_calls[command] if c not in lat]
        if unknown:
            refuse(f"no assumed latency for {unknown} (the writer's '{command}' makes them)")

    def count(command, operation):
        return sum(1 for c in writer_calls[command] if c == operation)

    # --- DynamoDB units per order (create + pay), from the measured sizes.
    # Transactional writes cost 2 units per KB; the pending index (GSI1,
    # projection ALL) is written with the outbox item, at 1 unit per KB.
    transaction = 2 * units(meta, KB) + 2 * units(outbox, KB) + key_share * 2 * units(idem, KB)
    tx_create = count("create", "TransactWriteItems") * transaction
    tx_pay = count("pay", "TransactWriteItems") * transaction
    gsi_put = 2 * units(outbox, KB)  # both events enter the pending index
    # Strongly consistent reads of the order (pay's GetItem).
    reads_pay = count("pay", "GetItem") * units(meta, 4 * KB)
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

    # Writer: each command's measured calls, one after another.
    create_ms = sum(lat[c] for c in writer_calls["create"]) + writer_cpu_us / 1000 + a["lambda_overhead_ms"]
    pay_ms = sum(lat[c] for c in writer_calls["pay"]) + writer_cpu_us / 1000 + a["lambda_overhead_ms"]
    w_mem = a["memory_mb"]["writer"]
    writer_create, gbs_c = lambda_cost(ORDERS, create_ms, w_mem)
    writer_pay, gbs_p = lambda_cost(ORDERS, pay_ms, w_mem)

    # Publisher (ours). The bench measures full batches (every event
    # committed before the mapping reads); the calls per invocation follow
    # from the API limits (10 entries per PutEvents, 25 per BatchWriteItem),
    # checked here against that measurement, and the records per
    # invocation from the stated arrival pattern.
    full = publisher["events"] / publisher["invocations"]
    expected = (math.ceil(full / 10) * publisher["invocations"],
                deletes(full)[0] * publisher["invocations"],
                deletes(full)[1] * publisher["invocations"])
    measured = (publisher["put_events"], publisher["batch_write_item"], publisher.get("delete_item", 0))
    if expected != measured:
        refuse(f"the measured full batches ({measured}) disagree with the call arithmetic ({expected})")
    arrival = a["arrival"]
    batch = records_per_invocation(arrival, publisher["batch_size"])
    invocations = EVENTS / batch
    put_per_inv = math.ceil(batch / 10)
    bw_per_inv, di_per_inv = deletes(batch)
    p_mem = a["memory_mb"]["publisher"]

    def relay_ms(records):
        """One publisher invocation of `records` events, in ms: (ours, the
        design card's, which makes one PutEvents and one DeleteItem per
        event). Ours counts its calls one after the other, as if
        SendConcurrency were 1 (an upper bound)."""
        batch_writes, delete_items = deletes(records)
        rest = records * cpu_us / 1000 + a["lambda_overhead_ms"]
        ours = math.ceil(records / 10) * lat["PutEvents"] + batch_writes * lat["BatchWriteItem"] \
            + delete_items * lat["DeleteItem"] + rest
        card = records * (lat["PutEvents"] + lat["DeleteItem"]) + rest
        return ours, card

    pub_ms, card_ms = relay_ms(batch)
    pub_ours, gbs_ours = lambda_cost(invocations, pub_ms, p_mem)
    pub_card, gbs_card = lambda_cost(invocations, card_ms, p_mem)
    # The relay line if invocations carried more records (a burst).
    bursts = [(n, *(lambda_cost(EVENTS / n, ms, p_mem)[0] for ms in relay_ms(n))) for n in (2, 10, 100)]
    # Cold starts: the calls the bench saw besides the sends and deletes,
    # per cold start (measured), times the assumed cold starts.
    cold_calls = publisher["other_calls"] / max(1, publisher["cold_starts"])
    cold_starts = arrival["cold_starts_per_million_orders"]

    chunks = units(envelope, prices["eventbridge"]["chunk_bytes"])
    eb = EVENTS * chunks * prices["eventbridge"]["custom_events_per_million"] / 1e6
    pipes = EVENTS * units(envelope, prices["pipes"]["chunk_bytes"]) * prices["pipes"]["requests_per_million"] / 1e6
    sqs_req = EVENTS * (1 + 2 / a["sqs_receive_batch"])  # send + batched receive and delete
    sqs = sqs_req * prices["sqs"]["requests_per_million"] / 1e6
    # Logs: the function's own lines, measured (logs.json), and Lambda's,
    # at the templates' SystemLogLevel (prices.json).
    reusable = template("infra/outbox.yaml")["Parameters"]
    system_level = reusable["SystemLogLevel"]["Default"]
    platform = a["platform_log_bytes_per_invocation"][system_level]
    per_gb = prices["cloudwatch"]["logs_ingestion_per_gb"]
    writer_bytes = ORDERS * (logs_measured["writer"]["create"] + logs_measured["writer"]["pay"] + 2 * platform)
    publisher_bytes = invocations * (logs_measured["publisher"]["one_record"] + platform)
    logs_writer = writer_bytes / 1024 ** 3 * per_gb
    logs_publisher = publisher_bytes / 1024 ** 3 * per_gb
    # X-Ray: the templates' Tracing default. PassThrough records a trace
    # only for a request traced upstream (none here: API Gateway's tracing
    # is off, a stream carries no trace header). Active: at most one trace
    # per invocation (Lambda records the first request each second and 5%
    # of the rest; at this arrival most are recorded, so all are priced).
    tracing = reusable["Tracing"]["Default"]
    xray = prices["xray"]["traces_recorded_per_million"] / 1e6 if tracing == "Active" else 0.0
    traces_writer = 2 * ORDERS
    xray_ours = (traces_writer + invocations) * xray
    xray_pipes = traces_writer * xray

    wru = lambda n: n * dd["write_request_units_per_million"] / 1e6
    rru = lambda n: n * dd["read_request_units_per_million"] / 1e6
    ddb_delete = wru(ORDERS * delete)
    ddb_index = wru(ORDERS * gsi_put)
    # Pipes: no pending index (nothing would remove its entries), no deletes (TTL is free).
    ddb_pipes = wru(ORDERS * (tx_create + tx_pay)) + rru(writer_rru)

    rows = [
        ("DynamoDB: the writer's transactions", ddb_pipes, ddb_pipes, ddb_pipes,
         "computed from measured item sizes"),
        ("**Price of recovery**: the pending index's entries (the sweeper's way to stranded events)",
         ddb_index, ddb_index, 0.0, "computed: both events enter the index, projection ALL"),
        ("**Price of recovery**: deleting published items (item + index entry)", ddb_delete, ddb_delete, 0.0,
         "computed; Pipes: TTL deletes are free"),
        ("DynamoDB Streams read by Lambda or Pipes", 0.0, 0.0, 0.0, "free"),
        ("Lambda: writer (2M requests)", writer_create + writer_pay, writer_create + writer_pay,
         writer_create + writer_pay, "computed: calls and CPU measured, latencies assumed"),
        ("The relay: Lambda, the publisher (ours, the card's); Pipes' requests", pub_ours, pub_card, pipes,
         "computed: invocations from the assumed arrival, calls per invocation from the API limits "
         "(checked against the measured full batches), CPU measured, latencies assumed; Pipes: per 64 KB "
         "chunk of each event"),
        ("EventBridge PutEvents (per 64 KB chunk)", eb, eb, eb, "computed from the measured envelope size"),
        ("SQS: the subscriber queue", sqs, sqs, sqs, "computed"),
        ("CloudWatch Logs ingestion: the writer", logs_writer, logs_writer, logs_writer,
         f"measured: {logs_measured['writer']['create']:.0f} + {logs_measured['writer']['pay']:.0f} bytes per "
         f"create + pay at LogLevel {logs_measured['log_level']}, and Lambda's {platform} per invocation "
         f"at SystemLogLevel {system_level}"),
        ("CloudWatch Logs ingestion: the publisher's metric documents (EMF)", logs_publisher, logs_publisher, 0.0,
         f"measured: {logs_measured['publisher']['one_record']:.0f} bytes per one-record invocation "
         f"(Published, CommitToPublishLatency); Pipes: its metrics are vended, with no commit-to-publish latency"),
        ("X-Ray traces recorded", xray_ours, xray_ours, xray_pipes,
         f"the templates' Tracing default, {tracing}: "
         + ("at most one per Lambda invocation" if tracing == "Active" else "no trace unless traced upstream")),
    ]
    recovery = ddb_index + ddb_delete
    for name, ours, _card, pipe, _how in rows:
        if "Price of recovery" not in name and "metric documents" not in name and ours > pipe + 0.005:
            refuse(f"{name}: ours ${ours:,.2f} above Pipes' ${pipe:,.2f}, and not the price of recovery")
    totals = [sum(r[i] for r in rows) for i in (1, 2, 3)]
    fixed = fixed_cost(prices, show=False)[0]

    print(f"One million orders created and paid: {EVENTS:,} events. {prices['region']}, list prices as of "
          f"{prices['as_of']} (infra/bench/prices.json), Lambda on {lam['architecture']}, "
          f"every request with an Idempotency-Key ({key_share:.0%}).\n")
    print("| cost | ours | design card publisher | EventBridge Pipes | how |")
    print("|---|---|---|---|---|")
    for name, ours, card, pipe, how in rows:
        print(f"| {name} | ${ours:,.2f} | ${card:,.2f} | ${pipe:,.2f} | {how} |")
    print(f"| **total** | **${totals[0]:,.2f}** | **${totals[1]:,.2f}** | **${totals[2]:,.2f}** | |")
    print(f"| of which the price of recovery | ${recovery:,.2f} | ${recovery:,.2f} | – | |")
    print(f"| ours above Pipes | ${totals[0] - totals[2]:,.2f} | | | the price of recovery, and the publisher's metric documents |")
    print(f"| per month, whatever the volume: the fixed cost below | "
          f"${fixed:,.2f} | ${fixed:,.2f} | – | |\n")
    print("Inputs:\n")
    print(f"- item sizes (bytes, as DynamoDB counts them, measured): order {meta}, outbox item {outbox}, "
          f"idempotency record {idem}, envelope {envelope}")
    print(f"- the writer's calls per command (measured): create {', '.join(writer_calls['create'])}; "
          f"pay {', '.join(writer_calls['pay'])}")
    print(f"- write units per order: create transaction {tx_create:g}, pay transaction {tx_pay:g}, "
          f"pending index {gsi_put:g}, deletes {delete:g}; read units per order {reads_pay:g}")
    print(f"- arrival (assumed): {arrival['orders_per_day']:,} orders a day, evenly, on "
          f"{arrival['stream_shards']} stream shard(s) polled {arrival['polls_per_second']} times a second, "
          f"no batching window: {batch:.1f} records per publisher invocation, {invocations:,.0f} invocations, "
          f"{put_per_inv} PutEvents and {delete_calls(bw_per_inv, di_per_inv)} each")
    print(f"- publisher, full batches (measured through the mapping emulator, BatchSize {publisher['batch_size']}, "
          f"the binary under the local runtime): {publisher['put_events']} PutEvents and "
          f"{delete_calls(publisher['batch_write_item'], publisher.get('delete_item', 0))} for {publisher['events']} events in "
          f"{publisher['invocations']} invocations; {cold_calls:g} other calls per cold start "
          f"({', '.join(k for k in publisher['calls'] if k not in ('events:PutEvents', 'dynamodb:BatchWriteItem', 'dynamodb:DeleteItem'))}), "
          f"times {cold_starts} assumed cold starts: {cold_calls * cold_starts:,.0f} calls, under a cent")
    print(f"- publisher duration per invocation: ours {pub_ms:.0f} ms, design card {card_ms:.0f} ms "
          f"(handler CPU {cpu_us:.2f} µs per record, measured: criterion, decode.txt); "
          f"GB-seconds {gbs_ours:,.0f} vs {gbs_card:,.0f}")
    print("- the relay line with more records per invocation (a burst; the same arithmetic, "
          "ours with its calls one after the other): "
          + "; ".join(f"{n} records, ours ${o:,.2f} against the card's ${c:,.2f}" for n, o, c in bursts))
    print(f"- writer duration: create {create_ms:.0f} ms, pay {pay_ms:.0f} ms at {w_mem} MB "
          f"(CPU {writer_cpu_us:.1f} µs per transaction build, measured: criterion, transaction.txt; "
          f"round trips assumed); "
          f"GB-seconds {gbs_c + gbs_p:,.0f}")
    print()
    fixed_cost(prices)


if __name__ == "__main__":
    main()
