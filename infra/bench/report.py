"""Writes what `make bench` measured into docs/performance.md, between its
`<!-- bench:NAME:start -->` and `<!-- bench:NAME:end -->` markers, so that
no figure there is typed by hand. Refuses (exit 1, nothing written) when an
input is missing.

usage: report.py BENCH_DIR PAGE COMMIT
       report.py --only NAME[,NAME...] BENCH_DIR PAGE COMMIT

`--only` rewrites just the named blocks of the AWS-call counts (from
`aws_calls.md` alone, e.g. after `cargo test --bench aws_calls` when the
counting code changed) and names, inside each, the commit and the command it
came from; the page's stamp, which dates the whole `make bench`, is left as
it is.
"""
import datetime
import os
import pathlib
import re
import sys


def refuse(message):
    sys.exit(f"report.py: {message}; nothing written")


def read(bench, name):
    path = bench / name
    if not path.exists():
        refuse(f"{path} is missing")
    return path.read_text()


def sections(markdown):
    """The `## ` sections of the aws_calls bench's output, by title start."""
    out = {}
    for part in re.split(r"^## ", markdown, flags=re.M)[1:]:
        title, _, body = part.partition("\n")
        out[title] = ("**" + title + "**\n" + body).strip()
    return out


def find(parts, prefix):
    for title, text in parts.items():
        if title.startswith(prefix):
            return text
    refuse(f"no '{prefix}' section in aws_calls.md")


UNITS = {"ns": 1e-3, "µs": 1.0, "us": 1.0, "ms": 1e3, "s": 1e6}

ROWS = [
    ("publisher_decode_and_build/1", "`publisher_decode_and_build`: the event JSON decoded as the runtime did before the lean decode (`aws_lambda_events`' `Event`), each `NewImage` into `OutboxItem` (serde_dynamo, validation), its EventBridge size, its `PutEventsRequestEntry`", 1),
    ("publisher_decode_and_build/100", "", 100),
    ("publisher_decode_and_build/1000", "", 1000),
    ("publisher_decode_split/event_json/100", "`publisher_decode_split/event_json`: the general model's decode alone, as the runtime runs it (`serde_path_to_error` over `from_slice` into `aws_lambda_events`' `Event`)", 100),
    ("publisher_decode_split/lean/100", "`publisher_decode_split/lean`: the publisher's own decode alone (`StreamEvent`: the runtime's pass over the text, then only the fields it uses; images of outbox inserts only)", 100),
    ("publisher_decode_split/items_and_entries/100", "`publisher_decode_split/items_and_entries`: items, sizes and entries from decoded records", 100),
    ("publisher_invocation_instant_sink/100", "`publisher_invocation_instant_sink`: what ships: the runtime's pass and the lean decode, then the whole `Publisher::process` (grouping, batching by count and bytes, order per aggregate, entries, deletes) against a sink and a store that answer at once", 100),
    ("publisher_invocation_instant_sink/1000", "", 1000),
    ("writer_build_create_order_transaction", "`writer_build_create_order_transaction`: order to item, envelope, outbox item with size and limit checks", 1),
]


def criterion_table(text):
    lines = ["| bench | records | median per batch | per record |", "|---|---|---|---|"]
    for name, label, records in ROWS:
        m = re.search(re.escape(name) + r"\s+time:\s+\[\S+ \S+ (\S+) (\S+)", text)
        if not m:
            refuse(f"no criterion figure for {name}")
        us = float(m.group(1)) * UNITS[m.group(2)]
        batch = f"{us / 1000:.2f} ms" if us >= 1000 else f"{us:.1f} µs"
        lines.append(f"| {label} | {records:,} | {batch} | {us / records:.2f} µs |")
    return "\n".join(lines)


COUNT_BLOCKS = {
    "publisher-calls": "Publisher",
    "strict-calls": "Strict ordering",
    "redelivery-check": "The redelivery check",
    "send-latency": "Concurrent sends",
    "commit-to-publish": "Commit to publish",
    "writer-round-trips": "Writer round trips",
    "sweep-cost": "Sweep cost",
}


def write_blocks(page, text, blocks):
    """`text` with each block's body replaced between its markers."""
    for name, body in blocks.items():
        pattern = rf"(<!-- bench:{name}:start -->\n).*?(<!-- bench:{name}:end -->)"
        if not re.search(pattern, text, flags=re.S):
            refuse(f"{page} has no bench:{name} markers")
        text = re.sub(pattern, lambda m: m.group(1) + body + "\n" + m.group(2), text, flags=re.S)
    return text


def only(names, bench, page, commit):
    calls = sections(read(bench, "aws_calls.md"))
    blocks = {}
    for name in names:
        if name not in COUNT_BLOCKS:
            refuse(f"--only takes {', '.join(COUNT_BLOCKS)}, not {name}")
        blocks[name] = (f"Counted by `infra/local/with-local.sh cargo test -p outbox-tests --bench aws_calls` "
                        f"at commit `{commit}`, {datetime.date.today().isoformat()} (not the stamp's run).\n\n"
                        + find(calls, COUNT_BLOCKS[name]))
    page.write_text(write_blocks(page, page.read_text(), blocks))
    print(f"{page}: {len(blocks)} blocks written from {bench}/aws_calls.md")


def main():
    if len(sys.argv) > 1 and sys.argv[1] == "--only":
        only(sys.argv[2].split(","), pathlib.Path(sys.argv[3]), pathlib.Path(sys.argv[4]), sys.argv[5])
        return
    bench, page, commit = pathlib.Path(sys.argv[1]), pathlib.Path(sys.argv[2]), sys.argv[3]
    calls = sections(read(bench, "aws_calls.md"))
    blocks = {
        "publisher-calls": find(calls, "Publisher"),
        "strict-calls": find(calls, "Strict ordering"),
        "redelivery-check": find(calls, "The redelivery check"),
        "send-latency": find(calls, "Concurrent sends"),
        "commit-to-publish": find(calls, "Commit to publish"),
        "handler-cpu": criterion_table(read(bench, "decode.txt") + read(bench, "transaction.txt")),
        "instructions": read(bench, "instructions.md").strip(),
        "log-bytes": find(calls, "Log bytes per invocation"),
        "writer-round-trips": find(calls, "Writer round trips"),
        "artifacts": read(bench, "artifacts.md").strip(),
        "coldstart": read(bench, "coldstart.md").strip(),
        "sweep-cost": find(calls, "Sweep cost"),
        "cost": read(bench, "cost.md").strip(),
    }
    today = datetime.date.today().isoformat()
    load = os.getloadavg()[0]
    cores = os.cpu_count() or 1
    busy = (f" The machine was busy with other work ({load:.1f} runnable on {cores} cores): "
            "the times are inflated, the counts and sizes are not." if load > cores else "")
    stamp = (f"<!-- bench:stamp:start -->\nFigures: `make bench` at commit `{commit}`, {today}; "
             f"load average {load:.1f} on {cores} cores when they were written.{busy}\n<!-- bench:stamp:end -->")
    text = page.read_text()
    text, n = re.subn(r"<!-- bench:stamp:start -->.*?<!-- bench:stamp:end -->", lambda _: stamp, text, flags=re.S)
    if n != 1:
        refuse(f"{page} has no bench:stamp markers")
    page.write_text(write_blocks(page, text, blocks))
    print(f"{page}: {len(blocks)} blocks written from {bench}")


if __name__ == "__main__":
    main()
