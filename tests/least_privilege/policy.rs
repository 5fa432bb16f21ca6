//! The least-privilege checker: a role's grants read from its template
//! (inline policies and the separate policy resources attached to it, each
//! resource resolved to the name the proxy gives it, [`Bindings`]), the
//! calls the Lambda service makes with a function's role from its
//! configuration, and the check that a role grants exactly what was used.

use std::collections::{BTreeSet, HashMap};

use serde_yaml_ng::Value;
use testkit::root;

pub(super) type Grants = BTreeSet<(String, String)>;

/// What each of the template's logical resources is in this test, named as
/// the proxy names resources (`table/<name>`, `queue/<name>`, …).
pub(super) struct Bindings {
    names: HashMap<&'static str, String>,
    sns: bool,
}

impl Bindings {
    pub(super) fn new(sns: bool, names: &[(&'static str, String)]) -> Self {
        Self {
            names: names.iter().cloned().collect(),
            sns,
        }
    }

    fn name(&self, logical: &str) -> String {
        if logical.ends_with("LogGroup") {
            return format!("log-group/{logical}");
        }
        // The reusable stack's parameters, as the orders example passes
        // them (template.yaml's `Outbox` application).
        match logical {
            "TableStreamArn" => return format!("{}/stream", self.name("OutboxTable")),
            "EventTopicArn" => return self.name("EventTopic"),
            _ => {}
        }
        self.names
            .get(logical)
            .cloned()
            .unwrap_or_else(|| panic!("no binding for the template's {logical}"))
    }

    /// An ARN the reusable stack builds with `!Sub` from its parameters
    /// (`arn:${AWS::Partition}:dynamodb:…:table/${TableName}/index/${PendingIndex}`),
    /// named as the proxy names it (`table/<name>/index/GSI1`).
    fn arn(&self, template: &str) -> String {
        let mut arn = String::new();
        let mut rest = template;
        while let Some(at) = rest.find("${") {
            arn.push_str(&rest[..at]);
            let end = at + rest[at..].find('}').expect("closed ${");
            let variable = &rest[at + 2..end];
            let value = match variable {
                v if v.starts_with("AWS::") => "x".to_owned(),
                "TableName" => self.name("OutboxTable").replacen("table/", "", 1),
                "EventBusName" => self.name("EventBus").replacen("event-bus/", "", 1),
                other => outbox_parameter_default(other),
            };
            arn.push_str(&value);
            rest = &rest[end + 1..];
        }
        arn.push_str(rest);
        let resource = arn.splitn(6, ':').nth(5).unwrap_or_else(|| panic!("{arn}"));
        resource
            .strip_suffix("/*")
            .filter(|r| r.ends_with("/stream"))
            .unwrap_or(resource)
            .to_owned()
    }

    fn condition(&self, name: &str) -> bool {
        match name {
            "UseSns" => self.sns,
            // The Custom Event Bus branch: taken where the test binds its
            // ARN (the reusable stack's `EventBusArn`).
            "UseCustomBus" => self.names.contains_key("EventBusArn"),
            "UseEventBridge" => !self.sns,
            // The stack creates its bus (no ExistingEventBusName).
            "NoExistingBus" => true,
            // Large events: on where the test binds the reusable stack's
            // `PayloadBucket` (its own bucket, which the stack does not create).
            "HasPayloadBucket" | "ProjectorReadsPayloads" => {
                self.names.contains_key("PayloadBucket")
            }
            "CreatePayloadBucket" => false,
            other => panic!("unknown condition {other}"),
        }
    }

    /// The branch an `!If [condition, then, else]` takes.
    fn branch<'v>(&self, arguments: &'v Value) -> &'v Value {
        let branches = arguments.as_sequence().expect("!If list");
        let condition = branches[0].as_str().expect("condition name");
        &branches[if self.condition(condition) { 1 } else { 2 }]
    }

