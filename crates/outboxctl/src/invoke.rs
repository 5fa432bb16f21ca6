//! Invoking a function through the Lambda Invoke API that `cargo lambda
//! watch` serves on loopback: a minimal HTTP/1.1 client, loopback only.

use aws_lambda_events::event::dynamodb::Event;
use aws_lambda_events::event::streams::DynamoDbEventResponse;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;

use crate::pump::Invoker;

/// `POST /2015-03-31/functions/<function>/invocations` on 127.0.0.1:`port`.
#[derive(Debug, Clone)]
pub struct HttpInvoker {
    pub port: u16,
    pub function: String,
}

impl HttpInvoker {
    /// Invokes with `payload`; returns the status, whether the function
    /// reported an error (`X-Amz-Function-Error`), and the body.
    pub async fn call(&self, payload: &[u8]) -> Result<(u16, bool, Vec<u8>), String> {
        let mut stream = TcpStream::connect(("127.0.0.1", self.port))
            .await
            .map_err(|e| e.to_string())?;
        let head = format!(
            "POST /2015-03-31/functions/{}/invocations HTTP/1.1\r\nHost: 127.0.0.1:{}\r\nContent-Type: application/json\r\nContent-Length: {}\r\nConnection: close\r\n\r\n",
            self.function,
            self.port,
            payload.len()
        );
        stream
            .write_all(head.as_bytes())
            .await
            .map_err(|e| e.to_string())?;
        stream.write_all(payload).await.map_err(|e| e.to_string())?;
        let mut response = Vec::new();
        stream
            .read_to_end(&mut response)
            .await
            .map_err(|e| e.to_string())?;
        let split = response
            .windows(4)
            .position(|w| w == b"\r\n\r\n")
            .ok_or("malformed HTTP response")?;
        let head = String::from_utf8_lossy(&response[..split]).to_string();
        let mut body = response[split + 4..].to_vec();
        let status = head
            .split_whitespace()
            .nth(1)
            .and_then(|s| s.parse().ok())
            .unwrap_or(0);
        let lower = head.to_ascii_lowercase();
        if lower.contains("transfer-encoding: chunked") {
            body = dechunk(&body);
        }
        Ok((status, lower.contains("x-amz-function-error"), body))
    }
}

fn dechunk(mut data: &[u8]) -> Vec<u8> {
    let mut out = Vec::new();
    while let Some(line_end) = data.windows(2).position(|w| w == b"\r\n") {
        let size = usize::from_str_radix(String::from_utf8_lossy(&data[..line_end]).trim(), 16)
            .unwrap_or(0);
        if size == 0 {
            break;
        }
        let start = line_end + 2;
        out.extend_from_slice(&data[start..(start + size).min(data.len())]);
        data = &data[(start + size + 2).min(data.len())..];
    }
    out
}

impl Invoker for HttpInvoker {
    async fn invoke(&self, event: Event) -> Result<DynamoDbEventResponse, String> {
        let payload = serde_json::to_vec(&event).map_err(|e| e.to_string())?;
        let (status, function_error, body) = self.call(&payload).await?;
        if status != 200 || function_error {
            return Err(format!(
                "function error (HTTP {status}): {}",
                String::from_utf8_lossy(&body)
            ));
        }
        serde_json::from_slice(&body).map_err(|e| format!("invalid response: {e}"))
    }
}
