#!/usr/bin/env bash
# The engine apart from AWS (crates/engine, docs/architecture.md): its own
# dependencies name no AWS crate, and its sources name no AWS type or client
# and none of the runtime's modules. The contract crate it builds on
# (dynamodb-outbox-core) carries the item's DynamoDB codec, so the SDK's
# attribute type is in the engine's graph through it, never a client.
set -euo pipefail
cd "$(dirname "$0")/../.."
direct=$(cargo tree -p dynamodb-outbox-engine --locked -e normal --depth 1 --prefix none \
  | tail -n +2 | awk '{print $1}' | sort -u)
if grep -E '^aws' <<<"$direct"; then
  echo "engine-walls: the engine depends on an AWS crate directly (above)" >&2
  exit 1
fi
# Code lines only: the docs may say where the adapters are.
if grep -rnE 'aws_[a-z_]+::|outbox_runtime' crates/engine/src | grep -vE '^[^:]+:[0-9]+:\s*//'; then
  echo "engine-walls: the engine's sources name an AWS crate or the runtime (above)" >&2
  exit 1
fi
echo "engine-walls: no AWS crate among the engine's $(wc -l <<<"$direct") direct dependencies, none named in its sources"
