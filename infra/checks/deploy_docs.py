"""The documented deploy works as written (issue 38): the deploy commands of
docs/adopt.md, docs/deploy.md and the Makefile, and samconfig.toml, checked
against the templates they deploy (template.yaml, infra/outbox.yaml).

- every parameter a `--parameter-overrides` names (and samconfig.toml's)
  exists in the template that command builds or deploys;
- the Architecture a deploy deploys is the Architecture its build built
  (the same value, or neither names it); the Makefile is read as
  `make -n deploy` runs it, samconfig.toml included;
- a deploy of a template with a nested application has
  CAPABILITY_AUTO_EXPAND, and of a template with IAM roles CAPABILITY_IAM
  (from `--capabilities`, else samconfig.toml's);
- a `sam deploy` of template.yaml that passes `--parameter-overrides`
  passes every parameter samconfig.toml sets (on the command line the list
  replaces samconfig.toml's whole);
- a parameter list is never shown outside its `sam` command;
- no tool is named that the project does not install or the pages do not
  ask for (awscurl, jq), and the shell blocks of the pages run only known
  commands;
- in every page (README.md, docs/, the crates' READMEs: SHELL_PAGES), shell
  blocks and inline code run only known commands, a `make` names targets
  the Makefile has, and a path to a script names one that exists.
  (`outboxctl` command lines are parsed by outboxctl's own clap definition:
  tests/docs.rs.)

Each failure names the file and line. `--self-test` runs the checks on
broken snippets and fails unless each is caught.

usage: deploy_docs.py [--self-test]
"""
import os
import pathlib
import re
import shlex
import subprocess
import sys
import tomllib
from dataclasses import dataclass, field

import yaml

ROOT = pathlib.Path(__file__).resolve().parents[2]
PAGES = ["docs/adopt.md", "docs/deploy.md"]


def shell_pages():
    """Every page a user reads: the README, docs/, the crates' and the
    writer packages' READMEs."""
    pages = ["README.md", "infra/README.md"]
    pages += sorted(str(p.relative_to(ROOT)) for p in (ROOT / "docs").rglob("*.md"))
    for folder in ("crates", "clients"):
        pages += sorted(str(p.relative_to(ROOT)) for p in (ROOT / folder).glob("*/README.md"))
    return [p for p in pages if (ROOT / p).exists()]


def make_targets(text):
    """The targets a Makefile's rules name (`a b: deps`, not `X := v`)."""
    targets = set()
    for line in text.splitlines():
        m = re.match(r"^([A-Za-z0-9_.%/$()-][A-Za-z0-9_.%/$() -]*?)\s*:(?![:=])", line)
        if m and not line.startswith("\t"):
            targets.update(t for t in m.group(1).split() if "$" not in t and "%" not in t)
    return targets - {".PHONY"}
DEFAULT_TEMPLATE = "template.yaml"
SAMCONFIG = "samconfig.toml"
# Tools the pages may run: installed by the project (sam, cargo-lambda in
# the venvs; outboxctl from the workspace) or asked for by the pages
# themselves (the AWS CLI, curl, git, make, rustup, Python).
ALLOWED = {
    "aws", "sam", "cargo", "curl", "make", "outboxctl", "git", "rustup", "python", "python3",
    "export", "cd", "echo", "set", "source", "test", "true", "sleep", "eval", "alias",
}
# Named nowhere in these pages: not installed by the project, not needed.
DENIED = {"awscurl", "jq", "httpie"}
SHELL_LANGUAGES = {"", "sh", "bash", "shell", "console"}


class Loader(yaml.SafeLoader):
    """YAML with CloudFormation's short tags, kept as plain values."""


Loader.add_multi_constructor("!", lambda loader, suffix, node: None)


