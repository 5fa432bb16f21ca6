#!/usr/bin/env bash
# timed.sh STEP CMD...: runs CMD and appends "STEP <seconds> <status>" to
# .local/make-test-times.txt, so that `make test` leaves where its time went
# (docs/local.md, "How long make test takes").
set -uo pipefail
step=$1; shift
root=$(cd "$(dirname "$0")/../.." && pwd)
mkdir -p "$root/.local"
start=$(date +%s)
"$@"
status=$?
echo "$step $(( $(date +%s) - start )) $status" >>"$root/.local/make-test-times.txt"
exit $status
