#!/usr/bin/env bash
# ensure-package.sh TEST PACKAGE...: when the shell test TEST fails, install
# the Debian PACKAGEs: with apt-get as root, through sudo otherwise, and
# where neither can, print the command to run and fail. Used by the
# Makefile's ENSURE_* helpers and infra/checks/python-pins.sh.
set -euo pipefail
test_command=$1
shift
if bash -c "$test_command" >/dev/null 2>&1; then
  exit 0
fi
if [ "$(id -u)" -eq 0 ]; then
  apt-get update -qq && apt-get install -y -qq "$@"
elif command -v sudo >/dev/null 2>&1 && sudo -n true 2>/dev/null; then
  sudo apt-get update -qq && sudo apt-get install -y -qq "$@"
else
  echo "this step needs $*, which only root can install here; run:" >&2
  echo "  sudo apt-get update && sudo apt-get install -y $*" >&2
  exit 1
fi