@dataclass
class Template:
    path: str
    parameters: dict
    resources: dict

    @classmethod
    def read(cls, path, text=None):
        doc = yaml.load(text if text is not None else (ROOT / path).read_text(), Loader=Loader)
        return cls(path, doc.get("Parameters") or {}, doc.get("Resources") or {})

    def default(self, name):
        value = self.parameters.get(name, {}).get("Default")
        return None if value is None else str(value)

    def needs(self):
        """The capabilities a deploy of this template needs."""
        types = {r.get("Type") for r in self.resources.values()}
        needed = set()
        if "AWS::Serverless::Application" in types:
            needed.add("CAPABILITY_AUTO_EXPAND")
        iam = {"AWS::IAM::Role", "AWS::IAM::Policy", "AWS::IAM::ManagedPolicy", "AWS::IAM::User", "AWS::IAM::Group"}
        functions_with_own_role = any(
            r.get("Type") == "AWS::Serverless::Function" and "Role" not in (r.get("Properties") or {})
            for r in self.resources.values())
        if types & iam or functions_with_own_role:
            needed.add("CAPABILITY_IAM")
        return needed


@dataclass
class SamConfig:
    parameters: dict = field(default_factory=dict)
    capabilities: list = field(default_factory=list)
    text_line: int = 0

    @classmethod
    def read(cls, text):
        config = tomllib.loads(text)
        deploy = config.get("default", {}).get("deploy", {}).get("parameters", {})
        overrides = deploy.get("parameter_overrides", "")
        if isinstance(overrides, list):
            overrides = " ".join(overrides)
        parameters = dict(p.split("=", 1) for p in shlex.split(overrides) if "=" in p)
        capabilities = deploy.get("capabilities", "")
        if isinstance(capabilities, str):
            capabilities = capabilities.split()
        line = next((i for i, l in enumerate(text.splitlines(), 1) if l.startswith("parameter_overrides")), 0)
        return cls(parameters, list(capabilities), line)


@dataclass
class Command:
    """One `sam build` or `sam deploy`, as written at file:line."""
    where: str
    verb: str
    template: str | None = None          # --template / -t / --template-file
    build_dir: str | None = None          # --build-dir / -b
    overrides: dict | None = None         # None: no --parameter-overrides
    capabilities: list | None = None      # None: no --capabilities
    own_config: bool = False              # --config-file / --config-env
    bare: bool = True                     # no option at all


def strip_comment(line):
    """The line without a shell comment (`#` at a word start, outside quotes)."""
    quote = None
    for i, ch in enumerate(line):
        if quote:
            if ch == quote:
                quote = None
        elif ch in "'\"":
            quote = ch
        elif ch == "#" and (i == 0 or line[i - 1].isspace()):
            return line[:i]
    return line


def hide_substitutions(text):
    """`$( … )` replaced by a placeholder (their commands returned apart)."""
    out, inner, depth, i = [], [], 0, 0
    while i < len(text):
        if text.startswith("$(", i):
            if depth == 0:
                inner.append("")
            else:
                inner[-1] += "$("
            depth += 1
            i += 2
            continue
        ch = text[i]
        if depth:
            if ch == "(":
                depth += 1
            elif ch == ")":
                depth -= 1
                if depth == 0:
                    out.append("__SUBSTITUTION__")
                    i += 1
                    continue
            inner[-1] += ch
        else:
            out.append(ch)
        i += 1
    return "".join(out), inner


def tokens_of(text):
    try:
        return shlex.split(text)
    except ValueError:
        return text.split()


def segments(tokens):
    """Tokens split at `&&`, `||`, `;` and `|`."""
    part = []
    for token in tokens:
        if token in ("&&", "||", ";", "|"):
            if part:
                yield part
            part = []
        else:
            part.append(token)
    if part:
        yield part


def sam_commands(text, where):
    """The `sam build` / `sam deploy` commands in one logical shell line, and
    whether it shows a parameter list outside them."""
    visible, inner = hide_substitutions(text)
    found, stray = [], False
    for part in segments(tokens_of(visible)):
        at = next((i for i, t in enumerate(part[:-1])
                   if (t == "sam" or t.endswith("/sam")) and part[i + 1] in ("build", "deploy")), None)
        if at is None:
            if "--parameter-overrides" in part:
                i = part.index("--parameter-overrides")
                stray |= any("=" in t for t in part[i + 1:i + 2])
            continue
        command = Command(where, part[at + 1])
        options = part[at + 2:]
        command.bare = not options
        i = 0
        while i < len(options):
            option = options[i]
            values = []
            j = i + 1
            while j < len(options) and not options[j].startswith("-"):
                values.append(options[j])
                j += 1
            if option in ("--template", "-t", "--template-file"):
                command.template = values[0] if values else None
                j = i + 2 if values else i + 1
            elif option in ("--build-dir", "-b"):
                command.build_dir = values[0] if values else None
                j = i + 2 if values else i + 1
            elif option == "--parameter-overrides":
                command.overrides = parse_overrides(values)
            elif option == "--capabilities":
                command.capabilities = values
            elif option in ("--config-file", "--config-env"):
                command.own_config = True
                j = i + 2 if values else i + 1
            else:
                j = i + 1
            i = j
        found.append(command)
    for sub in inner:
        more, more_stray = sam_commands(sub, where)
        found += more
        stray |= more_stray
    return found, stray


