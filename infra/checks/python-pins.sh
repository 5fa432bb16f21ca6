#!/usr/bin/env bash
# Proves that every pinned Python tool set resolves on the oldest Python the
# README supports (3.11.0 and newer): each requirements/constraints pair is
# resolved (pip install --dry-run) in a fresh venv of the oldest interpreter
# on this machine, /usr/bin/python3 when it exists (Debian 12: 3.11.2),
# otherwise `python3`. Reaches only PyPI, like `make venv`.
set -euo pipefail
root=$(cd "$(dirname "$0")/../.." && pwd)
python=${PINS_PYTHON:-}
if [ -z "$python" ]; then
  if [ -x /usr/bin/python3 ]; then python=/usr/bin/python3; else python=python3; fi
fi
version=$("$python" -c 'import sys; print("%d.%d.%d" % sys.version_info[:3])')
"$python" -c 'import sys; sys.exit(0 if sys.version_info >= (3, 11) else 1)' \
  || { echo "python-pins: $python is $version; the README supports 3.11.0 and newer" >&2; exit 1; }
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
"$python" -m venv "$work/venv"
pip="$work/venv/bin/pip"
failed=0
for pair in \
  "infra/local/requirements.txt infra/local/constraints.txt" \
  "infra/checks/requirements.txt infra/checks/constraints.txt" \
  "infra/checks/requirements-checkov.txt infra/checks/constraints-checkov.txt"; do
  set -- $pair
  if "$pip" install --quiet --disable-pip-version-check --dry-run -r "$root/$1" -c "$root/$2" >"$work/log" 2>&1; then
    echo "ok - $1 with $2 resolves on Python $version"
  else
    echo "not ok - $1 with $2 does not resolve on Python $version:"
    grep -E "ERROR|conflict|requires" "$work/log" | head -10
    failed=$((failed + 1))
  fi
done
[ "$failed" -eq 0 ]
