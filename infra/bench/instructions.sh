#!/usr/bin/env bash
# Instructions per record of the publisher's invocation and of its decode,
# counted by callgrind (valgrind), which machine noise does not move: each
# mode runs with 1 and with 11 invocations of a 100-record batch, and the
# difference is divided by 1,000 records, so the process start and the
# first invocation's warm-up cancel out. Built with the shipped profile.
# Prints a markdown table (docs/performance.md §2).
set -euo pipefail
root=$(cd "$(dirname "$0")/../.." && pwd)
cd "$root"
if ! command -v valgrind > /dev/null; then
  if [ "$(id -u)" = 0 ] && command -v apt-get > /dev/null; then
    apt-get install -y -qq valgrind > /dev/null
  else
    echo "valgrind is needed (Debian: apt-get install valgrind)" >&2
    exit 1
  fi
fi
bin=$(cargo bench --locked -p outbox-publisher --bench instructions --no-run --message-format=json 2> /dev/null \
  | python3 -c 'import json, sys
for line in sys.stdin:
    m = json.loads(line)
    if m.get("reason") == "compiler-artifact" and m["target"]["name"] == "instructions" and m.get("executable"):
        print(m["executable"])')
out=$(mktemp -d)
trap 'rm -rf "$out"' EXIT
count() {
  valgrind --tool=callgrind --callgrind-out-file="$out/cg" "$bin" "$1" "$2" 2>&1 > /dev/null \
    | sed -n 's/.*Collected : \([0-9]*\).*/\1/p'
}
echo "| what (\`benches/instructions.rs\`, 100-record batches) | instructions per record |"
echo "| --- | --- |"
for mode in invocation lean-decode runtime-pass typed-decode; do
  one=$(count "$mode" 1)
  eleven=$(count "$mode" 11)
  echo "| \`$mode\` | $(( (eleven - one) / 1000 )) |"
done
echo
echo "valgrind: $(valgrind --version); binary built at $(git describe --always --dirty)"
