//! What runs on a [`Stack`]: the functions' binaries under the local Lambda
//! runtime with the templates' environment, the library's store and sink on
//! its resources (calls counted, or through a fault proxy), the mapping
//! pump on its stream, and the operator's operations and binary.

use super::*;

impl Stack {
    /// `function`'s binary under the local Lambda runtime, with the
    /// environment the templates give it on this stack (the template
    /// parameters `parameters` other than their defaults), the loopback
    /// endpoints, and the variables `extra` on top: each named by the test
    /// that needs it, with its reason beside it.
    pub fn function(
        &self,
        function: devkit::Function,
        parameters: &[(&str, &str)],
        extra: &[(&str, &str)],
    ) -> crate::lambda::LambdaFunction {
        self.function_through(function, None, parameters, extra)
    }

    /// [`Stack::function`] with every AWS call of the process sent to
    /// `endpoint` (a fault proxy's) when one is given.
    pub fn function_through(
        &self,
        function: devkit::Function,
        endpoint: Option<&str>,
        parameters: &[(&str, &str)],
        extra: &[(&str, &str)],
    ) -> crate::lambda::LambdaFunction {
        self.function_with(function, endpoint, self.env(function, parameters), extra)
    }

    /// `function` of another stack deployed on this table: the templates'
    /// environment with `stack_name` as `AWS::StackName` (so its own
    /// `STACK_NAME` and `STACK_ID`), as a second `sam deploy` of the
    /// reusable stack on the same table gives it.
    pub fn function_of_stack(
        &self,
        stack_name: &str,
        function: devkit::Function,
        parameters: &[(&str, &str)],
    ) -> crate::lambda::LambdaFunction {
        let mut deployment = self.deployment.clone();
        deployment.stack_name = stack_name.to_owned();
        let env = parameters
            .iter()
            .fold(deployment, |d, (k, v)| d.with_parameter(k, v))
            .env_vec(function)
            .unwrap_or_else(|e| panic!("{} from the templates: {e}", function.logical_id()));
        self.function_with(function, None, env, &[])
    }

    fn function_with(
        &self,
        function: devkit::Function,
        endpoint: Option<&str>,
        templates: Vec<(String, String)>,
        extra: &[(&str, &str)],
    ) -> crate::lambda::LambdaFunction {
        let mut env: Vec<(String, String)> = crate::lambda::loopback_env();
        if let Some(endpoint) = endpoint {
            env.extend(devkit::endpoint_env_at(endpoint));
        }
        env.extend(templates);
        env.extend(
            extra
                .iter()
                .map(|(k, v)| ((*k).to_owned(), (*v).to_owned())),
        );
        crate::lambda::LambdaFunction::new(crate::lambda::FunctionSpec {
            name: function.binary().into(),
            binary: crate::lambda::binary(function.binary()).expect("function binary"),
            env,
            timeout: Duration::from_secs(60),
            log: std::env::temp_dir().join(format!(
                "{}-{}.log",
                crate::unique(&self.table),
                function.binary()
            )),
        })
    }

    /// The operator's operations (`outboxctl`) on this stack's table.
    pub fn operations(&self) -> outboxctl::Operations<DynamoStore> {
        outboxctl::Operations::new(
            DynamoStore::new(self.ddb.clone(), &self.table, 8).with_keys(self.keys.clone()),
        )
    }

    /// The `outboxctl` binary pointed at this stack's table: a method per
    /// command.
    pub fn operator(&self) -> crate::Operator {
        crate::Operator::new(&self.table)
    }

    /// An EventBridge sink on this stack's bus, its calls counted in the
    /// returned counter.
    pub fn eventbridge_sink(&self) -> (EventBridgeSink, CallCounter) {
        let (bus, _) = self.bus.as_ref().expect("stack has a bus");
        let calls = CallCounter::default();
        let client = aws_sdk_eventbridge::Client::from_conf(
            aws_sdk_eventbridge::config::Builder::from(&self.sdk)
                .interceptor(calls.clone())
                .build(),
        );
        (
            EventBridgeSink::new(client, bus.clone(), "outbox.orders".into()),
            calls,
        )
    }

    /// The DynamoDB store of this stack, its calls counted in `self.calls`.
    pub fn store(&self) -> DynamoStore {
        DynamoStore::new(self.counted_ddb.clone(), &self.table, 8).with_keys(self.keys.clone())
    }

    /// A cursor at the start of this table's stream.
    pub fn stream(&self) -> StreamCursor {
        StreamCursor::new(&self.sdk, &self.stream_arn)
    }

    /// The mapping of `infra/outbox.yaml`, fed by this stack's stream into `invoker`.
    pub fn pump<I: Invoker>(&self, invoker: I, on_failure: Option<&str>) -> Pump<I> {
        self.pump_filtered(invoker, on_failure, None)
    }

    /// The same, with the filter `pattern` instead of the template's (the
    /// mapping of a table with another key schema).
    pub fn pump_filtered<I: Invoker>(
        &self,
        invoker: I,
        on_failure: Option<&str>,
        pattern: Option<String>,
    ) -> Pump<I> {
        // The mapping as this stack deploys it (its filter from its key
        // schema's names and its region).
        let mut mapping = self.deployment.mapping().expect("template mapping");
        if let Some(pattern) = pattern {
            mapping.patterns = vec![pattern];
        }
        let on_failure = on_failure.map(|url| OnFailure {
            sqs: aws_sdk_sqs::Client::new(&self.sdk),
            queue_url: url.to_owned(),
        });
        Pump::new(self.stream(), mapping, invoker, on_failure).expect("filters compile")
    }

    /// The bus sink and the store of this stack, their clients going
    /// through `proxy`.
    pub async fn through(
        &self,
        proxy: &proxy::FaultProxy,
        shards: u16,
    ) -> (EventBridgeSink, DynamoStore) {
        let sdk = proxy.sdk().await;
        let (bus, _) = self.bus.as_ref().expect("stack has a bus");
        (
            EventBridgeSink::new(
                aws_sdk_eventbridge::Client::new(&sdk),
                bus.clone(),
                "outbox.orders".into(),
            ),
            DynamoStore::new(aws_sdk_dynamodb::Client::new(&sdk), &self.table, shards)
                .with_keys(self.keys.clone()),
        )
    }
}
