//! Invoking a function through the Lambda Invoke API that `cargo lambda
//! watch` serves on loopback, with hyper's HTTP/1.1 client and a timeout.

use std::time::Duration;

use aws_lambda_events::event::dynamodb::Event;
use aws_lambda_events::event::streams::DynamoDbEventResponse;
use bytes::Bytes;
use http_body_util::{BodyExt, Full};
use hyper_util::client::legacy::Client;
use hyper_util::rt::TokioExecutor;

use crate::pump::{InvokeError, Invoker};

/// How long one invocation may take, the function's own run included
/// (longer than any function timeout in `template.yaml`).
pub(crate) const INVOKE_TIMEOUT: Duration = Duration::from_secs(960);

/// `POST /2015-03-31/functions/<function>/invocations` on 127.0.0.1:`port`.
#[derive(Debug, Clone)]
pub struct HttpInvoker {
    port: u16,
    function: String,
    timeout: Duration,
    client: Client<hyper_util::client::legacy::connect::HttpConnector, Full<Bytes>>,
}

/// The stream event source mapping's response in an invocation's answer.
pub fn stream_response(body: &[u8]) -> Result<DynamoDbEventResponse, InvokeError> {
    serde_json::from_slice(body).map_err(|e| InvokeError::Invalid(e.to_string()))
}

impl From<String> for InvokeError {
    fn from(reason: String) -> Self {
        Self::Failed(reason)
    }
}

/// What an invocation answered.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Invocation {
    /// The HTTP status of the Invoke API.
    pub status: u16,
    /// Whether the function reported an error (`X-Amz-Function-Error`).
    pub function_error: bool,
    /// The function's response (or error) payload.
    pub body: Bytes,
}

impl HttpInvoker {
    /// An invoker of `function` under `cargo lambda watch` on 127.0.0.1:`port`.
    pub fn new(port: u16, function: impl Into<String>) -> Self {
        Self {
            port,
            function: function.into(),
            timeout: INVOKE_TIMEOUT,
            client: Client::builder(TokioExecutor::new()).build_http(),
        }
    }

    /// The same with another timeout.
    pub fn with_timeout(self, timeout: Duration) -> Self {
        Self { timeout, ..self }
    }

    /// Invokes with `payload`.
    pub async fn call(&self, payload: Vec<u8>) -> Result<Invocation, InvokeError> {
        let unreachable = |reason: String| InvokeError::Unreachable {
            function: self.function.clone(),
            reason,
        };
        let request = hyper::Request::post(format!(
            "http://127.0.0.1:{}/2015-03-31/functions/{}/invocations",
            self.port, self.function
        ))
        .header("content-type", "application/json")
        .body(Full::new(Bytes::from(payload)))
        .map_err(|e| unreachable(e.to_string()))?;
        let exchange = async {
            let response = self
                .client
                .request(request)
                .await
                .map_err(|e| unreachable(e.to_string()))?;
            let status = response.status().as_u16();
            let function_error = response.headers().contains_key("x-amz-function-error");
            let body = response
                .into_body()
                .collect()
                .await
                .map_err(|e| unreachable(e.to_string()))?
                .to_bytes();
            Ok(Invocation {
                status,
                function_error,
                body,
            })
        };
        tokio::time::timeout(self.timeout, exchange)
            .await
            .map_err(|_| unreachable(format!("no answer in {:?}", self.timeout)))?
    }
}

impl Invoker for HttpInvoker {
    async fn invoke(&self, event: Event) -> Result<DynamoDbEventResponse, InvokeError> {
        let payload =
            serde_json::to_vec(&event).map_err(|e| InvokeError::Invalid(e.to_string()))?;
        let answer = self.call(payload).await?;
        if answer.status != 200 || answer.function_error {
            return Err(InvokeError::Function {
                status: answer.status,
                body: String::from_utf8_lossy(&answer.body).into_owned(),
            });
        }
        stream_response(&answer.body)
    }
}
