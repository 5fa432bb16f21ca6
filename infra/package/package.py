"""The reusable stack as a Serverless Application Repository application,
offline (#44; docs/adopt.md, "From the Serverless Application
Repository").

  package.py check
      The application's metadata (`AWS::ServerlessRepo::Application` in
      infra/outbox.yaml) through the code `sam publish` runs (the SAM CLI's
      vendored serverlessrepo library, its SAR client replaced by one that
      records the requests: nothing is sent), and the Serverless Application
      Repository's own constraints on each field; one version for the
      crates (Cargo.toml), the application and CHANGELOG.md; the
      capabilities a consumer must grant, computed from the translated
      template, against those docs/adopt.md and the Terraform example list;
      the Terraform example's parameters against the stack's.

  package.py check-cdk SYNTHESIZED.json
      The CDK example (infra/cdk) as `cdk synth` wrote it: the application
      at this version, its parameters the stack's, the table's stream ARN
      passed, the stack's outputs read.

  package.py build --arch ARCH --functions DIR --out DIR
      What `sam package` turns into what `sam publish` takes: the template
      with each function's `CodeUri` pointing at its zip (`bootstrap` from
      DIR/<LogicalId>/, as `sam build` leaves it), the `Architecture`
      parameter fixed to ARCH (the zips run on that one only), the license
      and readme beside it, SHA256SUMS and capabilities.txt. No AWS endpoint
      is reached: the release workflow runs `sam package` and `sam publish`
      on this directory.
"""
import hashlib
import json
import os
import pathlib
import re
import shutil
import sys
import tomllib
import zipfile

ROOT = pathlib.Path(__file__).resolve().parents[2]
TEMPLATE = ROOT / "infra" / "outbox.yaml"
TERRAFORM = ROOT / "infra" / "terraform" / "main.tf"
ADOPT = ROOT / "docs" / "adopt.md"
CHANGELOG = ROOT / "CHANGELOG.md"
METADATA = "AWS::ServerlessRepo::Application"

os.environ.setdefault("AWS_DEFAULT_REGION", "us-east-1")
os.environ.setdefault("AWS_EC2_METADATA_DISABLED", "true")

# The Serverless Application Repository's constraints (its API reference,
# CreateApplication), which the library leaves to the service.
CONSTRAINTS = {
    "Name": (r"[a-zA-Z0-9-]{1,140}", "1 to 140 letters, digits and hyphens"),
    "Author": (r"[a-z0-9](?:[a-z0-9]|-(?!-))*[a-z0-9]", "lower-case letters, digits and single hyphens"),
    "SemanticVersion": (r"\d+\.\d+\.\d+(?:-[0-9A-Za-z.-]+)?", "a semantic version"),
    "SpdxLicenseId": (r"[A-Za-z0-9.+-]+", "an SPDX identifier"),
    "HomePageUrl": (r"https://\S+", "an https URL"),
    "SourceCodeUrl": (r"https://\S+", "an https URL"),
}
LABEL = re.compile(r"[a-zA-Z0-9+\-_:/@]{1,127}")
# Stamped into the packaged template by `build`, from where the project lives.
URL_FIELDS = ("HomePageUrl", "SourceCodeUrl")


def repository_url():
    """The project's https URL: REPOSITORY_URL, else the GitHub Actions
    run's repository; None when neither is set."""
    url = os.environ.get("REPOSITORY_URL", "").strip()
    if not url and os.environ.get("GITHUB_SERVER_URL") and os.environ.get("GITHUB_REPOSITORY"):
        url = f"{os.environ['GITHUB_SERVER_URL']}/{os.environ['GITHUB_REPOSITORY']}"
    return url.rstrip("/") or None

# Resource types that need a capability from whoever deploys the
# application (the Serverless Application Repository's list).
IAM_TYPES = {"AWS::IAM::Role", "AWS::IAM::Policy", "AWS::IAM::ManagedPolicy", "AWS::IAM::User",
             "AWS::IAM::Group", "AWS::IAM::InstanceProfile", "AWS::IAM::AccessKey",
             "AWS::IAM::UserToGroupAddition"}
