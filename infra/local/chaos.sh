#!/usr/bin/env bash
# `make chaos`: every seed × sink of the chaos run (tests/chaos.rs), each on
# servers of its own (DynamoDB Local, its replica, moto) on 127.0.0.1, in
# its own table, bus and queues, then the assembled report in
# target/chaos/report.md, with each server's peak memory. Settings: CHAOS_SEED (comma-separated, default
# 1,2,3), CHAOS_SINKS (default eventbridge,sns-fifo,eventbridge-bus), CHAOS_ORDERS (default
# 100), CHAOS_WRITERS (default 4; 1 replays a seed exactly),
# CHAOS_PARALLELIZATION (the mapping's ParallelizationFactor, default 2),
# CHAOS_ORDERING (strict by default, on every sink: order is judged on
# both; auto, the template's default, is strict on SNS FIFO and relaxed on
# EventBridge; or relaxed), CHAOS_KEEP=1
# (add this invocation's runs to the ones already in target/chaos, so one
# sink at a time can make a single report; the report lists each command).
set -euo pipefail
cd "$(dirname "$0")/../.."

seeds=${CHAOS_SEED:-1,2,3}
sinks=${CHAOS_SINKS:-eventbridge,sns-fifo,eventbridge-bus}
out=target/chaos
mkdir -p "$out"
if [ "${CHAOS_KEEP:-0}" != 1 ]; then
  rm -f "$out"/run-*.md "$out"/backlog-*.csv "$out"/phases-*.csv "$out/commands.txt" "$out/peak-memory.txt"
fi

# Build under the same environment the runs use (no rebuild between runs).
infra/local/with-local.sh cargo test --locked --test integration --no-run
infra/local/with-local.sh cargo build --locked --bin writer --bin publisher --bin sweeper
# The commit the runs' binaries are built at (each command line of the
# report names it; the report says what changed since, when it is not HEAD).
built=$(git rev-parse --short HEAD 2>/dev/null || echo unknown)
if git status --porcelain 2>/dev/null | grep -v '^??' | grep -q ' crates/\| tests/'; then
  built="$built with uncommitted changes"
fi

status=0
started=$(date +%s)
# Each seed × sink starts servers of its own: DynamoDB Local keeps a
# deleted table's stream records, and after a 20,000-order run they made
# every call of the next run on the same server time out (its SQLite queue
# busy describing streams; #43).
for seed in ${seeds//,/ }; do
  for sink in ${sinks//,/ }; do
    echo "chaos: seed $seed, $sink, ${CHAOS_ORDERS:-100} orders, ORDERING ${CHAOS_ORDERING:-strict}, ParallelizationFactor ${CHAOS_PARALLELIZATION:-2}" >&2
    CHAOS_SEED=$seed CHAOS_SINKS=$sink LOCAL_SERVER_LABEL="seed $seed, $sink" LOCAL_SERVER_LOG_DIR=$out \
      infra/local/with-local.sh cargo test --locked --test integration -- --ignored --exact chaos::chaos --nocapture >"$out/log-$seed-$sink.txt" 2>&1 \
      || { status=1; echo "chaos: seed $seed $sink FAILED (see $out/log-$seed-$sink.txt)" >&2; }
  done
done

commit=$(git rev-parse --short HEAD 2>/dev/null || echo unknown)
echo "\`CHAOS_SEED=$seeds CHAOS_SINKS=$sinks CHAOS_ORDERS=${CHAOS_ORDERS:-100} CHAOS_WRITERS=${CHAOS_WRITERS:-4} CHAOS_PARALLELIZATION=${CHAOS_PARALLELIZATION:-2} CHAOS_ORDERING=${CHAOS_ORDERING:-strict} make chaos\`, $(date -u +%Y-%m-%d), $(( $(date +%s) - started )) s, binaries built at \`$built\`" >>"$out/commands.txt"
# Uncommitted changes, other than this script's own outputs (another run's
# report, when two runs share one report).
dirty=$(git status --porcelain 2>/dev/null | grep -v '^??' | grep -qv ' docs/chaos/\| docs/reliability.md' && echo " (with uncommitted changes)" || true)
{
  echo "# Chaos run"
  echo
  echo "Written by \`make chaos\` (infra/local/chaos.sh) at commit \`$commit\`$dirty; nothing here is typed by hand."
  echo
  # Each command's binaries, against the commit the report is written at.
  grep -o 'binaries built at `[^`]*`' "$out/commands.txt" | sort -u | while read -r line; do
    at=${line#binaries built at \`}; at=${at%\`}; at=${at%% *}
    if [ "$at" != "$commit" ]; then
      since=$(git diff --shortstat "$at" HEAD -- crates tests 2>/dev/null | sed 's/^ *//')
      echo "Runs built at \`$at\` are not of \`$commit\`; changed since in crates/ and tests/: ${since:-nothing}."
      echo
    fi
  done
  sed 's/$/  /' "$out/commands.txt"
  echo
  # Totals, computed from the rows.
  for f in "$out"/run-*.md; do [ -e "$f" ] && head -1 "$f"; done | awk -F'|' '
    { runs++; orders += $4; committed += $5; delivered += $6; lost += $7; dups += $8;
      unexplained += $9; left += $10; onfailure += $14 }
    END { printf "Totals: %d runs, %d orders, %d events committed, %d delivered, %d lost, %d duplicates, %d unexplained, %d left pending, %d OnFailure messages.\n\n",
          runs, orders, committed, delivered, lost, dups, unexplained, left, onfailure }'
  cat "$out/header.md" 2>/dev/null || true
  for f in "$out"/run-*.md; do [ -e "$f" ] && head -1 "$f"; done
  for f in "$out"/run-*.md; do [ -e "$f" ] && tail -n +2 "$f"; done
  echo
  for f in "$out"/backlog-*.csv; do
    [ -e "$f" ] || continue
    run=$(basename "$f" .csv); run=${run#backlog-}
    echo "![pending backlog and oldest pending age, run $run](backlog-$run.png)"
    echo
  done
  echo "Peak resident memory of each server (VmHWM):"
  echo
  sed 's/^/- /' "$out/peak-memory.txt" 2>/dev/null || true
} >"$out/report.md"
cat "$out/report.md"
# The report docs/reliability.md shows, and each run's picture (the pending
# backlog and the oldest pending age, with the phases and sink outages).
mkdir -p docs/chaos
cp "$out/report.md" docs/chaos/report.md
.venv-plot/bin/python infra/local/plot_backlog.py "$out" docs/chaos || status=1
# docs/reliability.md shows the report between its chaos-report markers.
.venv-plot/bin/python - docs/reliability.md docs/chaos/report.md <<'PY'
import re, sys
page, report = sys.argv[1], open(sys.argv[2]).read()
report = report.replace("](backlog-", "](chaos/backlog-").replace("# Chaos run\n", "", 1)
text = open(page).read()
start, end = "<!-- chaos-report:start -->", "<!-- chaos-report:end -->"
if start in text and end in text:
    head, rest = text.split(start, 1)
    text = head + start + "\n" + report.strip() + "\n" + end + rest.split(end, 1)[1]
    open(page, "w").write(text)
PY
exit $status