    /// The resources a policy's `Resource` (or a property) names.
    fn resolve(&self, value: &Value) -> Vec<String> {
        match value {
            Value::String(s) if s == "*" => vec!["*".into()],
            Value::Sequence(list) => list.iter().flat_map(|v| self.resolve(v)).collect(),
            Value::Tagged(tagged) => {
                let arg = tagged.value.as_str().unwrap_or("");
                match tagged.tag.to_string().as_str() {
                    "!GetAtt" => {
                        let (logical, attribute) =
                            arg.split_once('.').unwrap_or_else(|| panic!("{arg}"));
                        match attribute {
                            "Arn" => vec![self.name(logical)],
                            // The nested outbox stack's bucket (the example's
                            // ProjectorPayloadPolicy): the bound PayloadBucket.
                            "Outputs.PayloadBucketName" if logical == "Outbox" => {
                                vec![self.name("PayloadBucket")]
                            }
                            "StreamArn" => vec![format!("{}/stream", self.name(logical))],
                            other => panic!("unknown attribute {other}"),
                        }
                    }
                    "!Ref" => vec![self.name(arg)],
                    "!Sub" if arg.starts_with("arn:") => vec![self.arn(arg)],
                    // `!Sub [template, {Variable: value}]`: each variable
                    // resolved, then the ARN as above.
                    "!Sub" if tagged.value.is_sequence() => {
                        let parts = tagged.value.as_sequence().expect("!Sub list");
                        let mut arn = parts[0].as_str().expect("a template").to_owned();
                        for (name, value) in parts[1].as_mapping().expect("variables") {
                            let name = name.as_str().expect("a variable");
                            let [value] = self.resolve(value).try_into().expect("one value");
                            arn = arn.replace(&format!("${{{name}}}"), &value);
                        }
                        vec![self.arn(&arn)]
                    }
                    "!Sub" => {
                        let rest = arg
                            .strip_prefix("${")
                            .and_then(|r| r.split_once(".Arn}"))
                            .unwrap_or_else(|| panic!("unsupported !Sub {arg}"));
                        let suffix = if rest.1 == "/stream/*" {
                            "/stream"
                        } else {
                            rest.1
                        };
                        vec![format!("{}{suffix}", self.name(rest.0))]
                    }
                    "!If" => self.resolve(self.branch(&tagged.value)),
                    other => panic!("unsupported {other} {arg}"),
                }
            }
            other => panic!("unsupported resource {other:?}"),
        }
    }
}

/// The template that defines `logical`: the reusable stack
/// (`infra/outbox.yaml`: the publisher, the sweeper and their roles) or
/// the orders example (`template.yaml`: the writer, the projector).
fn template(logical: &str) -> Value {
    let outbox = read(devkit::OUTBOX_TEMPLATE);
    if !outbox["Resources"][logical].is_null() {
        return outbox;
    }
    read("template.yaml")
}

/// A parameter's default in the reusable stack (the key schema's names).
fn outbox_parameter_default(name: &str) -> String {
    let outbox = read(devkit::OUTBOX_TEMPLATE);
    match &outbox["Parameters"][name]["Default"] {
        Value::String(s) => s.clone(),
        other => panic!("no default for the parameter {name}: {other:?}"),
    }
}

fn read(path: &str) -> Value {
    devkit::template::read(&root().join(path)).unwrap()
}

fn strings(value: &Value) -> Vec<String> {
    match value {
        Value::String(s) => vec![s.clone()],
        Value::Sequence(list) => list
            .iter()
            .map(|v| v.as_str().expect("a string").to_owned())
            .collect(),
        other => panic!("expected strings, got {other:?}"),
    }
}

fn refs(value: &Value, logical: &str) -> bool {
    match value {
        Value::Tagged(t) => {
            t.tag == "!Ref" && t.value.as_str() == Some(logical)
                || t.tag == "!GetAtt" && t.value.as_str() == Some(&format!("{logical}.Arn"))
        }
        Value::Sequence(list) => list.iter().any(|v| refs(v, logical)),
        _ => false,
    }
}

/// Every (action, resource) pair the role is granted: its inline policies
/// and the separate policy resources attached to it.
pub(super) fn granted(role: &str, bindings: &Bindings) -> Grants {
    granted_in(&template(role), role, bindings)
}

