"""Every relative link in README.md, docs/ and the crates' READMEs resolves:
the file exists, and a `#fragment` names a heading of that page as GitHub
slugs it (lowercase; punctuation but `-` and `_` dropped; spaces to `-`; a
repeated heading gets `-1`, `-2`, ...). Links from the Rust sources and the
templates to `docs/*.md#anchor` are checked the same way.

Every page of README.md and docs/ is compiled for its Rust examples
(crates/dynamodb-outbox/src/doctests.rs includes it), and a ```rust block
that is not compiled (`ignore`) is marked `<!-- fragment: why -->` on the
line before.

usage: doc_links.py [--self-test]
"""
import pathlib
import re
import sys

ROOT = pathlib.Path(__file__).resolve().parents[2]
LINK = re.compile(r"\[[^\]]*\]\(([^)\s]+)\)")
# A docs page named with an anchor from code, a template or a script.
CODE_ANCHOR = re.compile(r"((?:docs/)?[\w/-]+\.md)#([\w-]+)")
HEADING = re.compile(r"^(#{1,6}) (.*?)\s*#*\s*$")
FENCE = re.compile(r"^\s*```")


def slug(text):
    text = re.sub(r"\[([^\]]*)\]\([^)]*\)", r"\1", text)  # a link keeps its text
    text = text.strip().lower()
    text = re.sub(r"[^\w\- ]", "", text)
    return text.replace(" ", "-")


def anchors(text):
    seen, out = {}, set()
    fenced = False
    for line in text.splitlines():
        if FENCE.match(line):
            fenced = not fenced
            continue
        m = None if fenced else HEADING.match(line)
        if not m:
            continue
        base = slug(m.group(2))
        n = seen.get(base, 0)
        seen[base] = n + 1
        out.add(base if n == 0 else f"{base}-{n}")
    out.update(re.findall(r'<a (?:name|id)="([\w-]+)"', text))
    return out


def pages():
    yield ROOT / "README.md"
    yield from sorted((ROOT / "docs").rglob("*.md"))
    yield from sorted((ROOT / "crates").glob("*/README.md"))
    yield from sorted((ROOT / "clients").glob("*/README.md"))
    yield ROOT / "infra" / "README.md"


def links_of(text):
    fenced = False
    for number, line in enumerate(text.splitlines(), 1):
        if FENCE.match(line):
            fenced = not fenced
            continue
        if fenced:
            continue
        line = re.sub(r"`[^`]*`", "", line)
        for target in LINK.findall(line):
            yield number, target


def check(files, code_files):
    problems = []
    cache = {}

    def anchors_of(path):
        if path not in cache:
            cache[path] = anchors(path.read_text())
        return cache[path]

    def resolve(where, base, target):
        if re.match(r"^[a-z]+:", target) or target.startswith("//"):
            return  # a URL, mailto:
        path_part, _, fragment = target.partition("#")
        path = (base / path_part).resolve() if path_part else where
        if not path.exists():
            problems.append(f"{where.relative_to(ROOT)}: {target}: no such file")
            return
        if fragment and path.suffix == ".md" and fragment not in anchors_of(path):
            problems.append(f"{where.relative_to(ROOT)}: {target}: no heading #{fragment} in "
                            f"{path.relative_to(ROOT)}")

    for page in files:
        if not page.exists():
            continue
        for number, target in links_of(page.read_text()):
            resolve(page, page.parent, target)
    for source in code_files:
        for page, fragment in CODE_ANCHOR.findall(source.read_text(errors="replace")):
            path = ROOT / (page if page.startswith("docs/") or "/" in page else f"docs/{page}")
            if not path.exists():
                path = ROOT / "docs" / pathlib.Path(page).name
            if not path.exists():
                continue  # a page of another project
            if fragment not in anchors_of(path):
                problems.append(f"{source.relative_to(ROOT)}: {page}#{fragment}: no such heading")
    return problems


DOCTESTS = ROOT / "crates" / "dynamodb-outbox" / "src" / "doctests.rs"


def doctest_problems(pages_, included):
    problems = []
    for page in pages_:
        relative = str(page.relative_to(ROOT))
        if relative.startswith("docs/chaos/"):
            continue  # written by the chaos run
        if (relative == "README.md" or relative.startswith("docs/")) and relative not in included:
            problems.append(f"{relative}: not in {DOCTESTS.relative_to(ROOT)}, so its Rust examples are never compiled")
        lines = page.read_text().splitlines()
        for i, line in enumerate(lines):
            if re.match(r"^\s*```rust\S*ignore", line) and not (i and "<!-- fragment:" in lines[i - 1]):
                problems.append(f"{relative}:{i + 1}: an ignored Rust block without `<!-- fragment: why -->` above it")
    return problems


def code_files():
    for pattern in ("crates/**/*.rs", "tests/**/*.rs", "infra/**/*.py", "infra/**/*.sh", "*.yaml",
                    "infra/*.yaml", "Makefile"):
        for path in ROOT.glob(pattern):
            if "node_modules" not in path.parts and path.is_file():
                yield path


def self_test():
    assert slug("The metrics' dimensions") == "the-metrics-dimensions"
    assert slug("Calls per command (happy path)") == "calls-per-command-happy-path"
    assert slug("`outboxctl doctor`") == "outboxctl-doctor"
    assert anchors("# A\n## A\n```\n# not\n```\n") == {"a", "a-1"}
    import shutil
    tmp = ROOT / "target" / "doc-links-self-test"
    shutil.rmtree(tmp, ignore_errors=True)
    tmp.mkdir(parents=True)
    (tmp / "a.md").write_text("# Title\n[ok](b.md#there) [bad](b.md#nowhere) [gone](c.md)\n"
                              "```\n[in a block](x.md)\n```\n")
    (tmp / "b.md").write_text("## There\n")
    found = check([tmp / "a.md", tmp / "b.md"], [])
    assert len(found) == 2 and "nowhere" in found[0] and "c.md" in found[1], found
    (tmp / "d.md").write_text("text\n```rust,ignore\nlet x = y;\n```\n")
    found = doctest_problems([tmp / "d.md"], set())
    assert any("fragment" in f for f in found), found
    print("doc_links.py --self-test: a missing page, a missing heading and an unmarked ignored block are refused")


def main():
    if sys.argv[1:] == ["--self-test"]:
        self_test()
        return
    problems = check(list(pages()), list(code_files()))
    included = set(re.findall(r'include_str!\("../../../([^"]+)"\)', DOCTESTS.read_text()))
    problems += doctest_problems([p for p in pages() if p.exists()], included)
    for p in problems:
        print(p)
    if problems:
        sys.exit(f"doc_links.py: {len(problems)} broken link(s)")
    print("doc_links.py: every relative link and anchor in the docs, and every docs anchor the code names, resolves")


if __name__ == "__main__":
    main()
