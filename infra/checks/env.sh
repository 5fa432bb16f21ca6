# Sourced by the check scripts: offline, loopback-only settings for the AWS
# tools, and `offline CMD`, which runs CMD without any network at all
# (a private network namespace) when the machine allows it.
export AWS_REGION=us-east-1 AWS_DEFAULT_REGION=us-east-1
export AWS_ACCESS_KEY_ID=test AWS_SECRET_ACCESS_KEY=test
export AWS_EC2_METADATA_DISABLED=true AWS_CONFIG_FILE=/dev/null AWS_SHARED_CREDENTIALS_FILE=/dev/null
export SAM_CLI_TELEMETRY=0 BC_SKIP_MAPPING=TRUE CHECKOV_RUN_SCA_PACKAGE_SCAN_V2=false
unset AWS_PROFILE || true
if unshare -n true 2>/dev/null; then
  offline() { unshare -n "$@"; }
else
  offline() { "$@"; }
fi
