"""No typed figure (#43): every measured figure in the pages that report
measurements is written by the script that measured it.

A measured figure is a number with a unit of time (s, ms, µs, min), a
percentage, a size (bytes, KB, MB, GB, KiB, MiB, GiB), a count of calls
or of duplicates, a rate (events/s, per 1,000), a dollar amount ($15.85),
or a number in a Markdown table's cell. Outside the blocks
the scripts write (`<!-- NAME:start -->` … `<!-- NAME:end -->`), a
paragraph or table that holds one must name, in backticks, the command
that produces it (`make bench`, `make chaos`, `cargo bench …`, a script
under infra/ …): then the figure is a setting or a limit the command's
output shows (a timeout, a batch size, a price), or it is in a block.
A few settings, limits and targets are allowed by name (SETTINGS, each with
its reason), and so are the bold thresholds of a table with a "must be"
column (the chaos verdicts' `**0**`).

usage: figures.py [--self-test] PAGE...
"""
import re
import sys

BLOCK = re.compile(r"<!-- ([\w:-]+):start -->.*?<!-- \1:end -->", re.S)
NUMBER = r"\d[\d,]*(?:\.\d+)?"
FIGURE = re.compile(
    rf"(?<![\w.#/`-])(?:\${NUMBER}|{NUMBER}\s?"
    rf"(?:ms|µs|us|s|min|%|KB|MB|GB|KiB|MiB|GiB|bytes|calls|events/s|duplicates|per 1,000))(?![\w])"
)
TABLE_NUMBER = re.compile(rf"\|\s*\**~?{NUMBER}\**\s*(?:\(|\||$)")
# A Markdown heading (a wrapped line may start with "#41", which is not one).
HEADING = re.compile(r"#{1,6}(?: |$)")
# A command that generates or reproduces the figures beside it.
COMMAND = re.compile(
    r"`(?:[A-Z_]+=\S+ )*(?:make (?:bench|chaos|test|demo)|cargo (?:bench|test|nextest)|infra/[\w/.-]+|"
    r"\.venv[\w/-]*/bin/python infra/[\w/.-]+)"
)


def blocks(text):
    """The page without its generated blocks, each left as blank lines (as
    many as it had), so that a hit's line is the page's."""
    return BLOCK.sub(lambda m: "\n" * m.group(0).count("\n"), text)


def paragraphs(text):
    """The page's paragraphs (tables and lists count as one each), with the
    line each starts on. A heading is a paragraph of its own, so that the
    text right under it is checked."""
    out, current, start = [], [], 0
    in_code = False
    for number, line in enumerate(text.splitlines(), 1):
        if line.startswith("```"):
            in_code = not in_code
            current.append(line)
            continue
        heading = not in_code and HEADING.match(line)
        if heading or (not in_code and not line.strip()):
            if current:
                out.append((start, "\n".join(current)))
            current = []
            if heading:
                out.append((number, line))
            continue
        if not current:
            start = number
        current.append(line)
    if current:
        out.append((start, "\n".join(current)))
    return out


# Figures that are not measurements: settings, limits, targets, assumptions.
# Each key is a regex of the figure with the words around it (a space in it
# matches any run of whitespace, a line break included); a figure inside a
# match is skipped. Keep this short: prefer rephrasing.
SETTINGS = {
    r"(?:outbox item / |≤ )1 KB": "DynamoDB's write unit (1 KB), an AWS limit",
    r"item under 4 KB": "DynamoDB's strongly consistent read unit (4 KB), an AWS limit",
    r"\b[35] µs (?:goal|target)": "the per-record CPU targets (5 µs decode and build; 3 µs, #41's goal)",
    r"default 256 MB": "the templates' MemorySize default (template.yaml, infra/outbox.yaml)",
    r"L_put = 25 ms|L_delete = 10 ms": "round trips assumed in infra/bench/prices.json (latency_ms), not measured",
    r"\d+ × 25 \+ (?:\d+ × )?10 = \d+(?:\.\d+)? m?s":
        "the scaling model's T(100), computed beside it from prices.json's assumed round trips",
    r"forwarded 3 s later": "the AcknowledgeEarly sabotage's delay (tests/support/proxy/server.rs)",
    # The chaos harness's settings (tests/support/chaos/mod.rs,
    # ChaosConfig::small and the OnFailure retry), and the relay's and the
    # claim's constants they are computed from.
    r"comes back after 19 s|relay's 2 s grace|claim's 10 s margin":
        "the chaos run's OnFailure retry and the constants it is computed from (tests/support/chaos/mod.rs)",
    r"timeout is 6 s|the sweeper 5 s|1\.5 s here|about 4\.5 s per invocation":
        "the chaos run's function timeout and the sweeper's DEADLINE_MARGIN (crates/sweeper)",
    r"target of 150 calls per 1,000 events":
        "the publisher's target for AWS calls per 1,000 published events, a target, not a measurement",
    r"every function under 6,000,000 bytes":
        "the bootstrap size target read in bytes (§4 'Against the targets'), a target, not a measurement",
    r"relays about \*\*1,600 events/s\*\*|would carry about 6,400 events/s":
        "the scaling model's rates, 100 events / T(100) and S × P times it, computed beside them "
        "from prices.json's assumed round trips, not measured",
    r"\b5 calls in flight":
        "SendConcurrency's default (template.yaml, DEFAULT_SEND_CONCURRENCY in crates/engine/src/ordering.rs), "
        "the setting the send-latency block's rows are run with",
}
ALLOWED = [re.compile(pattern.replace(" ", r"\s+")) for pattern in SETTINGS]
# A bold `**0**` (or `**> 0**`) cell of a table with a "must be" column (the
# chaos verdicts) is a threshold the verdict requires, not a measured count.
MUST_BE = re.compile(r"\|\s*must be\s*\|")
THRESHOLD = re.compile(r"\*\*(?:[<>≤≥=] )?0\*\*")