def parse_overrides(values):
    overrides = {}
    for value in values:
        if value.startswith("ParameterKey="):
            fields = dict(f.split("=", 1) for f in value.split(",") if "=" in f)
            overrides[fields.get("ParameterKey", "")] = fields.get("ParameterValue", "")
        elif "=" in value:
            key, val = value.split("=", 1)
            overrides[key] = val
    return overrides


def command_words(text):
    """The command names a logical shell line runs."""
    visible, inner = hide_substitutions(text)
    words = []
    for part in segments(tokens_of(visible)):
        rest = [t for t in part if not re.fullmatch(r"[A-Za-z_][A-Za-z0-9_]*=.*", t)]
        if rest and rest[0] not in ("__SUBSTITUTION__",):
            words.append(rest[0])
    for sub in inner:
        words += command_words(sub)
    return words


@dataclass
class Line:
    """A logical line of shell (continuations joined), or an inline code
    span, at file:line."""
    where: str
    text: str
    shell_block: bool
    span: bool = False  # an inline code span of a page


def markdown_lines(name, text):
    lines = text.splitlines()
    out, prose = [], []
    fence, language, pending, pending_at = None, "", "", 0
    for number, line in enumerate(lines, 1):
        stripped = line.strip()
        if fence is None and re.match(r"^(```|~~~)", stripped):
            fence, language = stripped[:3], stripped[3:].strip().lower()
            prose.append("")
            continue
        if fence is not None and stripped.startswith(fence):
            fence = None
            prose.append("")
            continue
        if fence is not None:
            prose.append("")
            if language not in SHELL_LANGUAGES:
                continue
            code = strip_comment(line).rstrip()
            if not pending:
                pending_at = number
            if code.endswith("\\"):
                pending += code[:-1] + " "
                continue
            pending += code
            if pending.strip():
                out.append(Line(f"{name}:{pending_at}", pending.strip(), True))
            pending = ""
            continue
        prose.append(line)
    # Inline code spans, across line breaks too.
    body = "\n".join(prose)
    for m in re.finditer(r"(?<!`)`([^`]+)`(?!`)", body):
        number = body.count("\n", 0, m.start()) + 1
        out.append(Line(f"{name}:{number}", re.sub(r"\s*\n\s*", " ", m.group(1)).strip(), False, True))
    # In the page's order: a deploy pairs with the build written before it.
    return sorted(out, key=lambda line: int(line.where.rsplit(":", 1)[1]))


def makefile_lines(name, text):
    out, pending, pending_at = [], "", 0
    for number, line in enumerate(text.splitlines(), 1):
        if not pending:
            pending_at = number
        code = strip_comment(line).rstrip()
        if code.endswith("\\"):
            pending += code[:-1] + " "
            continue
        pending += code
        if re.search(r"sam (build|deploy)|--parameter-overrides|--capabilities", pending):
            out.append(Line(f"{name}:{pending_at}", pending.strip(), False))
        pending = ""
    return out


def make_dry_run(target):
    """The commands `make -n TARGET` would run, one Line each."""
    env = {k: v for k, v in os.environ.items() if k not in ("MAKEFLAGS", "MFLAGS", "MAKELEVEL")}
    result = subprocess.run(["make", "-n", "--no-print-directory", target], cwd=ROOT, env=env,
                            capture_output=True, text=True, check=False)
    if result.returncode != 0:
        return None, result.stderr.strip()
    return [Line(f"Makefile (make -n {target})", l.strip(), False)
            for l in result.stdout.splitlines() if re.search(r"sam (build|deploy)", l)], None


