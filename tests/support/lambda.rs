//! The function binaries under a local Lambda Runtime API, the way Lambda
//! runs them: one process per sandbox, polling
//! `/2018-06-01/runtime/invocation/next` on `AWS_LAMBDA_RUNTIME_API`,
//! answering on `/response` or `/error`, with a real deadline.
//!
//! What Lambda does and this does too: a sandbox that crashes, is killed or
//! passes its deadline is a function error for that invocation, the process
//! is killed and the next invocation starts a new one (a cold start). A
//! handler error (`/error`) is a function error too, but the sandbox stays.
//!
//! [`LambdaFunction::killer`] is how a test kills the running process with
//! `SIGKILL` at a chosen moment (the fault proxy calls it on the wire), the
//! way a sandbox dies: no destructor, no flush, nothing after.

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::process::Stdio;
use std::sync::atomic::{AtomicI32, AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use bytes::Bytes;
use http_body_util::{BodyExt, Full};
use hyper::body::Incoming;
use hyper::service::service_fn;
use hyper::{Request, Response, StatusCode};
use hyper_util::rt::TokioIo;
use tokio::net::TcpListener;
use tokio::process::{Child, Command};
use tokio::sync::{mpsc, oneshot, Mutex};

type BoxError = Box<dyn std::error::Error + Send + Sync>;

/// How an invocation failed (what Lambda reports as a function error).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum FunctionError {
    /// The handler answered on `/error`.
    Handled(String),
    /// The process exited (crashed or was killed) before answering.
    Crashed,
    /// No answer before the deadline: the sandbox was killed.
    TimedOut,
    /// The process could not be started.
    Spawn(String),
}

impl FunctionError {
    /// The kind of failure, in a few words.
    pub fn kind(&self) -> &'static str {
        match self {
            Self::Handled(_) => "handler error",
            Self::Crashed => "process killed",
            Self::TimedOut => "timed out",
            Self::Spawn(_) => "not started",
        }
    }
}

impl std::fmt::Display for FunctionError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Self::Handled(body) => write!(f, "function error: {body}"),
            Self::Crashed => write!(f, "Runtime exited: signal: killed"),
            Self::TimedOut => write!(f, "Task timed out"),
            Self::Spawn(e) => write!(f, "cannot start the runtime: {e}"),
        }
    }
}

/// A function: its binary, environment and timeout.
#[derive(Debug, Clone)]
pub struct FunctionSpec {
    /// Its name (the Runtime API's function name and the log's).
    pub name: String,
    /// The bootstrap binary.
    pub binary: PathBuf,
    /// The environment of its processes.
    pub env: Vec<(String, String)>,
    /// The function's timeout (each invocation's deadline).
    pub timeout: Duration,
    /// Where the processes' output goes (appended).
    pub log: PathBuf,
}

struct Invocation {
    id: String,
    deadline_ms: u64,
    body: Vec<u8>,
    answer: oneshot::Sender<Result<Vec<u8>, FunctionError>>,
}

/// One sandbox: a process and the Runtime API it polls.
struct Sandbox {
    child: Child,
    invocations: mpsc::Sender<Invocation>,
    server: tokio::task::JoinHandle<()>,
}

impl Drop for Sandbox {
    fn drop(&mut self) {
        let _ = self.child.start_kill();
        self.server.abort();
    }
}

/// Kills the function's current process with `SIGKILL` (no-op when none).
#[derive(Clone, Default)]
pub struct Killer(Arc<AtomicI32>);

impl Killer {
    /// Sends `SIGKILL` to the current process.
    pub fn kill(&self) {
        let pid = self.0.load(Ordering::SeqCst);
        if pid > 0 {
            // SAFETY: kill(2) with a pid this harness spawned and SIGKILL;
            // it has no memory effects on this process.
            unsafe {
                libc::kill(pid, libc::SIGKILL);
            }
        }
    }
}

/// A function served one invocation at a time by one sandbox, started on
/// demand and replaced after it dies.
pub struct LambdaFunction {
    spec: FunctionSpec,
    sandbox: Mutex<Option<Sandbox>>,
    pid: Arc<AtomicI32>,
    counter: AtomicU64,
    /// Sandboxes started (cold starts).
    pub cold_starts: AtomicU64,
    /// The deadline given to the latest invocation (ms since the epoch).
    last_deadline_ms: AtomicU64,
}

