"""Facts the docs state that the repository can check (#64 point 5): each
check below fails on a defect the docs once had.

- the example stack's name in the pages that operate it (docs/deploy.md,
  docs/runbook.md, README.md: `stack=NAME`, `--stack-name NAME`) is
  samconfig.toml's `stack_name` (they once said `outbox`);
- docs/deploy.md's alarm table names every alarm of both templates, by its
  logical id or a `*Suffix` row (it once left out three);
- `make help` names every target of the Makefile's .PHONY list (it once
  left out build, deploy, venv, venv-infra, local);
- infra/README.md's count of broken template copies is the number
  infra/checks/broken-copies.sh declares (it once said 36 of 39);
- a crate's README (what crates.io shows) names crates by the package names
  users depend on, not the workspace's aliases (it once called the runtime
  `outbox-runtime`);
- the shipped metadata (the templates, the CDK and Terraform examples)
  carries no placeholder (`your-org`, the account `123456789012`);
- no page's shell block installs a workspace crate from crates.io
  (`cargo install outboxctl`): they are not published yet, so `--path`
  (it once showed the registry install).

usage: doc_facts.py [--self-test]
"""
import pathlib
import re
import subprocess
import sys
import tomllib

import yaml

ROOT = pathlib.Path(__file__).resolve().parents[2]
STACK_PAGES = ["docs/deploy.md", "docs/runbook.md", "README.md"]
PLACEHOLDERS = re.compile(r"your-org|123456789012")
SHIPPED = ["template.yaml", "infra/outbox.yaml", "infra/cdk/lib", "infra/cdk/bin", "infra/terraform"]


class Loader(yaml.SafeLoader):
    """YAML with CloudFormation's short tags, kept as plain values."""


Loader.add_multi_constructor("!", lambda loader, suffix, node: None)


def stack_names(page, text, expected):
    problems = []
    for number, line in enumerate(text.splitlines(), 1):
        for m in re.finditer(r"(?:\bstack=|--stack-name[ =])\"?([A-Za-z][\w-]*)", line):
            if m.group(1) != expected:
                problems.append(f"{page}:{number}: stack {m.group(1)!r}, but samconfig.toml deploys {expected!r}")
    return problems


def alarm_table(text, alarms):
    section = text.split("\n## Alarms", 1)[-1].split("\n## ", 1)[0]
    named = set(re.findall(r"^\| `([\w*]+)`", section, re.M))
    missing = []
    for alarm in sorted(alarms):
        if alarm in named:
            continue
        if any(n.startswith("*") and alarm.endswith(n[1:]) for n in named):
            continue
        missing.append(f"docs/deploy.md: the alarm table does not name {alarm}")
    return missing


def help_targets(makefile, help_output):
    phony = re.search(r"^\.PHONY:(.*)$", makefile, re.M)
    targets = phony.group(1).split() if phony else []
    shown = set(re.findall(r"^make (\S+)", help_output, re.M))
    return [f"Makefile: `make help` does not name {t}" for t in targets if t not in shown and t != "help"]


def broken_copies(readme, script):
    declared = len(re.findall(r"^expect [\w-]+ ", script, re.M))
    stated = re.search(r"(\d+) deliberately broken copies", readme)
    if not stated:
        return ["infra/README.md: says nothing of the broken copies' count"]
    if int(stated.group(1)) != declared:
        return [f"infra/README.md: {stated.group(1)} broken copies, but broken-copies.sh declares {declared}"]
    return []


def crate_names(page, text, packages):
    problems = []
    for number, line in enumerate(text.splitlines(), 1):
        for name in re.findall(r"`((?:dynamodb-)?outbox-[a-z-]+)`", line):
            if name not in packages:
                problems.append(f"{page}:{number}: `{name}` is no package name (crates.io users depend on "
                                f"{', '.join(sorted(p for p in packages if p.startswith('dynamodb')))})")
    return problems


def registry_installs(page, text, packages):
    problems, fenced = [], False
    for number, line in enumerate(text.splitlines(), 1):
        if line.strip().startswith("```"):
            fenced = not fenced
            continue
        if not fenced or "cargo install" not in line or "--path" in line:
            continue
        words = line.split("#")[0].split()
        named = [w for w in words[words.index("install") + 1:] if not w.startswith("-")] if "install" in words else []
        if any(w in packages for w in named):
            problems.append(f"{page}:{number}: `{line.strip()}`: the crates are not on crates.io yet; "
                            f"install with --path")
    return problems


