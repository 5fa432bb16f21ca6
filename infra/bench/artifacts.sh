#!/usr/bin/env bash
# Artifact sizes: each function's `bootstrap` from `cargo lambda build
# --release`, and its zip, for x86_64 and (when the Rust target is installed)
# arm64. Prints a Markdown table.
set -euo pipefail
root=$(cd "$(dirname "$0")/../.." && pwd)
cd "$root"
export PATH="$root/.venv/bin:$PATH"
python="$root/.venv/bin/python"

sizes() { # target-dir label
  for f in writer publisher sweeper projector; do
    bin="$1/lambda/$f/bootstrap"
    zip=$("$python" -c "import io,sys,zipfile; b=io.BytesIO(); z=zipfile.ZipFile(b,'w',zipfile.ZIP_DEFLATED); z.write(sys.argv[1],'bootstrap'); z.close(); print(len(b.getvalue()))" "$bin")
    printf '| %s | %s | %s | %s |\n' "$f" "$2" "$(stat -c %s "$bin" | numfmt --grouping)" "$(echo "$zip" | numfmt --grouping)"
  done
}

echo "| function | architecture | bootstrap (bytes) | zip (bytes) |"
echo "|---|---|---|---|"
# One function per build, as `sam build` does: each links only the features
# its own crate enables (the writer and the projector no sink client).
for f in writer publisher sweeper projector; do
  cargo lambda build --release --locked --x86-64 --bin "$f" >/dev/null 2>&1
done
sizes target x86_64
if rustup target list --installed 2>/dev/null | grep -q aarch64-unknown-linux-gnu; then
  for f in writer publisher sweeper projector; do
    cargo lambda build --release --locked --arm64 --bin "$f" --target-dir target/arm64 >/dev/null 2>&1
  done
  sizes target/arm64 arm64
else
  echo "| all | arm64 | not built: \`rustup target add aarch64-unknown-linux-gnu\` needs a download this machine cannot make | |"
fi