class Checker:
    def __init__(self, templates, samconfig, samconfig_name=SAMCONFIG):
        self.templates = templates
        self.samconfig = samconfig
        self.samconfig_name = samconfig_name
        self.errors = []

    def fail(self, where, message):
        self.errors.append(f"{where}: {message}")

    def template_of(self, command, builds):
        """The template a command builds or deploys, and the build it deploys."""
        if command.verb == "build":
            return command.template or DEFAULT_TEMPLATE, None
        built = command.template or ".aws-sam/build/template.yaml"
        for build in reversed(builds):
            directory = (build.build_dir or ".aws-sam/build").rstrip("/")
            if built in (f"{directory}/template.yaml", f"{directory}/template.yml"):
                return build.template or DEFAULT_TEMPLATE, build
        if command.template is None or command.template.startswith(".aws-sam/"):
            return DEFAULT_TEMPLATE, None
        return command.template, None

    def check_samconfig(self):
        where = f"{self.samconfig_name}:{self.samconfig.text_line}"
        template = self.templates[DEFAULT_TEMPLATE]
        for key in self.samconfig.parameters:
            if key not in template.parameters:
                self.fail(where, f"parameter_overrides names {key}, which {DEFAULT_TEMPLATE} does not have")
        missing = template.needs() - set(self.samconfig.capabilities)
        if missing:
            self.fail(self.samconfig_name, f"capabilities lack {' '.join(sorted(missing))}, which a deploy of "
                      f"{DEFAULT_TEMPLATE} needs")

    def check_lines(self, lines, architecture=True):
        """Every sam command of `lines`, in order (a deploy pairs with the
        latest build before it that made what it deploys)."""
        builds = []
        for line in lines:
            commands, stray = sam_commands(line.text, line.where)
            if stray:
                self.fail(line.where, "a --parameter-overrides list outside its sam command: write the whole "
                          "`sam build`/`sam deploy` command, so the list can be checked against its template")
            for command in commands:
                if line.span and command.bare:
                    continue  # prose naming the command (`sam deploy` uploads …), no command to run
                self.check_command(command, builds, architecture)
                if command.verb == "build":
                    builds.append(command)

    def check_command(self, command, builds, architecture):
        path, build = self.template_of(command, builds)
        template = self.templates.get(path)
        if template is None:
            self.fail(command.where, f"sam {command.verb} names the template {path}, which is not a template here "
                      f"({', '.join(sorted(self.templates))})")
            return
        for key in (command.overrides or {}):
            if key not in template.parameters:
                self.fail(command.where, f"--parameter-overrides names {key}, which {path} does not have")
        if command.verb != "deploy":
            return
        samconfig_applies = not command.own_config
        # Capabilities: the command line's, else samconfig.toml's.
        if command.capabilities is not None:
            capabilities = set(command.capabilities)
        else:
            capabilities = set(self.samconfig.capabilities) if samconfig_applies else set()
        missing = template.needs() - capabilities
        if missing:
            self.fail(command.where, f"sam deploy of {path} without {' '.join(sorted(missing))} "
                      f"(it has {' '.join(sorted(capabilities)) or 'no capabilities'})")
        # The command line's list replaces samconfig.toml's.
        if path == DEFAULT_TEMPLATE and command.overrides is not None and samconfig_applies:
            dropped = sorted(k for k in self.samconfig.parameters if k not in command.overrides)
            if dropped:
                self.fail(command.where, f"sam deploy --parameter-overrides replaces {self.samconfig_name}'s "
                          f"parameter_overrides whole and leaves out {', '.join(dropped)}: pass none on the "
                          f"command line, or all of them")
        if not architecture:
            return
        if command.overrides is not None:
            deployed = command.overrides.get("Architecture")
            deployed_from = "its --parameter-overrides" if deployed else None
        elif samconfig_applies and "Architecture" in self.samconfig.parameters:
            deployed, deployed_from = self.samconfig.parameters["Architecture"], self.samconfig_name
        else:
            deployed, deployed_from = None, None
        if deployed is None:
            deployed, deployed_from = template.default("Architecture"), f"{path}'s default"
        if build is None:
            build = next((b for b in reversed(builds) if (b.template or DEFAULT_TEMPLATE) == path), None)
        if build is None:
            return
        built = (build.overrides or {}).get("Architecture")
        built_from = f"{build.where}" if built else f"{build.where}, {path}'s default"
        if built is None:
            built = template.default("Architecture")
        if built != deployed:
            self.fail(command.where, f"deploys Architecture {deployed} ({deployed_from}), but the build it "
                      f"deploys built {built} ({built_from}): the functions would not start. Name the same "
                      f"Architecture in both, or in neither")

    def check_denied(self, name, text):
        for number, line in enumerate(text.splitlines(), 1):
            for tool in sorted(DENIED):
                if re.search(rf"(?<![\w./-]){re.escape(tool)}(?![\w-])", line):
                    self.fail(f"{name}:{number}", f"names {tool}, which the project does not install "
                              f"(deploy and smoke-test with the AWS CLI, sam and curl: infra/smoke.sh)")

    def check_make_targets(self, lines, targets):
        """Every `make` of the lines (shell blocks and inline code) names
        targets the Makefile has."""
        for line in lines:
            visible, inner = hide_substitutions(line.text)
            for part in segments(tokens_of(visible)):
                rest = [t for t in part if not re.fullmatch(r"[A-Za-z_][A-Za-z0-9_]*=.*", t)]
                if not rest or rest[0] != "make":
                    continue
                if line.span and len(rest) == 1:
                    continue  # prose naming the tool
                for word in rest[1:]:
                    if word.startswith("-") or "=" in word or word.startswith("#"):
                        continue
                    if word not in targets:
                        self.fail(line.where, f"`make {word}`: the Makefile has no target {word}")

    def check_shell_words(self, lines):
        for line in lines:
            if not line.shell_block:
                continue
            for word in command_words(line.text):
                if word in ALLOWED or word in DENIED:
                    continue
                if "/" in word and ((ROOT / word).exists() or word.startswith(("target/", ".venv"))):
                    continue
                self.fail(line.where, f"runs `{word}`, which is neither installed by the project nor "
                          f"asked for by the page (allowed: {', '.join(sorted(ALLOWED))}, project scripts)")


