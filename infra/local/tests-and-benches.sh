#!/usr/bin/env bash
# tests-and-benches.sh TEST-COMMAND...: `make test`'s last long step, under
# with-local.sh. Runs TEST-COMMAND (nextest, then the doc tests) and, beside
# it, each bench target once in its quick mode (criterion's test mode,
# BENCH_QUICK=1 for the AWS-call counts): the benches mostly wait on the
# local servers, and so do the tests' first minutes (the chaos runs' outages),
# so side by side they take the time of the tests alone (docs/local.md, "How
# long make test takes"). No bench or test asserts a time.
#
# The bench executables run directly, not through `cargo test --benches`: a
# cargo command keeps the build directory locked while its binaries run, and
# the tests build the functions' binaries (`cargo build --bin`) as they go.
# `make test` compiled them beforehand (build-tests: `--all-targets`).
#
# Each part's time lands in .local/make-test-times.txt (timed.sh); the
# benches' output is printed after the tests', whole; the step fails when
# either part does.
set -uo pipefail
root=$(cd "$(dirname "$0")/../.." && pwd)
cd "$root"
timed="$root/infra/local/timed.sh"
python=${PYTHON:-python3}

# target.kind "bench" only: `--benches` also selects every lib's and bin's
# unit tests (bench = true by default), which the test command runs already.
benches=$(cargo test --workspace --locked --benches --no-run --message-format=json 2>/dev/null |
  "$python" -c '
import json, os, sys
for line in sys.stdin:
    m = json.loads(line)
    if m.get("reason") == "compiler-artifact" and m.get("executable") and "bench" in m["target"]["kind"]:
        print(os.path.dirname(m["manifest_path"]) + "\t" + m["executable"])
') || { echo "tests-and-benches.sh: listing the bench executables failed" >&2; exit 1; }
[ -n "$benches" ] || { echo "tests-and-benches.sh: no bench executable found" >&2; exit 1; }

run_benches() {
  local dir exe status=0
  while IFS=$'\t' read -r dir exe; do
    echo "     Running $(basename "$exe") (in ${dir#"$root"/})"
    (cd "$dir" && CARGO_MANIFEST_DIR="$dir" BENCH_QUICK=1 "$exe") || status=1
  done <<<"$benches"
  return $status
}

log="$root/.local/benches.log"
mkdir -p "$root/.local"
export -f run_benches
export benches root
"$timed" benches bash -c run_benches >"$log" 2>&1 &
bench_pid=$!

"$timed" tests "$@"
tests_status=$?

wait "$bench_pid"
bench_status=$?
echo "== the benches, once each in their quick mode (beside the tests) =="
cat "$log"
[ "$bench_status" = 0 ] || echo "tests-and-benches.sh: a bench failed (exit $bench_status; its output is above)" >&2
[ "$tests_status" = 0 ] && [ "$bench_status" = 0 ]
