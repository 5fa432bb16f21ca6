#!/usr/bin/env bash
# run-benches.sh: `make test`'s benches step, under with-local.sh: each bench
# target once in its quick mode (criterion's test mode; BENCH_QUICK=1 for
# the AWS-call counts), so that they keep working. No bench asserts a time.
#
# The bench executables run directly, not through `cargo test --benches`,
# which would also run every lib's and bin's unit tests a second time
# (bench = true by default); `make test` compiled them beforehand
# (build-tests: `--all-targets`), so this only runs them. The AWS-call
# bench's sections wait on the local servers more than they compute: each
# runs in its own process (BENCH_ONLY), side by side, and their outputs are
# printed in the bench's order. (Quick mode measures nothing; `make bench`
# runs the sections one after the other.)
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
        print(m["target"]["name"] + "\t" + os.path.dirname(m["manifest_path"]) + "\t" + m["executable"])
') || { echo "run-benches.sh: listing the bench executables failed" >&2; exit 1; }
[ -n "$benches" ] || { echo "run-benches.sh: no bench executable found" >&2; exit 1; }

work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
status=0
while IFS=$'\t' read -r name dir exe; do
  echo "     Running $(basename "$exe") (in ${dir#"$root"/})"
  if [ "$name" = aws_calls ]; then
    sections=$(cd "$dir" && BENCH_ONLY=list BENCH_QUICK=1 "$exe") || { echo "run-benches.sh: $name: listing its sections failed" >&2; status=1; continue; }
    # At most BENCH_LANES sections at a time (the two cores are shared
    # with DynamoDB Local and moto), the longest first: the list's order.
    running=0
    for section in $sections; do
      if [ "$running" -ge "${BENCH_LANES:-3}" ]; then wait -n; running=$((running - 1)); fi
      (start=$SECONDS
        cd "$dir" && CARGO_MANIFEST_DIR="$dir" BENCH_QUICK=1 BENCH_ONLY=$section "$exe" >"$work/$section.log" 2>&1
        echo $? >"$work/$section.status"
        echo "     (section $section: $((SECONDS - start)) s)" >>"$work/$section.log") &
      running=$((running + 1))
    done
    wait
    for section in $sections; do
      cat "$work/$section.log"
      if [ "$(cat "$work/$section.status")" != 0 ]; then
        echo "run-benches.sh: $name, section $section, failed" >&2
        status=1
      fi
    done
  else
    (cd "$dir" && CARGO_MANIFEST_DIR="$dir" BENCH_QUICK=1 "$exe") || { echo "run-benches.sh: $(basename "$exe") failed" >&2; status=1; }
  fi
done <<<"$benches"
exit $status