impl LambdaFunction {
    /// A function with no sandbox yet: the first invocation starts one.
    pub fn new(spec: FunctionSpec) -> Self {
        Self {
            spec,
            sandbox: Mutex::new(None),
            pid: Arc::default(),
            counter: AtomicU64::new(0),
            cold_starts: AtomicU64::new(0),
            last_deadline_ms: AtomicU64::new(0),
        }
    }

    /// Its name.
    pub fn name(&self) -> &str {
        &self.spec.name
    }

    /// The value of `variable` in its environment, if set.
    pub fn env(&self, variable: &str) -> Option<&str> {
        self.spec
            .env
            .iter()
            .rev()
            .find(|(k, _)| k == variable)
            .map(|(_, v)| v.as_str())
    }

    /// Where its processes' output goes (their EMF lines and logs).
    pub fn log(&self) -> &Path {
        &self.spec.log
    }

    /// The deadline the latest invocation was given (after its cold start,
    /// if any).
    pub fn last_deadline(&self) -> SystemTime {
        UNIX_EPOCH + Duration::from_millis(self.last_deadline_ms.load(Ordering::SeqCst))
    }

    /// The metric documents its processes printed so far that Lambda's
    /// log-level filter lets through at the function's level: each with
    /// its `Stack` and `Function` and every count as a field; the metrics
    /// it declares (what CloudWatch turns into metrics) under `_aws`, absent
    /// when it declares none (`DetailedMetrics=false` and no core metric).
    pub fn emf(&self) -> Vec<serde_json::Value> {
        self.delivered_lines()
            .iter()
            .filter_map(|l| serde_json::from_str::<serde_json::Value>(l).ok())
            .filter(|d| d["Stack"].is_string() && d["Function"].is_string())
            .collect()
    }

    /// The lines its processes printed so far that Lambda's log-level
    /// filter lets through ([`passes_lambda_filter`]) at the function's
    /// `AWS_LAMBDA_LOG_LEVEL` (from the template's `LogLevel`).
    pub fn delivered_lines(&self) -> Vec<String> {
        let level = self.env("AWS_LAMBDA_LOG_LEVEL");
        std::fs::read_to_string(&self.spec.log)
            .unwrap_or_default()
            .lines()
            .filter(|l| passes_lambda_filter(l, level))
            .map(str::to_owned)
            .collect()
    }

    /// The report of a scheduled sweep (`events/sweeper-scheduled.json`)
    /// by this function, which must answer.
    pub async fn sweep_scheduled(&self) -> serde_json::Value {
        let event = serde_json::to_vec(&crate::rig::scheduled()).expect("JSON");
        let answer = self.invoke(&event).await.expect("a scheduled sweep");
        serde_json::from_slice(&answer).expect("the sweep's report")
    }

    /// Kills whatever process runs this function at the time of the call.
    pub fn killer(&self) -> Killer {
        Killer(self.pid.clone())
    }

    /// Invokes the function with `payload` (JSON) and waits for its answer,
    /// its failure, or its deadline.
    pub async fn invoke(&self, payload: &[u8]) -> Result<Vec<u8>, FunctionError> {
        let mut slot = self.sandbox.lock().await;
        if slot.is_none() {
            *slot = Some(self.start().await?);
            self.cold_starts.fetch_add(1, Ordering::SeqCst);
        }
        let n = self.counter.fetch_add(1, Ordering::SeqCst);
        let id = format!("{}-{n:08}", self.spec.name);
        let deadline = SystemTime::now() + self.spec.timeout;
        let deadline_ms = deadline
            .duration_since(UNIX_EPOCH)
            .map(|d| d.as_millis() as u64)
            .unwrap_or(0);
        self.last_deadline_ms.store(deadline_ms, Ordering::SeqCst);
        let (answer, answered) = oneshot::channel();
        let outcome = {
            let Some(sandbox) = slot.as_mut() else {
                return Err(FunctionError::Crashed);
            };
            let sent = sandbox
                .invocations
                .send(Invocation {
                    id,
                    deadline_ms,
                    body: payload.to_vec(),
                    answer,
                })
                .await;
            if sent.is_err() {
                Err(FunctionError::Crashed)
            } else {
                tokio::select! {
                    answer = answered => answer.unwrap_or(Err(FunctionError::Crashed)),
                    _ = sandbox.child.wait() => Err(FunctionError::Crashed),
                    _ = tokio::time::sleep(self.spec.timeout) => Err(FunctionError::TimedOut),
                }
            }
        };
        if matches!(
            outcome,
            Err(FunctionError::Crashed | FunctionError::TimedOut)
        ) {
            // The sandbox is gone (or is killed now); the next call starts anew.
            self.pid.store(0, Ordering::SeqCst);
            if let Some(mut dead) = slot.take() {
                let _ = dead.child.kill().await;
            }
        }
        outcome
    }

