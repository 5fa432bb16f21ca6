#!/usr/bin/env bash
# `make bench`: every measurement of docs/performance.md, the same way every
# time. Counts (AWS calls, items read) are exact; times are medians on this
# machine. Nothing here asserts a time.
set -euo pipefail
root=$(cd "$(dirname "$0")/../.." && pwd)
cd "$root"
export PATH="$root/.venv/bin:$PATH"
mkdir -p .local/bench

echo "# 1, 3, 6. AWS calls, writer round trips, sweep cost (and the cost model's inputs)"
# Counts, not times: the debug build counts the same calls as a release one
# (and the test crate's release build takes many minutes here).
infra/local/with-local.sh cargo test --locked -p outbox-tests --bench aws_calls | grep -v "^{" | tee .local/bench/aws_calls.md

echo "# 2. Handler CPU per record, and the publisher per invocation against an instant sink (criterion)"
cargo bench --locked -p outbox-publisher --bench decode -- --warm-up-time 2 --measurement-time 5 | tee .local/bench/decode.txt
cargo bench --locked -p outbox-writer --bench transaction -- --warm-up-time 2 --measurement-time 5 | tee .local/bench/transaction.txt
echo "# 2. Instructions per record (callgrind: repeatable whatever the machine does)"
infra/bench/instructions.sh | tee .local/bench/instructions.md

echo "# 4. Artifacts"
infra/bench/artifacts.sh | tee .local/bench/artifacts.md

echo "# 5. Cold-start proxy"
infra/local/with-local.sh bash -c '
  set -euo pipefail
  eval "$(target/debug/devkit provision bench-orders bench-bus outbox.orders 2>/dev/null || cargo run -q --locked -p outbox-devkit --bin devkit -- provision bench-orders bench-bus outbox.orders)"
  # The three functions share one process environment here: the one the
  # templates give them on this stack (devkit env).
  source infra/local/lib.sh
  export_env "$(target/debug/devkit env --table "$table" --stream "$stream" --bus "$bus" writer publisher sweeper)"
  .venv/bin/python infra/bench/coldstart.py 15 \
    writer=target/lambda/writer/bootstrap:events/writer-get-order.json \
    publisher=target/lambda/publisher/bootstrap:events/publisher-mixed-batch.json \
    sweeper=target/lambda/sweeper/bootstrap:events/sweeper-scheduled.json
' | tee .local/bench/coldstart.md
echo "# 7. Cost per million orders (from the counts above and infra/bench/prices.json)"
.venv/bin/python infra/bench/cost.py .local/bench infra/bench/prices.json | tee .local/bench/cost.md

# The release-profile matrix is a full release build per variant (about
# 4 minutes each here): only with BENCH_PROFILES=1.
if [ -n "${BENCH_PROFILES:-}" ]; then
  echo "# 4. Release-profile matrix (publisher)"
  infra/bench/profiles.sh | tee .local/bench/profiles.md
fi
echo "# docs/performance.md, its measured blocks rewritten from .local/bench"
.venv/bin/python infra/bench/report.py .local/bench docs/performance.md "$(git rev-parse --short HEAD)$(git status --porcelain 2>/dev/null | grep -qv '^??' && echo ' (with uncommitted changes)' || true)"