def check_repository():
    templates = {p: Template.read(p) for p in (DEFAULT_TEMPLATE, "infra/outbox.yaml")}
    checker = Checker(templates, SamConfig.read((ROOT / SAMCONFIG).read_text()))
    checker.check_samconfig()
    for page in PAGES:
        text = (ROOT / page).read_text()
        lines = markdown_lines(page, text)
        checker.check_lines(lines)
        checker.check_shell_words(lines)
        checker.check_denied(page, text)
    targets = make_targets((ROOT / "Makefile").read_text())
    for page in shell_pages():
        text = (ROOT / page).read_text()
        lines = markdown_lines(page, text)
        checker.check_make_targets(lines, targets)
        if page not in PAGES:
            checker.check_shell_words(lines)
            checker.check_denied(page, text)
    makefile = (ROOT / "Makefile").read_text()
    # Parameters and capabilities as written; the architecture as run.
    checker.check_lines(makefile_lines("Makefile", makefile), architecture=False)
    checker.check_denied("Makefile", makefile)
    dry, error = make_dry_run("deploy")
    if dry is None:
        checker.fail("Makefile", f"make -n deploy failed: {error}")
    elif not any("sam deploy" in l.text for l in dry) or not any("sam build" in l.text for l in dry):
        checker.fail("Makefile", "make -n deploy runs no `sam build` then `sam deploy`")
    else:
        checker.check_lines(dry)
    return checker.errors


