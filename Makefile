# Everything runs locally against the moto server on 127.0.0.1; nothing here
# reaches beyond this machine. `make demo` and `make test` install what they
# need (a project-local Python venv with pinned moto and cargo-lambda).

SHELL := /bin/bash
VENV := .venv
STAMP := $(VENV)/.installed
export PATH := $(CURDIR)/$(VENV)/bin:$(PATH)
WITH_MOTO := infra/local/with-moto.sh

.PHONY: help venv test lint unit demo clean

help:
	@echo "make demo   - local end-to-end run (moto server + writer under cargo lambda watch)"
	@echo "make test   - lint, unit, adapter and end-to-end tests against moto"
	@echo "make lint   - cargo fmt --check and clippy -D warnings"

$(STAMP): infra/local/requirements.txt infra/local/constraints.txt
	python3 -m venv $(VENV)
	$(VENV)/bin/pip install --quiet --disable-pip-version-check -r infra/local/requirements.txt -c infra/local/constraints.txt
	touch $@

venv: $(STAMP)

lint:
	cargo fmt --all -- --check
	cargo clippy --workspace --all-targets --locked -- -D warnings

test: venv lint
	$(WITH_MOTO) cargo test --workspace --locked

demo: venv
	$(WITH_MOTO) infra/local/demo.sh

clean:
	rm -rf .local target/lambda