def unsourced(text):
    """(line, figure) for each figure outside the generated blocks whose
    paragraph names no generating command."""
    found = []
    for start, paragraph in paragraphs(blocks(text)):
        if HEADING.match(paragraph) or COMMAND.search(paragraph):
            continue
        allowed = [m.span() for pattern in ALLOWED for m in pattern.finditer(paragraph)]
        thresholds = bool(MUST_BE.search(paragraph.split("\n", 1)[0]))
        offset = 0
        for number, line in enumerate(paragraph.split("\n"), start):
            spans = [(m.group(), m.span()) for m in FIGURE.finditer(line)]
            if line.startswith("|") and not line.startswith(("|---", "| ---")):
                spans += [(m.group(), m.span()) for m in TABLE_NUMBER.finditer(line)
                          if not (thresholds and THRESHOLD.search(m.group()))]
            for figure, (begin, end) in spans:
                if not any(a <= offset + begin and offset + end <= b for a, b in allowed):
                    found.append((number, figure.strip("| *(~\n").strip()))
            offset += len(line) + 1
    return found


def self_test():
    typed = "The run took 2,441 s.\n"
    sourced = "The run took 2,441 s (`make chaos`).\n"
    table = "| sink | duplicates |\n|---|---|\n| SNS | 7,671 |\n"
    block = "<!-- chaos-report:start -->\n| SNS | 7,671 |\n<!-- chaos-report:end -->\n"
    assert unsourced(typed) == [(1, "2,441 s")], unsourced(typed)
    assert unsourced(sourced) == []
    assert unsourced(table) == [(3, "7,671")], unsourced(table)
    assert unsourced(block) == []
    assert unsourced("Keys of 25 per call and the 24-hour retention.\n") == []
    # A hit's line is the page's, blocks included.
    assert unsourced(block + "\nThe run took 2,441 s.\n") == [(5, "2,441 s")]
    # A heading does not exempt the paragraph right under it.
    heading = "## Cold start\nIt took 302 ms.\n"
    assert unsourced(heading) == [(2, "302 ms")], unsourced(heading)
    wrapped = "The lean decode of\n#41 cut it to 8 µs.\n"
    assert unsourced(wrapped) == [(2, "8 µs")], unsourced(wrapped)
    # The allowlist: a setting, in its words, even across a line break; the
    # same figure in other words is still a hit.
    assert unsourced("the default 256 MB memory setting\n") == []
    assert unsourced("the default\n256 MB memory setting\n") == []
    assert unsourced("resident memory, 256 MB\n") == [(1, "256 MB")]
    assert unsourced("T(100) ≈ 2 × 25 + 10 = 0.06 s with W = 5\n") == []
    # Thresholds: bold cells of a table with a "must be" column; any other
    # cell, or a bold cell of another table, is a hit.
    verdicts = "| verdict | must be |\n|---|---|\n| lost | **0** |\n| delivered | 7,976 |\n"
    assert unsourced(verdicts) == [(4, "7,976")], unsourced(verdicts)
    assert unsourced("| verdict | count |\n|---|---|\n| lost | **0** |\n") == [(3, "0")]
    assert unsourced("| verdict | must be |\n|---|---|\n| lost | **3** |\n") == [(3, "3")]
    # Dollar amounts, bytes, calls and rates: typed, a hit; in a block, or
    # beside their command, not.
    assert unsourced("The total is $15.85 a month.\n") == [(1, "$15.85")]
    assert unsourced("<!-- bench:cost:start -->\nThe total is $15.85.\n<!-- bench:cost:end -->\n") == []
    assert unsourced("| total | $15.85 |\n") == [(1, "$15.85")]
    assert unsourced("The total is $15.85 (`infra/bench/cost.py`).\n") == []
    typed_units = "Its logs are 397 bytes, 1,142 calls, at 1,600 events/s.\n"
    assert unsourced(typed_units) == [(1, "397 bytes"), (1, "1,142 calls"), (1, "1,600 events/s")], \
        unsourced(typed_units)
    assert unsourced("<!-- b:start -->\n" + typed_units + "<!-- b:end -->\n") == []
    # A setting in its words is allowed; the same unit in other words is not.
    assert unsourced("a little less with 5 calls in flight\n") == []
    assert unsourced("it made 5 calls in all\n") == [(1, "5 calls")]
    print("figures.py: self-test passed")


def main(args):
    if args and args[0] == "--self-test":
        self_test()
        args = args[1:]
    failed = False
    for page in args:
        for line, figure in unsourced(open(page, encoding="utf-8").read()):
            print(f"{page}:{line}: typed figure {figure!r}: write it from its script (a generated block), "
                  "or name the command that produces it beside it")
            failed = True
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
