#!/usr/bin/env bash
# Proves that every pinned Python tool set resolves on the oldest Python the
# README supports (3.11.0 and newer): each requirements/constraints pair is
# resolved by pip (`install --dry-run`: every pin and marker, a wheel or
# sdist for this platform, the packages' Python bounds) in a fresh venv of
# the oldest interpreter on this machine, /usr/bin/python3 when it exists
# (Debian 12: 3.11.2), otherwise `python3`, with the same requirements and
# constraints `make venv` / `make venv-infra` install; the pairs at once.
# Reaches only PyPI.
set -euo pipefail
root=$(cd "$(dirname "$0")/../.." && pwd)
python=${PINS_PYTHON:-}
if [ -z "$python" ]; then
  if [ -x /usr/bin/python3 ]; then python=/usr/bin/python3; else python=python3; fi
fi
version=$("$python" -c 'import sys; print("%d.%d.%d" % sys.version_info[:3])')
"$python" -c 'import sys; sys.exit(0 if sys.version_info >= (3, 11) else 1)' \
  || { echo "python-pins: $python is $version; the README supports 3.11.0 and newer" >&2; exit 1; }
# A stock Debian python3 has no venv module until python3-venv is installed.
"$root/infra/checks/ensure-package.sh" "$python -c 'import ensurepip, venv'" python3-venv
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
# One venv for every pair: a dry run installs nothing (--ignore-installed:
# each pair is resolved on its own, as into an empty venv).
"$python" -m venv "$work/venv"
n=0
for pair in \
  "infra/local/requirements.txt infra/local/constraints.txt" \
  "infra/deploy/requirements.txt infra/deploy/constraints.txt" \
  "infra/checks/requirements.txt infra/checks/constraints.txt" \
  "infra/checks/requirements-checkov.txt infra/checks/constraints-checkov.txt" \
  "infra/contract/requirements.txt infra/contract/constraints.txt" \
  "infra/local/requirements-plot.txt infra/local/constraints-plot.txt" \
  "clients/python/requirements-test.txt clients/python/constraints-test.txt"; do
  set -- $pair
  n=$((n + 1))
  (
    if "$work/venv/bin/pip" install --dry-run --ignore-installed --quiet --disable-pip-version-check \
      -r "$root/$1" -c "$root/$2" >"$work/log-$n" 2>&1; then
      echo "ok - $1 with $2 resolves on Python $version"
    else
      echo "not ok - $1 with $2 does not resolve on Python $version:"
      grep -E "ERROR|conflict|requires" "$work/log-$n" | head -10
      exit 1
    fi
  ) >"$work/result-$n" &
done
failed=0
for job in $(jobs -p); do wait "$job" || failed=$((failed + 1)); done
cat "$work"/result-*
[ "$failed" -eq 0 ]
