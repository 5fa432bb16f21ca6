#!/usr/bin/env bash
# The release-profile matrix of docs/performance.md §4: for each profile
# variant, the `publisher` built alone (as `sam build` builds it) in its own
# target directory, its bootstrap and zip size, the handler's CPU per record
# (criterion, `publisher_decode_and_build/100`, built with the same profile)
# and the cold-start proxy (median of PROFILE_RUNS). Prints a Markdown table.
# Each variant is a full release build: about 4 minutes each on 2 cores.
#
#   PROFILE_FUNCTION  the function to build (default publisher)
#   PROFILE_VARIANTS  names from the list below (default all)
#   PROFILE_RUNS      cold-start runs per variant (default 15)
set -euo pipefail
root=$(cd "$(dirname "$0")/../.." && pwd)
cd "$root"
export PATH="$root/.venv/bin:$PATH"
python="$root/.venv/bin/python"
fn=${PROFILE_FUNCTION:-publisher}
runs=${PROFILE_RUNS:-15}

# name | opt-level | lto | codegen-units | cargo features. `panic` is not a variant:
# `cargo lambda build` (what `sam build` runs) sets panic = "abort" itself
# when the workspace does not, overriding the environment; Cargo.toml now
# says so explicitly.
# The TLS provider is the features column: rustls on ring (the default) or
# on aws-lc-rs (`outbox-runtime/tls-aws-lc`, the SDK's own default).
variants=(
  "o3-fat|3|fat|1|"
  "o3-thin|3|thin|1|"
  "os-fat|s|fat|1|"
  "oz-fat|z|fat|1|"
  "os-fat-awslc|s|fat|1|outbox-runtime/tls-aws-lc"
)
selected=${PROFILE_VARIANTS:-}

echo "| variant | opt-level | LTO | TLS | bootstrap (bytes) | zip (bytes) | CPU per record, batch of 100 (µs) | cold-start proxy, median (ms) |"
echo "|---|---|---|---|---|---|---|---|"
for v in "${variants[@]}"; do
  IFS='|' read -r name opt lto cgu features <<<"$v"
  featargs=()
  tls=ring
  if [ -n "$features" ]; then featargs=(--features "$features"); tls=aws-lc-rs; fi
  if [ -n "$selected" ] && [[ ",$selected," != *",$name,"* ]]; then continue; fi
  dir="$root/target/profiles/$name"
  export CARGO_PROFILE_RELEASE_OPT_LEVEL="$opt" CARGO_PROFILE_RELEASE_LTO="$lto" \
    CARGO_PROFILE_RELEASE_CODEGEN_UNITS="$cgu"
  mkdir -p "$dir"
  CARGO_TARGET_DIR="$dir" cargo lambda build --release --locked --x86-64 --bin "$fn" "${featargs[@]}" >"$dir/build.log" 2>&1
  bin="$dir/lambda/$fn/bootstrap"
  size=$(stat -c %s "$bin")
  zip=$("$python" -c "import io,sys,zipfile; b=io.BytesIO(); z=zipfile.ZipFile(b,'w',zipfile.ZIP_DEFLATED); z.write(sys.argv[1],'bootstrap'); z.close(); print(len(b.getvalue()))" "$bin")
  # The bench profile inherits the release settings (panic is always
  # unwind in benches: criterion needs it).
  cpu=$(CARGO_TARGET_DIR="$dir" cargo bench --locked -p outbox-publisher --bench decode "${featargs[@]}" -- \
        --warm-up-time 1 --measurement-time 3 'publisher_decode_and_build/100$' 2>/dev/null \
      | "$python" -c '
import re, sys
text = sys.stdin.read()
m = re.search(r"time:\s+\[\S+ \S+ (\S+) (\S+)", text)
unit = {"ns": 1e-3, "µs": 1, "us": 1, "ms": 1e3, "s": 1e6}
print("%.2f" % (float(m.group(1)) * unit[m.group(2)] / 100) if m else "n/a")')
  cold=$(infra/local/with-local.sh bash -c '
    set -euo pipefail
    eval "$(target/debug/devkit provision prof-orders prof-bus outbox.orders)"
    source infra/local/lib.sh
    export_env "$(target/debug/devkit env --table "$table" --stream "$stream" --bus "$bus" publisher)"
    .venv/bin/python infra/bench/coldstart.py '"$runs"' '"$fn"'='"$bin"':events/publisher-mixed-batch.json
  ' 2>/dev/null | awk -F'|' -v f="$fn" '$2 ~ f {gsub(/ /,"",$3); print $3}')
  printf '| %s | %s | %s | %s | %s | %s | %s | %s |\n' "$name" "$opt" "$lto" "$tls" \
    "$(printf "%s" "$size" | sed ":a;s/\B[0-9]\{3\}\>/,&/;ta")" "$(printf "%s" "$zip" | sed ":a;s/\B[0-9]\{3\}\>/,&/;ta")" "$cpu" "${cold:-n/a}"
done