NAMED_IAM = {"RoleName", "ManagedPolicyName", "UserName", "GroupName", "InstanceProfileName"}
RESOURCE_POLICY_TYPES = {"AWS::Lambda::Permission", "AWS::IAM::Policy",
                         "AWS::ApplicationAutoScaling::ScalingPolicy", "AWS::S3::BucketPolicy",
                         "AWS::SQS::QueuePolicy", "AWS::SNS::TopicPolicy"}


def shown(path):
    """A path as the messages name it: from the repository's root."""
    return path.relative_to(ROOT) if path.is_relative_to(ROOT) else path


def fail(message):
    sys.exit(f"package.py: {message}")


def workspace_version():
    cargo = tomllib.loads((ROOT / "Cargo.toml").read_text())
    version = cargo.get("workspace", {}).get("package", {}).get("version")
    if not version:
        fail("Cargo.toml has no [workspace.package] version")
    return version


def load(path):
    from samtranslator.yaml_helper import yaml_parse
    return yaml_parse(path.read_text())


def published_requests(template_text):
    """The requests `sam publish` would send for this template (create the
    application, then its version), built and validated by the SAM CLI's own
    serverlessrepo code; the client records them and sends nothing."""
    from samcli.vendor.serverlessrepo import publish_application

    class Recorder:
        def __init__(self):
            self.requests = []

        def create_application(self, **request):
            self.requests.append(("CreateApplication", request))
            return {"ApplicationId": "arn:aws:serverlessrepo:us-east-1:123456789012:applications/offline"}

        def create_application_version(self, **request):
            self.requests.append(("CreateApplicationVersion", request))
            return {}

        def update_application(self, **request):
            self.requests.append(("UpdateApplication", request))
            return {}

    recorder = Recorder()
    publish_application(template_text, sar_client=recorder)
    return recorder.requests


def check_metadata(template, template_text):
    metadata = (template.get("Metadata") or {}).get(METADATA)
    if not metadata:
        fail(f"{shown(TEMPLATE)} has no Metadata.{METADATA}")
    try:
        requests = published_requests(template_text)
    except Exception as e:  # the library's errors name the missing field
        fail(f"sam publish would refuse the metadata: {e}")
    (name, request), = [r for r in requests if r[0] == "CreateApplication"]
    for field in ("Name", "Description", "Author", "SpdxLicenseId", "LicenseUrl", "ReadmeUrl",
                  "Labels", "SemanticVersion"):
        if not request.get(field):
            fail(f"{name} would carry no {field}")
    for field in URL_FIELDS:
        if field in metadata:
            fail(f"{shown(TEMPLATE)} sets {field}: it is stamped by `package.py build` from the repository's "
                 f"URL (REPOSITORY_URL, or GitHub's GITHUB_SERVER_URL/GITHUB_REPOSITORY), never typed")
    for field, (pattern, what) in CONSTRAINTS.items():
        if field in URL_FIELDS:
            continue
        if not re.fullmatch(pattern, str(request[field])):
            fail(f"{field} {request[field]!r} is not {what}")
    if len(request["Description"]) > 256:
        fail(f"Description has {len(request['Description'])} characters, at most 256")
    labels = request["Labels"]
    if len(labels) > 10 or not all(LABEL.fullmatch(label) for label in labels):
        fail(f"Labels {labels}: at most 10, each 1 to 127 of letters, digits and + - _ : / @")
    cargo = tomllib.loads((ROOT / "Cargo.toml").read_text())
    license_id = cargo["workspace"]["package"]["license"]
    if request["SpdxLicenseId"] != license_id:
        fail(f"SpdxLicenseId {request['SpdxLicenseId']} is not the crates' license {license_id}")
    for field in ("LicenseUrl", "ReadmeUrl"):
        if not (TEMPLATE.parent / request[field]).is_file():
            fail(f"{field} {request[field]} is not a file beside {shown(TEMPLATE)}")
    return request