    async fn start(&self) -> Result<Sandbox, FunctionError> {
        let spawn = |e: &dyn std::fmt::Display| FunctionError::Spawn(e.to_string());
        let listener = TcpListener::bind("127.0.0.1:0")
            .await
            .map_err(|e| spawn(&e))?;
        let port = listener.local_addr().map_err(|e| spawn(&e))?.port();
        let (invocations, receiver) = mpsc::channel::<Invocation>(1);
        let server = tokio::spawn(serve(listener, Arc::new(Mutex::new(receiver))));
        let log = std::fs::OpenOptions::new()
            .create(true)
            .append(true)
            .open(&self.spec.log)
            .map_err(|e| spawn(&e))?;
        let err = log.try_clone().map_err(|e| spawn(&e))?;
        let child = Command::new(&self.spec.binary)
            .envs(self.spec.env.iter().map(|(k, v)| (k, v)))
            .env("AWS_LAMBDA_RUNTIME_API", format!("127.0.0.1:{port}"))
            .env("AWS_LAMBDA_FUNCTION_NAME", &self.spec.name)
            .env("AWS_LAMBDA_FUNCTION_VERSION", "$LATEST")
            .env("AWS_LAMBDA_FUNCTION_MEMORY_SIZE", "256")
            .env(
                "AWS_LAMBDA_LOG_GROUP_NAME",
                format!("/aws/lambda/{}", self.spec.name),
            )
            .env("AWS_LAMBDA_LOG_STREAM_NAME", "local")
            .stdin(Stdio::null())
            .stdout(Stdio::from(log))
            .stderr(Stdio::from(err))
            .kill_on_drop(true)
            .spawn()
            .map_err(|e| spawn(&e))?;
        self.pid
            .store(child.id().map_or(0, |p| p as i32), Ordering::SeqCst);
        Ok(Sandbox {
            child,
            invocations,
            server,
        })
    }
}

type Pending =
    Arc<std::sync::Mutex<HashMap<String, oneshot::Sender<Result<Vec<u8>, FunctionError>>>>>;

async fn serve(listener: TcpListener, receiver: Arc<Mutex<mpsc::Receiver<Invocation>>>) {
    let pending: Pending = Arc::default();
    while let Ok((stream, _)) = listener.accept().await {
        let receiver = receiver.clone();
        let pending = pending.clone();
        tokio::spawn(async move {
            let service =
                service_fn(move |request| runtime_api(receiver.clone(), pending.clone(), request));
            let _ = hyper::server::conn::http1::Builder::new()
                .serve_connection(TokioIo::new(stream), service)
                .await;
        });
    }
}

fn reply(status: StatusCode, body: Vec<u8>) -> Response<Full<Bytes>> {
    let mut response = Response::new(Full::new(Bytes::from(body)));
    *response.status_mut() = status;
    response
}

