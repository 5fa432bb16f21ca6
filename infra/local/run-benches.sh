#!/usr/bin/env bash
# run-benches.sh: `make test`'s benches step, under with-local.sh: each bench
# target once in its quick mode (criterion's test mode; BENCH_QUICK=1 for
# the AWS-call counts), so that they keep working. No bench asserts a time.
#
# The bench executables run directly, not through `cargo test --benches`,
# which would also run every lib's and bin's unit tests a second time
# (bench = true by default); `make test` compiled them beforehand
# (build-tests: `--all-targets`), so this only runs them.
set -uo pipefail
root=$(cd "$(dirname "$0")/../.." && pwd)
cd "$root"
python=${PYTHON:-python3}

# target.kind "bench" only (see above).
benches=$(cargo test --workspace --locked --benches --no-run --message-format=json |
  "$python" -c '
import json, os, sys
for line in sys.stdin:
    m = json.loads(line)
    if m.get("reason") == "compiler-artifact" and m.get("executable") and "bench" in m["target"]["kind"]:
        print(os.path.dirname(m["manifest_path"]) + "\t" + m["executable"])
') || { echo "run-benches.sh: listing the bench executables failed" >&2; exit 1; }
[ -n "$benches" ] || { echo "run-benches.sh: no bench executable found" >&2; exit 1; }

status=0
while IFS=$'\t' read -r dir exe; do
  echo "     Running $(basename "$exe") (in ${dir#"$root"/})"
  (cd "$dir" && CARGO_MANIFEST_DIR="$dir" BENCH_QUICK=1 "$exe") || { echo "run-benches.sh: $(basename "$exe") failed" >&2; status=1; }
done <<<"$benches"
exit $status