def check_versions(request):
    version = workspace_version()
    cargo = tomllib.loads((ROOT / "Cargo.toml").read_text())
    # The crates inherit it, and the published ones' path dependencies name it.
    for manifest in sorted((ROOT / "crates").glob("*/Cargo.toml")):
        package = tomllib.loads(manifest.read_text())["package"]
        if package.get("version") != {"workspace": True}:
            fail(f"{shown(manifest)}: the version is not the workspace's (version.workspace = true)")
    for name, dep in cargo["workspace"]["dependencies"].items():
        if isinstance(dep, dict) and "path" in dep and "version" in dep and dep["version"] != version:
            fail(f"Cargo.toml: the dependency {name} names version {dep['version']}, not {version}")
    if request["SemanticVersion"] != version:
        fail(f"the application's SemanticVersion {request['SemanticVersion']} is not the crates' {version}")
    if f"## [{version}]" not in CHANGELOG.read_text():
        fail(f"CHANGELOG.md has no section for {version} (## [{version}] - DATE)")
    return version


def translated(template):
    sys.path.insert(0, str(ROOT / "infra" / "checks"))
    from samtranslator.translator.transform import transform
    from translate import NoManagedPolicies

    template = json.loads(json.dumps(template))
    for resource in template.get("Resources", {}).values():
        if resource.get("Type") == "AWS::Serverless::Function":
            resource["Properties"]["CodeUri"] = "s3://packaged-code/function.zip"
    parameters = {"AWS::Region": "us-east-1", "AWS::AccountId": "123456789012", "AWS::Partition": "aws",
                  "AWS::StackName": "outbox", "AWS::URLSuffix": "amazonaws.com"}
    return transform(template, parameters, NoManagedPolicies())


_TRANSLATED = {}


def capabilities(template):
    """What a consumer grants to deploy the application: from the resource
    types of the translated template, and the transform itself (translated
    once per set of resources: the self-test's copies share theirs)."""
    key = json.dumps([template.get("Resources"), template.get("Parameters")], sort_keys=True, default=str)
    if key not in _TRANSLATED:
        _TRANSLATED[key] = translated(template)
    resources = _TRANSLATED[key].get("Resources", {}).values()
    types = {r.get("Type") for r in resources}
    needed = []
    if types & IAM_TYPES:
        named = any(NAMED_IAM & set((r.get("Properties") or {})) for r in resources if r.get("Type") in IAM_TYPES)
        needed.append("CAPABILITY_NAMED_IAM" if named else "CAPABILITY_IAM")
    if types & RESOURCE_POLICY_TYPES:
        needed.append("CAPABILITY_RESOURCE_POLICY")
    if template.get("Transform"):
        needed.append("CAPABILITY_AUTO_EXPAND")
    return needed


def terraform_blocks(text):
    """The Terraform example's application parameters and capabilities."""
    stack = re.search(r'resource "aws_serverlessapplicationrepository_cloudformation_stack" "\w+" \{(.*?)\n\}',
                      text, re.S)
    if not stack:
        fail(f"{shown(TERRAFORM)} has no aws_serverlessapplicationrepository_cloudformation_stack")
    body = stack.group(1)
    params = re.search(r"parameters\s*=\s*\{(.*?)\}", body, re.S)
    caps = re.search(r"capabilities\s*=\s*\[(.*?)\]", body, re.S)
    if not params or not caps:
        fail(f"{shown(TERRAFORM)}: the stack needs parameters and capabilities")
    names = re.findall(r"^\s*(\w+)\s*=", params.group(1), re.M)
    return names, re.findall(r'"(CAPABILITY_\w+)"', caps.group(1))