async fn runtime_api(
    receiver: Arc<Mutex<mpsc::Receiver<Invocation>>>,
    pending: Pending,
    request: Request<Incoming>,
) -> Result<Response<Full<Bytes>>, BoxError> {
    let path = request.uri().path().to_owned();
    let body = request.into_body().collect().await?.to_bytes().to_vec();
    let rest = path.strip_prefix("/2018-06-01/runtime/").unwrap_or("");
    if rest == "invocation/next" {
        let Some(invocation) = receiver.lock().await.recv().await else {
            return Ok(reply(StatusCode::GONE, Vec::new()));
        };
        pending
            .lock()
            .map_err(|_| "poisoned")?
            .insert(invocation.id.clone(), invocation.answer);
        let mut response = reply(StatusCode::OK, invocation.body);
        let headers = response.headers_mut();
        headers.insert("lambda-runtime-aws-request-id", invocation.id.parse()?);
        headers.insert(
            "lambda-runtime-deadline-ms",
            invocation.deadline_ms.to_string().parse()?,
        );
        headers.insert(
            "lambda-runtime-invoked-function-arn",
            "arn:aws:lambda:us-east-1:123456789012:function:chaos".parse()?,
        );
        headers.insert(
            "lambda-runtime-trace-id",
            "Root=1-00000000-000000000000000000000000;Sampled=0".parse()?,
        );
        headers.insert("content-type", "application/json".parse()?);
        return Ok(response);
    }
    if let Some(rest) = rest.strip_prefix("invocation/") {
        if let Some((id, kind)) = rest.split_once('/') {
            let answer = pending.lock().map_err(|_| "poisoned")?.remove(id);
            if let Some(answer) = answer {
                let _ = answer.send(match kind {
                    "response" => Ok(body),
                    _ => Err(FunctionError::Handled(
                        String::from_utf8_lossy(&body).into_owned(),
                    )),
                });
            }
            return Ok(reply(StatusCode::ACCEPTED, br#"{"status":"OK"}"#.to_vec()));
        }
    }
    if rest == "init/error" {
        return Ok(reply(StatusCode::ACCEPTED, br#"{"status":"OK"}"#.to_vec()));
    }
    Ok(reply(StatusCode::NOT_FOUND, Vec::new()))
}

/// The workspace's binary `name`, built for the profile this test runs
/// under (`cargo build` first, so that it is current).
pub fn binary(name: &str) -> Result<PathBuf, String> {
    let dir = profile_dir()?;
    let release = dir.file_name().is_some_and(|n| n == "release");
    build_binary(name, dir, release)
}

/// The debug build of the function binary `name` (built when missing or
/// stale), whatever profile the caller runs in: for counting what a
/// function calls, which the profile does not change (a bench runs in
/// release, and a release build of a function takes minutes here).
pub fn debug_binary(name: &str) -> Result<PathBuf, String> {
    build_binary(name, target_dir()?.join("debug"), false)
}

/// The release build (the shipped profile) of the function binary `name`,
/// built when missing or stale: for timing what a function spends, where a
/// debug build's CPU would swamp the figure (minutes to build here).
pub fn release_binary(name: &str) -> Result<PathBuf, String> {
    build_binary(name, target_dir()?.join("release"), true)
}

/// `target/<profile>`, from this process's executable
/// (`target/<profile>/deps/<test>`).
fn profile_dir() -> Result<PathBuf, String> {
    let exe = std::env::current_exe().map_err(|e| e.to_string())?;
    exe.parent()
        .and_then(Path::parent)
        .map(Path::to_path_buf)
        .ok_or_else(|| "cannot locate the target directory".to_owned())
}

/// `target/`.
fn target_dir() -> Result<PathBuf, String> {
    profile_dir()?
        .parent()
        .map(Path::to_path_buf)
        .ok_or_else(|| "cannot locate the target directory".to_owned())
}

fn build_binary(name: &str, dir: PathBuf, release: bool) -> Result<PathBuf, String> {
    let mut build = std::process::Command::new(std::env::var("CARGO").unwrap_or("cargo".into()));
    build
        .current_dir(crate::root())
        .args(["build", "--quiet", "--locked", "--bin", name]);
    if release {
        build.arg("--release");
    }
    let status = build.status().map_err(|e| format!("cargo build: {e}"))?;
    if !status.success() {
        return Err(format!("cargo build --bin {name} failed"));
    }
    let path = dir.join(name);
    if path.exists() {
        Ok(path)
    } else {
        Err(format!("{} not found", path.display()))
    }
}

/// The environment a function process gets on this machine: the local
/// servers' loopback endpoints (`devkit::endpoint_env`), the dummy
/// credentials and region of the test run, no metadata probe. Add the
/// function's own settings (its log level among them: the template's).
pub fn loopback_env() -> Vec<(String, String)> {
    [
        "AWS_ACCESS_KEY_ID",
        "AWS_SECRET_ACCESS_KEY",
        "AWS_REGION",
        "AWS_DEFAULT_REGION",
        "AWS_EC2_METADATA_DISABLED",
        "PATH",
    ]
    .iter()
    .filter_map(|k| std::env::var(k).ok().map(|v| ((*k).to_owned(), v)))
    .chain(devkit::endpoint_env().expect("loopback endpoints"))
    .chain([("AWS_EC2_METADATA_DISABLED".to_owned(), "true".to_owned())])
    .collect()
}

/// A function binary as the stream mapping's function (the local kit's
/// pump): the event as JSON in, the typed response out; a function error is
/// `Err`.
impl devkit::Invoker for &LambdaFunction {
    async fn invoke(
        &self,
        event: aws_lambda_events::event::dynamodb::Event,
    ) -> Result<aws_lambda_events::event::streams::DynamoDbEventResponse, devkit::InvokeError> {
        invoke_stream(&event, |payload| async move {
            LambdaFunction::invoke(self, &payload).await
        })
        .await
    }
}

/// Delivers every message of `queue_url` to `function`, as Lambda's SQS
/// mapping would (its queue calls made with `sqs`); what the drain did.
pub async fn drain_queue_through(
    sqs: &aws_sdk_sqs::Client,
    queue_url: &str,
    function: &LambdaFunction,
) -> devkit::DrainStats {
    devkit::drain_queue(
        sqs,
        queue_url,
        Duration::from_secs(10),
        |event| async move {
            let payload = serde_json::to_vec(&event).map_err(|e| e.to_string())?;
            let answer = function.invoke(&payload).await.map_err(|e| e.to_string())?;
            let response: aws_lambda_events::event::sqs::SqsBatchResponse =
                serde_json::from_slice(&answer).map_err(|e| e.to_string())?;
            Ok::<_, String>(
                response
                    .batch_item_failures
                    .into_iter()
                    .map(|f| f.item_identifier)
                    .collect::<std::collections::HashSet<String>>(),
            )
        },
    )
    .await
    .expect("queue drained")
}

/// The environment the templates give the projector reading `read_model`
/// (the orders example at its defaults; the projector reads no outbox).
pub fn projector_env(read_model: &str) -> Vec<(String, String)> {
    let mut deployment = devkit::LocalDeployment::example(
        &crate::root(),
        "orders",
        "arn:aws:dynamodb:us-east-1:123456789012:table/orders/stream/local",
        devkit::LocalSink::Bus("default".into()),
    );
    deployment.read_model = Some(read_model.to_owned());
    deployment
        .env_vec(devkit::Function::Projector)
        .expect("the projector's environment from the templates")
}

/// Whether Lambda's application log-level filter (JSON log format) lets a
/// line through at `level` (the function's `AWS_LAMBDA_LOG_LEVEL`; none:
/// everything passes). As documented: the line's `level` key decides; a
/// line that is not JSON, or has no valid `level` or no RFC 3339
/// `timestamp`, counts as INFO.
pub fn passes_lambda_filter(line: &str, level: Option<&str>) -> bool {
    const LEVELS: [&str; 6] = ["TRACE", "DEBUG", "INFO", "WARN", "ERROR", "FATAL"];
    let rank = |l: &str| LEVELS.iter().position(|x| x.eq_ignore_ascii_case(l));
    let Some(threshold) = level.and_then(rank) else {
        return true;
    };
    let info = 2;
    let of_line = serde_json::from_str::<serde_json::Value>(line)
        .ok()
        .filter(|v| {
            v["timestamp"].as_str().is_some_and(|t| {
                time::OffsetDateTime::parse(t, &time::format_description::well_known::Rfc3339)
                    .is_ok()
            })
        })
        .and_then(|v| v["level"].as_str().and_then(rank))
        .unwrap_or(info);
    of_line >= threshold
}

/// A stream event's round trip through `call` (one function process's
/// invoke): the payload, the call, the mapping's response read back.
pub(crate) async fn invoke_stream<F, Fut>(
    event: &aws_lambda_events::event::dynamodb::Event,
    call: F,
) -> Result<aws_lambda_events::event::streams::DynamoDbEventResponse, devkit::InvokeError>
where
    F: FnOnce(Vec<u8>) -> Fut,
    Fut: std::future::Future<Output = Result<Vec<u8>, FunctionError>>,
{
    let payload =
        serde_json::to_vec(event).map_err(|e| devkit::InvokeError::Invalid(e.to_string()))?;
    let body = call(payload).await.map_err(|e| e.to_string())?;
    devkit::stream_response(&body)
}
