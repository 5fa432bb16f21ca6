#!/usr/bin/env bash
# Checks a SAM template the way `make test` does:
#   1. sam validate --lint
#   2. cfn-lint with the serverless rules, on the SAM template
#   3. offline translation to CloudFormation (aws-sam-translator)
#   4. cfn-lint with the serverless rules and ours (infra/checks/rules), on
#      the translation: where the stream mapping's settings can be seen
#   5. checkov on the translation (suppressions are documented in the template)
# usage: check-template.sh [--rules-only] [TEMPLATE]
set -euo pipefail
root=$(cd "$(dirname "$0")/../.." && pwd)
source "$root/infra/checks/env.sh"
rules_only=false
if [ "${1:-}" = "--rules-only" ]; then rules_only=true; shift; fi
template=${1:-$root/template.yaml}
bin="$root/.venv-infra/bin"
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT

if ! $rules_only; then
  echo "check-template: sam validate --lint"
  offline "$bin/sam" validate --lint --template "$template"
  echo "check-template: cfn-lint (serverless rules) on the SAM template"
  offline "$bin/cfn-lint" --append-rules cfn_lint_serverless.rules -- "$template"
fi
echo "check-template: translate to CloudFormation"
offline "$bin/python" "$root/infra/checks/translate.py" "$template" "$work/template.json"
echo "check-template: cfn-lint (serverless rules + outbox rules) on the translation"
offline "$bin/cfn-lint" --append-rules cfn_lint_serverless.rules --append-rules "$root/infra/checks/rules" -- "$work/template.json"
if ! $rules_only; then
  echo "check-template: checkov"
  offline "$root/.venv-checkov/bin/checkov" -f "$work/template.json" --framework cloudformation \
    --compact --quiet --skip-download
fi
echo "check-template: $template passed"