def check_consumers(template, needed):
    parameters = template.get("Parameters", {})
    required = sorted(p for p, spec in parameters.items() if "Default" not in spec)
    names, granted = terraform_blocks(TERRAFORM.read_text())
    unknown = sorted(set(names) - set(parameters))
    if unknown:
        fail(f"{shown(TERRAFORM)} passes parameters the stack does not have: {unknown}")
    missing = sorted(set(required) - set(names))
    if missing:
        fail(f"{shown(TERRAFORM)} leaves out parameters the stack requires: {missing}")
    if sorted(granted) != sorted(needed):
        fail(f"{shown(TERRAFORM)} grants {granted}; the application needs {needed}")
    adopt = ADOPT.read_text()
    absent = [c for c in needed if c not in adopt]
    if absent:
        fail(f"docs/adopt.md does not list the capabilities {absent}")


def check():
    text = TEMPLATE.read_text()
    template = load(TEMPLATE)
    request = check_metadata(template, text)
    version = check_versions(request)
    needed = capabilities(template)
    check_consumers(template, needed)
    # The Terraform example's outputs: only those every deploy has.
    every = {k for k, o in (template.get("Outputs") or {}).items() if "Condition" not in o}
    read = re.findall(r'outputs\["(\w+)"\]', (TERRAFORM.parent / "outputs.tf").read_text())
    if set(read) - every:
        fail(f"infra/terraform/outputs.tf reads {sorted(set(read) - every)}, which not every deploy has "
             f"(an output with a Condition)")
    print(f"package.py: application {request['Name']} {version}: metadata as sam publish builds it, "
          f"versions agree, capabilities {', '.join(needed)}; the Terraform example passes "
          f"{len(terraform_blocks(TERRAFORM.read_text())[0])} of the stack's parameters")


def check_cdk(synthesized):
    """The CDK example's synthesized template: the application's location
    at this version, its parameters the stack's (none unknown, none required
    missing), the table's stream ARN passed from a table fit for the outbox,
    and the outputs read from the stack's."""
    where = synthesized.name
    cdk = json.loads(synthesized.read_text())
    stack = load(TEMPLATE)
    resources = cdk.get("Resources", {})
    apps = {k: r for k, r in resources.items() if r.get("Type") == "AWS::Serverless::Application"}
    if len(apps) != 1:
        fail(f"{where}: expected one AWS::Serverless::Application, found {len(apps)}")
    (logical, app), = apps.items()
    if cdk.get("Transform") != "AWS::Serverless-2016-10-31":
        fail(f"{where}: no SAM transform (the application resource needs it)")
    location = app["Properties"].get("Location", {})
    version = workspace_version()
    if location.get("SemanticVersion") != version or not location.get("ApplicationId"):
        fail(f"{where}: the application's location {location} is not at version {version}")
    passed = app["Properties"].get("Parameters", {})
    parameters = stack.get("Parameters", {})
    unknown = sorted(set(passed) - set(parameters))
    missing = sorted(p for p, spec in parameters.items() if "Default" not in spec and p not in passed)
    if unknown or missing:
        fail(f"{where}: parameters the stack does not have {unknown}, required ones missing {missing}")
    stream = passed.get("TableStreamArn")
    if not (isinstance(stream, dict) and stream.get("Fn::GetAtt", [None, None])[1] == "StreamArn"):
        fail(f"{where}: TableStreamArn is not the table's StreamArn ({stream})")
    table = resources.get(stream["Fn::GetAtt"][0], {})
    props = table.get("Properties", {})
    if table.get("Type") != "AWS::DynamoDB::Table" \
            or props.get("StreamSpecification", {}).get("StreamViewType") not in ("NEW_IMAGE", "NEW_AND_OLD_IMAGES") \
            or sorted(g["IndexName"] for g in props.get("GlobalSecondaryIndexes", [])) != ["GSI1", "GSI2"] \
            or props.get("TimeToLiveSpecification", {}).get("AttributeName") != "expiresAt":
        fail(f"{where}: the table does not have what the outbox needs (stream, GSI1, GSI2, TTL)")
    if passed.get("TableName") != {"Ref": stream["Fn::GetAtt"][0]}:
        fail(f"{where}: TableName is not that table's")
    outputs = [o.get("Value") for o in cdk.get("Outputs", {}).values()]
    read = [v["Fn::GetAtt"][1].removeprefix("Outputs.") for v in outputs
            if isinstance(v, dict) and "Fn::GetAtt" in v and v["Fn::GetAtt"][0] == logical]
    # An output with a Condition exists only in some deploys: reading it
    # fails the others (DashboardName, with Dashboard false, the default).
    stack_outputs = {k for k, o in stack.get("Outputs", {}).items() if "Condition" not in o}
    if not read or set(read) - stack_outputs:
        fail(f"{where}: outputs read {read}; the stack's that every deploy has are {sorted(stack_outputs)}")
    print(f"package.py: {where}: the application at {version}, {len(passed)} of the stack's parameters "
          f"(the table's stream ARN among them), {len(read)} of its outputs read")