pub(super) fn granted_in(template: &Value, role: &str, bindings: &Bindings) -> Grants {
    let resources = template["Resources"].as_mapping().unwrap();
    let properties = &template["Resources"][role]["Properties"];
    assert!(
        properties["ManagedPolicyArns"].is_null(),
        "{role}: a managed policy could grant anything; list the statements instead"
    );
    let mut documents: Vec<Value> = properties["Policies"]
        .as_sequence()
        .cloned()
        .unwrap_or_default()
        .iter()
        .map(|p| p["PolicyDocument"].clone())
        .collect();
    for (_, resource) in resources {
        let kind = resource["Type"].as_str().unwrap_or("");
        // A policy resource with a condition exists only where it holds.
        let exists = || {
            resource["Condition"]
                .as_str()
                .is_none_or(|condition| bindings.condition(condition))
        };
        if matches!(kind, "AWS::IAM::Policy" | "AWS::IAM::ManagedPolicy")
            && refs(&resource["Properties"]["Roles"], role)
            && exists()
        {
            documents.push(resource["Properties"]["PolicyDocument"].clone());
        }
    }
    let mut grants = Grants::new();
    for document in documents {
        for statement in document["Statement"].as_sequence().unwrap() {
            // A statement chosen by conditions, nested or not.
            let mut statement = statement.clone();
            while let Value::Tagged(tagged) = &statement {
                if tagged.tag != "!If" {
                    break;
                }
                statement = bindings.branch(&tagged.value).clone();
            }
            // A statement the conditions leave out.
            if let Value::Tagged(t) = &statement {
                if t.tag == "!Ref" && t.value.as_str() == Some("AWS::NoValue") {
                    continue;
                }
            }
            assert_eq!(statement["Effect"].as_str(), Some("Allow"), "{role}");
            assert!(
                statement["NotAction"].is_null() && statement["NotResource"].is_null(),
                "{role}: NotAction/NotResource grant by omission"
            );
            for action in strings(&statement["Action"]) {
                assert!(!action.contains('*'), "{role}: wildcard action {action}");
                for resource in bindings.resolve(&statement["Resource"]) {
                    grants.insert((action.clone(), resource));
                }
            }
        }
    }
    grants
}

/// The calls the Lambda service makes with the role of `function`, from the
/// function's configuration in the template (see the module's doc).
pub(super) fn by_the_service(function: &str, bindings: &Bindings) -> Grants {
    let template = template(function);
    let properties = &template["Resources"][function]["Properties"];
    let globals = &template["Globals"]["Function"];
    let mut grants = Grants::new();
    let mut add = |actions: &[&str], resources: Vec<String>| {
        for action in actions {
            for resource in &resources {
                grants.insert(((*action).to_owned(), resource.clone()));
            }
        }
    };
    let log_group = &properties["LoggingConfig"]["LogGroup"];
    add(
        &["logs:CreateLogStream", "logs:PutLogEvents"],
        bindings.resolve(log_group),
    );
    let tracing = if properties["Tracing"].is_null() {
        &globals["Tracing"]
    } else {
        &properties["Tracing"]
    };
    // `Tracing: !Ref Tracing`: the parameter's default. PassThrough records
    // a request traced upstream, so it needs the same grant as Active.
    let tracing = match tracing {
        Value::Tagged(t) if t.tag == "!Ref" => {
            &template["Parameters"][t.value.as_str().unwrap_or_default()]["Default"]
        }
        other => other,
    };
    if matches!(tracing.as_str(), Some("Active" | "PassThrough")) {
        add(
            &["xray:PutTraceSegments", "xray:PutTelemetryRecords"],
            vec!["*".into()],
        );
    }
    let on_failure = |config: &Value| -> Vec<String> {
        let destination = &config["DestinationConfig"]["OnFailure"];
        if destination["Type"].as_str() == Some("SQS") {
            bindings.resolve(&destination["Destination"])
        } else {
            Vec::new()
        }
    };
    add(
        &["sqs:SendMessage"],
        on_failure(&properties["EventInvokeConfig"]),
    );
    for (_, event) in properties["Events"].as_mapping().into_iter().flatten() {
        let event_properties = &event["Properties"];
        match event["Type"].as_str() {
            Some("DynamoDB") => {
                add(
                    &[
                        "dynamodb:DescribeStream",
                        "dynamodb:GetRecords",
                        "dynamodb:GetShardIterator",
                        "dynamodb:ListStreams",
                    ],
                    bindings.resolve(&event_properties["Stream"]),
                );
                add(&["sqs:SendMessage"], on_failure(event_properties));
            }
            Some("SQS") => add(
                &[
                    "sqs:ReceiveMessage",
                    "sqs:DeleteMessage",
                    "sqs:GetQueueAttributes",
                ],
                bindings.resolve(&event_properties["Queue"]),
            ),
            // A schedule's dead-letter queue is written by EventBridge
            // under the queue's own policy, not by this role.
            Some("Schedule") => {}
            other => panic!("{function}: unknown event source {other:?}"),
        }
    }
    grants
}

/// Checks that the role grants exactly what was used: the calls seen plus
/// the service's own. Both differences are printed when they are not empty.
pub(super) fn assert_exact(role: &str, function: &str, bindings: &Bindings, seen: &Grants) {
    let service = by_the_service(function, bindings);
    let used: Grants = seen.union(&service).cloned().collect();
    let granted = granted(role, bindings);
    let missing: Vec<_> = used.difference(&granted).collect();
    let unused: Vec<_> = granted.difference(&used).collect();
    assert!(
        missing.is_empty() && unused.is_empty(),
        "{role}: used but not granted {missing:?}; granted but not used {unused:?}"
    );
}