def placeholders(files):
    problems = []
    for path in files:
        for number, line in enumerate(path.read_text(errors="replace").splitlines(), 1):
            if PLACEHOLDERS.search(line):
                problems.append(f"{path.relative_to(ROOT)}:{number}: a placeholder: {line.strip()}")
    return problems


def shipped_files():
    for entry in SHIPPED:
        path = ROOT / entry
        if path.is_file():
            yield path
        elif path.is_dir():
            yield from sorted(p for p in path.rglob("*") if p.is_file() and "node_modules" not in p.parts
                              and p.suffix in (".ts", ".tf", ".yaml", ".json"))


def check():
    problems = []
    samconfig = tomllib.loads((ROOT / "samconfig.toml").read_text())
    stack = samconfig["default"]["global"]["parameters"]["stack_name"]
    for page in STACK_PAGES:
        problems += stack_names(page, (ROOT / page).read_text(), stack)
    alarms = set()
    for template in ("template.yaml", "infra/outbox.yaml"):
        doc = yaml.load((ROOT / template).read_text(), Loader=Loader)
        alarms |= {k for k, r in doc["Resources"].items() if r.get("Type") == "AWS::CloudWatch::Alarm"}
    problems += alarm_table((ROOT / "docs/deploy.md").read_text(), alarms)
    makefile = (ROOT / "Makefile").read_text()
    shown = subprocess.run(["make", "--no-print-directory", "help"], cwd=ROOT, capture_output=True,
                           text=True, check=False).stdout
    problems += help_targets(makefile, shown)
    problems += broken_copies((ROOT / "infra/README.md").read_text(),
                              (ROOT / "infra/checks/broken-copies.sh").read_text())
    packages = set()
    for manifest in (ROOT / "crates").glob("*/Cargo.toml"):
        packages.add(tomllib.loads(manifest.read_text())["package"]["name"])
    for readme in sorted((ROOT / "crates").glob("*/README.md")):
        problems += crate_names(str(readme.relative_to(ROOT)), readme.read_text(), packages)
    problems += placeholders(shipped_files())
    pages = [ROOT / "README.md", *sorted((ROOT / "docs").rglob("*.md")), *sorted((ROOT / "crates").glob("*/README.md"))]
    for page in pages:
        problems += registry_installs(str(page.relative_to(ROOT)), page.read_text(), packages)
    return problems


def self_test():
    # Each defect, as the docs once had it.
    assert stack_names("p", "stack=outbox\n", "dynamodb-outbox")
    assert not stack_names("p", 'stack=dynamodb-outbox; aws cloudformation x --stack-name "$stack"\n',
                           "dynamodb-outbox")
    table = "\n## Alarms\n| alarm | x |\n|---|---|\n| `DeadLetterAlarm` | x |\n| `*ErrorsAlarm` | x |\n## Next\n"
    assert alarm_table(table, {"DeadLetterAlarm", "PublisherErrorsAlarm"}) == []
    assert alarm_table(table, {"ParkedAggregatesAlarm"})
    assert help_targets(".PHONY: test build\n", "make test   - x\n") == ["Makefile: `make help` does not name build"]
    assert broken_copies("on 36 deliberately broken copies", "expect a 'x'\nexpect b 'y'\n")
    assert crate_names("r", "the unpublished `outbox-runtime` crate", {"dynamodb-outbox-runtime"})
    assert registry_installs("p", "```sh\ncargo install outboxctl\n```\n", {"outboxctl"})
    assert not registry_installs("p", "```sh\ncargo install --locked --path crates/outboxctl\n```\n", {"outboxctl"})
    assert placeholders.__name__ and PLACEHOLDERS.search("https://github.com/your-org/x")
    print("doc_facts.py --self-test: each past defect is refused")


def main():
    if sys.argv[1:] == ["--self-test"]:
        self_test()
        return
    problems = check()
    for p in problems:
        print(f"doc_facts.py: {p}", file=sys.stderr)
    if problems:
        sys.exit(1)
    print("doc_facts.py: stack names, the alarm table, make help, the broken copies' count, the crates' "
          "names and the shipped metadata agree with the repository")


if __name__ == "__main__":
    main()