def sha256(path):
    return hashlib.sha256(path.read_bytes()).hexdigest()


def build(arch, functions, out, unpublished=False):
    import yaml
    from samtranslator.yaml_helper import yaml_parse

    template = yaml_parse(TEMPLATE.read_text())
    request = check_metadata(template, TEMPLATE.read_text())
    version = check_versions(request)
    out = out / version / arch
    if out.exists():
        shutil.rmtree(out)
    out.mkdir(parents=True)
    sums = []
    for logical_id, resource in template["Resources"].items():
        if resource.get("Type") != "AWS::Serverless::Function":
            continue
        bootstrap = functions / logical_id / "bootstrap"
        if not bootstrap.is_file():
            fail(f"{bootstrap} is missing: build the functions for {arch} first (sam build)")
        archive = out / f"{logical_id}.zip"
        with zipfile.ZipFile(archive, "w", zipfile.ZIP_DEFLATED) as z:
            info = zipfile.ZipInfo("bootstrap", date_time=(1980, 1, 1, 0, 0, 0))
            info.external_attr = 0o755 << 16
            info.compress_type = zipfile.ZIP_DEFLATED
            z.writestr(info, bootstrap.read_bytes())
        resource["Properties"]["CodeUri"] = archive.name
        # Built already: `sam package` uploads the zip as it is.
        (resource.get("Metadata") or {}).pop("BuildMethod", None)
        (resource.get("Metadata") or {}).pop("BuildProperties", None)
        sums.append(f"{sha256(archive)}  {archive.name}")
    architecture = template["Parameters"]["Architecture"]
    architecture["Default"] = arch
    architecture["AllowedValues"] = [arch]
    # One application per architecture: a version's template runs its zips
    # on one only.
    metadata = template["Metadata"][METADATA]
    metadata["Name"] = f"{metadata['Name']}-{arch.replace('_', '-')}"
    url = repository_url()
    if url is None and not unpublished:
        fail("set REPOSITORY_URL to the project's https URL (in GitHub Actions the run's repository is "
             "used): the application's HomePageUrl and SourceCodeUrl (its tag) are stamped from it")
    if url is not None:
        metadata["HomePageUrl"] = url
        metadata["SourceCodeUrl"] = f"{url}/tree/v{version}"
    for field in URL_FIELDS if url is not None else ():
        pattern, what = CONSTRAINTS[field]
        if not re.fullmatch(pattern, metadata[field]):
            fail(f"{field} {metadata[field]!r} is not {what}")
    for field in ("LicenseUrl", "ReadmeUrl"):
        source = TEMPLATE.parent / metadata[field]
        shutil.copyfile(source, out / source.name)
        metadata[field] = source.name
    needed = capabilities(yaml_parse(TEMPLATE.read_text()))
    packaged = out / "template.yaml"
    packaged.write_text(yaml.safe_dump(template, sort_keys=False, width=120))
    sums.append(f"{sha256(packaged)}  template.yaml")
    (out / "SHA256SUMS").write_text("\n".join(sums) + "\n")
    (out / "capabilities.txt").write_text("\n".join(needed) + "\n")
    print(f"package.py: {out.relative_to(ROOT) if out.is_relative_to(ROOT) else out}: template.yaml, "
          f"{len(sums) - 1} function zips for {arch}, SHA256SUMS, capabilities.txt ({' '.join(needed)})")


