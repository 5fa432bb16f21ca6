#!/usr/bin/env bash
# Checks SAM templates the way `make test` does:
#   1. sam validate --lint, on each template
#   2. cfn-lint with the serverless rules, on the SAM templates
#   3. offline translation to CloudFormation (aws-sam-translator)
#   4. cfn-lint with the serverless rules and ours (infra/checks/rules), on
#      the translations: where the stream mapping's settings can be seen
#   5. checkov on the translations (suppressions are documented in the template)
# Every tool runs once for all the templates given (but sam validate, which
# takes one): its start-up is most of its time.
#
# usage: check-template.sh [--rules-only] [--parseable] [TEMPLATE...]
#   --rules-only  steps 3 and 4 only (infra/checks/broken-copies.sh)
#   --parseable   step 4 in cfn-lint's parseable format, one finding a line:
#                 DIR/NAME.json:LINE:COL:LINE:COL:ID:MESSAGE, where NAME is the
#                 template's file name without .yaml (names must differ)
set -euo pipefail
root=$(cd "$(dirname "$0")/../.." && pwd)
source "$root/infra/checks/env.sh"
rules_only=false
format=()
while [ $# -gt 0 ]; do
  case $1 in
    --rules-only) rules_only=true; shift ;;
    --parseable) format=(--format parseable); shift ;;
    *) break ;;
  esac
done
[ $# -gt 0 ] || set -- "$root/template.yaml"
bin="$root/.venv-infra/bin"
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT

translate=() translations=()
for template in "$@"; do
  name=$(basename "$template" .yaml)
  if [ -e "$work/$name.json" ]; then
    echo "check-template: two templates named $name.yaml" >&2
    exit 2
  fi
  : >"$work/$name.json"
  translate+=("$template" "$work/$name.json")
done

status=0
if ! $rules_only; then
  for template in "$@"; do
    echo "check-template: sam validate --lint $template"
    offline "$bin/sam" validate --lint --template "$template" || status=1
  done
  echo "check-template: cfn-lint (serverless rules) on the SAM templates"
  offline "$bin/cfn-lint" --append-rules cfn_lint_serverless.rules -- "$@" || status=1
fi
echo "check-template: translate to CloudFormation"
offline "$bin/python" "$root/infra/checks/translate.py" "${translate[@]}" || status=1
# What did not translate has no JSON to check (translate.py said why).
for json in "$work"/*.json; do
  if [ -s "$json" ]; then translations+=("$json"); else rm -f "$json"; fi
done
if [ ${#translations[@]} -gt 0 ]; then
  echo "check-template: cfn-lint (serverless rules + outbox rules) on the translations"
  offline "$bin/cfn-lint" "${format[@]}" --append-rules cfn_lint_serverless.rules \
    --append-rules "$root/infra/checks/rules" -- "${translations[@]}" || status=1
  if ! $rules_only; then
    echo "check-template: checkov"
    checkov=()
    for json in "${translations[@]}"; do checkov+=(-f "$json"); done
    offline "$root/.venv-checkov/bin/checkov" "${checkov[@]}" --framework cloudformation \
      --compact --quiet --skip-download || status=1
  fi
fi
if [ $status -eq 0 ]; then
  echo "check-template: passed: $*"
fi
exit $status
