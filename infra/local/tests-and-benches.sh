#!/usr/bin/env bash
# tests-and-benches.sh TEST-COMMAND...: `make test`'s long tail. Runs, one
# after the other and each under its own with-local.sh (fresh local servers),
# TEST-COMMAND (nextest, then the doc tests) and each bench target once in
# its quick mode (criterion's test mode; BENCH_QUICK=1 for the AWS-call
# counts). Beside them, `make sam-build-check` (`sam build` of the four
# functions, offline) runs at the idle CPU priority (SCHED_IDLE): it only
# compiles, and gets a core only while the tests and benches, which mostly
# wait on the local servers and the function processes, leave one unused
# (docs/local.md, "How long make test takes"). No test or bench asserts a
# time; a test with a deadline keeps its CPU first.
#
# The bench executables run directly, not through `cargo test --benches`,
# which would also run every lib's and bin's unit tests again (bench = true
# by default); `make test` compiled them beforehand (build-tests:
# `--all-targets`).
#
# Each part's time lands in .local/make-test-times.txt (timed.sh); the
# sam build's output is printed whole after the rest; the step fails when any
# part does.
set -uo pipefail
root=$(cd "$(dirname "$0")/../.." && pwd)
cd "$root"
timed="$root/infra/local/timed.sh"
with_local="$root/infra/local/with-local.sh"
python=${PYTHON:-python3}
mkdir -p "$root/.local"

idle=(nice -n 19)
chrt --idle 0 true 2>/dev/null && idle=(chrt --idle 0)
sam_log="$root/.local/sam-build-check.log"
"$timed" sam-build-check "${idle[@]}" make --no-print-directory sam-build-check >"$sam_log" 2>&1 &
sam_pid=$!

"$timed" tests "$with_local" "$@"
tests_status=$?

# target.kind "bench" only (see above).
benches=$(cargo test --workspace --locked --benches --no-run --message-format=json 2>/dev/null |
  "$python" -c '
import json, os, sys
for line in sys.stdin:
    m = json.loads(line)
    if m.get("reason") == "compiler-artifact" and m.get("executable") and "bench" in m["target"]["kind"]:
        print(os.path.dirname(m["manifest_path"]) + "\t" + m["executable"])
')
run_benches() {
  local dir exe status=0
  [ -n "$benches" ] || { echo "tests-and-benches.sh: no bench executable found" >&2; return 1; }
  while IFS=$'\t' read -r dir exe; do
    echo "     Running $(basename "$exe") (in ${dir#"$root"/})"
    (cd "$dir" && CARGO_MANIFEST_DIR="$dir" BENCH_QUICK=1 "$exe") || status=1
  done <<<"$benches"
  return $status
}
export -f run_benches
export benches root
"$timed" benches "$with_local" bash -c run_benches
bench_status=$?

wait "$sam_pid"
sam_status=$?
echo "== make sam-build-check (beside the tests and benches, at the idle CPU priority) =="
cat "$sam_log"
[ "$tests_status" = 0 ] || echo "tests-and-benches.sh: the tests failed (exit $tests_status)" >&2
[ "$bench_status" = 0 ] || echo "tests-and-benches.sh: a bench failed (exit $bench_status)" >&2
[ "$sam_status" = 0 ] || echo "tests-and-benches.sh: sam-build-check failed (exit $sam_status; its output is above)" >&2
[ "$tests_status" = 0 ] && [ "$bench_status" = 0 ] && [ "$sam_status" = 0 ]