def self_test():
    """Each check fails, for its own reason, on a broken copy."""
    import tempfile
    global TEMPLATE, TERRAFORM
    originals = TEMPLATE, TERRAFORM
    cases = [
        ("template", r"Author: \S+", "Author: Outbox Maintainers", "is not lower-case letters"),
        ("template", r"\n    Author: \S+", "", "author properties not provided"),
        ("template", r"SemanticVersion: \S+", "SemanticVersion: 99.0.0", "is not the crates'"),
        ("template", r"SpdxLicenseId: \S+", "SpdxLicenseId: MIT", "is not the crates' license"),
        ("terraform", r"EventBusName(\s+)=", r"EventBus\1    =", "does not have: ['EventBus']"),
        ("terraform", r'\s*"CAPABILITY_AUTO_EXPAND",', "", "the application needs"),
        ("terraform", r"\n\s*TableStreamArn\s*=[^\n]*", "", "leaves out parameters the stack requires"),
    ]
    with tempfile.TemporaryDirectory() as tmp:
        for which, pattern, replacement, expected in cases:
            source = originals[0] if which == "template" else originals[1]
            broken = pathlib.Path(tmp) / source.parent.name / source.name
            broken.parent.mkdir(exist_ok=True)
            text, n = re.subn(pattern, replacement, source.read_text(), count=1)
            assert n == 1, f"self-test: {pattern!r} not in {source.name}"
            broken.write_text(text)
            if which == "template":
                for f in ("LICENSE",):
                    shutil.copyfile(ROOT / f, pathlib.Path(tmp) / f)
                (pathlib.Path(tmp) / "docs").mkdir(exist_ok=True)
                shutil.copyfile(ADOPT, pathlib.Path(tmp) / "docs" / ADOPT.name)
                TEMPLATE, TERRAFORM = broken, originals[1]
            else:
                TEMPLATE, TERRAFORM = originals[0], broken
            try:
                check()
            except SystemExit as e:
                if expected not in str(e.code):
                    sys.exit(f"package.py self-test: {which} with {replacement!r}: failed for another reason: {e.code}")
            else:
                sys.exit(f"package.py self-test: {which} with {replacement!r}: the check passed")
            finally:
                TEMPLATE, TERRAFORM = originals
    print(f"package.py: self-test passed ({len(cases)} broken copies, each refused for its reason)")


def main(args):
    import argparse

    parser = argparse.ArgumentParser(prog="package.py", description="The stack as a SAR application, offline.")
    commands = parser.add_subparsers(dest="command", required=True)
    commands.add_parser("self-test", help="each check refuses a broken copy")
    commands.add_parser("check", help="metadata, versions, capabilities, the Terraform example")
    cdk = commands.add_parser("check-cdk", help="the CDK example's synthesized template")
    cdk.add_argument("synthesized", type=pathlib.Path)
    build_cmd = commands.add_parser("build", help="the packaged template, zips, SHA256SUMS, capabilities")
    build_cmd.add_argument("--arch", required=True, choices=["arm64", "x86_64"])
    build_cmd.add_argument("--functions", required=True, type=pathlib.Path)
    build_cmd.add_argument("--out", required=True, type=pathlib.Path)
    build_cmd.add_argument("--unpublished", action="store_true",
                           help="a check build (make test): no HomePageUrl/SourceCodeUrl when no URL is known")
    options = parser.parse_args(args)
    if options.command == "self-test":
        self_test()
    elif options.command == "check":
        check()
    elif options.command == "check-cdk":
        check_cdk(options.synthesized)
    else:
        build(options.arch, options.functions.resolve(), options.out.resolve(), options.unpublished)


if __name__ == "__main__":
    main(sys.argv[1:])
