#!/usr/bin/env bash
# `cargo install outboxctl` as an operator will run it once the crates are
# on crates.io, proven offline (#44): the six published crates packaged as
# `cargo publish` would upload them, served beside every other dependency
# from a directory source that stands in for crates.io, and outboxctl
# installed from its packaged crate (`cargo install --path`) with a clean
# CARGO_HOME (no registry cache, no config of ours), then asked its
# version. Run by `make release-check`. A debug build (`--debug`): what the
# check proves (the packages resolve and build from their packaged sources
# alone) is the same as a release build's, in a third of the time.
set -euo pipefail
cd "$(dirname "$0")/../.."

version=${1:?usage: install-check.sh VERSION}
# Outside the repository (cargo would take a package inside it for a
# member of this workspace), at a fixed path so that a second run reuses
# the compiled dependencies.
work=${TMPDIR:-/tmp}/outboxctl-install-check-$(id -u)
rm -rf "$work/vendor" "$work/root"
mkdir -p "$work"

# The crates as published: outboxctl and what it is built from, and the
# libraries (packaged together, each path dependency resolved to its
# packaged sibling).
cargo package --locked --no-verify --quiet \
  -p dynamodb-outbox-core -p dynamodb-outbox-inbox -p dynamodb-outbox \
  -p dynamodb-outbox-engine -p dynamodb-outbox-runtime -p outboxctl

# Every other dependency from the local cache (`cargo fetch` fills it; no
# network here), then the packaged crates unpacked beside them, each with
# the checksum file a directory source needs.
cargo fetch --locked --quiet
cargo vendor --locked --offline --versioned-dirs --quiet "$work/vendor" >/dev/null
for crate in target/package/*-"$version".crate; do
  name=$(basename "$crate" .crate)
  rm -rf "${work:?}/vendor/$name"
  tar -xzf "$crate" -C "$work/vendor"
  printf '{"files":{},"package":"%s"}' "$(sha256sum "$crate" | cut -d' ' -f1)" \
    >"$work/vendor/$name/.cargo-checksum.json"
done

home=$(mktemp -d)
trap 'rm -rf "$home"' EXIT
CARGO_HOME=$home CARGO_TARGET_DIR=$work/target cargo install --locked --offline --debug --quiet \
  --config "source.crates-io.replace-with='packaged'" \
  --config "source.packaged.directory='$work/vendor'" \
  --root "$work/root" --path "$work/vendor/outboxctl-$version"

got=$("$work/root/bin/outboxctl" --version)
test "$got" = "outboxctl $version" || { echo "install-check: outboxctl --version printed '$got', not 'outboxctl $version'" >&2; exit 1; }
echo "install-check: outboxctl $version installs from its packaged crate (clean CARGO_HOME, offline)"