# --self-test: each snippet must fail with a message containing `expect`.
BROKEN = [
    ("the architecture built is not the one deployed", "Architecture", "docs/x.md", """
3. Build: `sam build --template infra/outbox.yaml --build-dir .aws-sam/outbox`
   (add `--parameter-overrides Architecture=x86_64` for x86).
```sh
sam build --template infra/outbox.yaml --build-dir .aws-sam/outbox --parameter-overrides Architecture=x86_64
sam deploy --template-file .aws-sam/outbox/template.yaml \\
  --stack-name s --capabilities CAPABILITY_IAM \\
  --parameter-overrides TableName=T TableStreamArn=$(aws dynamodb describe-table --table-name T --query Table.LatestStreamArn --output text) \\
    EventBusName=B   # or EventTopicArn=...
```
"""),
    ("a parameter list outside its command", "outside its sam command", "docs/x.md", """
Build with `sam build` (add `--parameter-overrides Architecture=x86_64` for x86).
"""),
    ("a parameter the template does not have", "NoSuchParameter", "docs/x.md", """
```sh
sam build --template infra/outbox.yaml --parameter-overrides NoSuchParameter=1
```
"""),
    ("the nested application without CAPABILITY_AUTO_EXPAND", "CAPABILITY_AUTO_EXPAND", "docs/x.md", """
```sh
sam build
sam deploy --capabilities CAPABILITY_IAM
```
"""),
    ("samconfig.toml's parameters dropped by the command line", "leaves out", "Makefile", """
deploy: build
\t.venv-infra/bin/sam deploy --parameter-overrides Architecture=$(ARCH)
"""),
    ("a tool the project does not install", "awscurl", "docs/x.md", """
4. **Smoke test**: `awscurl --service execute-api -X POST "$ApiUrl/orders" -d @order.json`
"""),
    ("an unknown command in a shell block", "order-tool", "docs/x.md", """
```sh
order-tool --create
```
"""),
    ("a make target the Makefile does not have", "no target deploy-all", "docs/x.md", """
Run `make deploy-all` first.
"""),
]
GOOD = ("docs/x.md", """
```sh
arch=x86_64
sam build --template infra/outbox.yaml --build-dir .aws-sam/outbox --parameter-overrides Architecture=$arch
sam deploy --template-file .aws-sam/outbox/template.yaml --stack-name s --capabilities CAPABILITY_IAM \\
  --parameter-overrides Architecture=$arch TableName=T \\
  TableStreamArn=$(aws dynamodb describe-table --table-name T --query Table.LatestStreamArn --output text) \\
  EventBusName=B   # a comment
```
Then `make deploy` runs `sam build` and `sam deploy`; never `--parameter-overrides` by hand.
""")
SELF_TEST_SAMCONFIG = """version = 0.1
[default.deploy.parameters]
capabilities = "CAPABILITY_IAM CAPABILITY_AUTO_EXPAND"
parameter_overrides = "Architecture=\\"arm64\\" ApiAuth=\\"IAM\\""
"""


def run_snippet(name, text):
    templates = {p: Template.read(p) for p in (DEFAULT_TEMPLATE, "infra/outbox.yaml")}
    checker = Checker(templates, SamConfig.read(SELF_TEST_SAMCONFIG))
    if name == "Makefile":
        checker.check_lines(makefile_lines(name, text))
        checker.check_denied(name, text)
    else:
        lines = markdown_lines(name, text)
        checker.check_lines(lines)
        checker.check_shell_words(lines)
        checker.check_make_targets(lines, make_targets((ROOT / "Makefile").read_text()))
        checker.check_denied(name, text)
    return checker.errors


def self_test():
    failures = []
    for what, expect, name, text in BROKEN:
        errors = run_snippet(name, text)
        if not any(expect in e for e in errors):
            failures.append(f"not caught: {what} (expected a failure naming {expect!r}; got {errors or 'none'})")
        else:
            print(f"deploy_docs.py --self-test: caught {what}: {next(e for e in errors if expect in e)}")
    errors = run_snippet(*GOOD)
    if errors:
        failures.append(f"a correct snippet failed: {errors}")
    return failures


def main():
    if sys.argv[1:] in (["-h"], ["--help"]):
        print(__doc__)
        return 0
    if sys.argv[1:] == ["--self-test"]:
        failures = self_test()
        for failure in failures:
            print(f"deploy_docs.py --self-test: {failure}", file=sys.stderr)
        if not failures:
            print(f"deploy_docs.py --self-test: all {len(BROKEN)} broken snippets fail, the correct one passes")
        return 1 if failures else 0
    if sys.argv[1:]:
        print(__doc__, file=sys.stderr)
        return 2
    errors = check_repository()
    for error in errors:
        print(f"deploy_docs.py: {error}", file=sys.stderr)
    if not errors:
        print(f"deploy_docs.py: the deploy commands of {', '.join(PAGES)} and the Makefile, and {SAMCONFIG}, "
              f"agree with the templates; the commands of {len(shell_pages())} pages are known, their make "
              f"targets exist")
    return 1 if errors else 0


if __name__ == "__main__":
    sys.exit(main())
