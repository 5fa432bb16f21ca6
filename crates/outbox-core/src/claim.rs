//! The claim check: an event whose envelope is too large for a DynamoDB
//! item (or for the configured sink) is stored whole as an S3 object
//! before the transaction, and its outbox item carries a stub envelope and
//! a [`PayloadRef`] to the object (docs/events.md, "Large events").
//!
//! - [`ClaimCheck`]: the writer's setting (bucket, threshold), from
//!   `PAYLOAD_BUCKET` and `PAYLOAD_THRESHOLD_BYTES`; objects are keyed
//!   `outbox/<eventId>/<sha256>` ([`PREFIX`]), so an object is never
//!   overwritten by other bytes; at most [`MAX_PAYLOAD_BYTES`].
//! - [`PayloadRef`]: where the whole envelope is, its SHA-256 and size;
//!   [`PayloadRef::check`], the one check of an object read back.
//! - [`Offload`]: an object the transaction must store before it commits.
//! - [`PayloadStore`]: the port (one `PutObject`, one `GetObject`); the S3
//!   client is its adapter (feature `s3`), `MemoryPayloads` (feature
//!   `testing`) an in-memory one for unit tests.

use std::future::Future;

use serde::{Deserialize, Serialize};
use sha2::{Digest, Sha256};

use crate::ConfigError;

/// `PAYLOAD_THRESHOLD_BYTES` by default: an outbox item larger than this is
/// claim-checked. DynamoDB's 400 KB less 16 KiB, the room the item's
/// bookkeeping may take later (a recorded failure, a dead letter's reason
/// and index keys, a hold, a claim), so that no update of a stored item
/// ever meets the item limit.
pub const DEFAULT_THRESHOLD_BYTES: usize = crate::size::MAX_ITEM_BYTES - 16 * 1024;

/// The objects' key prefix: the stack's grants and lifecycle rule name it.
pub const PREFIX: &str = "outbox/";

/// The largest whole envelope a claim check takes (8 MiB): the publisher
/// holds a few at once in memory (its default 256 MB) to check their
/// hashes. A larger event is refused by the writer
/// ([`OutboxError::PayloadTooLarge`](crate::OutboxError::PayloadTooLarge)),
/// and a larger object met at publish time is a dead letter.
pub const MAX_PAYLOAD_BYTES: usize = 8 * 1024 * 1024;

/// The message attribute holding the whole body's size in the SNS and SQS
/// Extended Client libraries' format (their reserved attribute; older
/// clients wrote `SQSLargePayloadSize`).
pub const EXTENDED_PAYLOAD_SIZE: &str = "ExtendedPayloadSize";

/// The class name that opens the Extended Client libraries' pointer.
pub const S3_POINTER_CLASS: &str = "software.amazon.payloadoffloading.PayloadS3Pointer";

/// Where the whole envelope of a claim-checked event is, as the outbox
/// item's `payloadRef` attribute and the stub envelope's `payloadRef`
/// field carry it. The object's body is the whole envelope's JSON, byte for
/// byte what is published when it fits the sink.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
#[serde(rename_all = "camelCase")]
pub struct PayloadRef {
    /// The S3 bucket.
    pub bucket: String,
    /// The object's key: `outbox/<eventId>/<sha256>`.
    pub key: String,
    /// The SHA-256 of the object's body, 64 lowercase hex digits.
    #[cfg_attr(feature = "schema", schemars(regex(pattern = r"^[0-9a-f]{64}$")))]
    pub sha256: String,
    /// The body's size in bytes.
    pub size: u64,
}

/// Why an object read back is not the event's.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum PayloadMismatch {
    /// Another size than recorded.
    #[error("object {key} is {actual} bytes; the outbox item says {expected}")]
    Size {
        /// The object's key.
        key: String,
        /// The recorded size.
        expected: u64,
        /// The object's.
        actual: u64,
    },
    /// Another SHA-256 than recorded.
    #[error("object {key}'s SHA-256 is not the one the outbox item records")]
    Hash {
        /// The object's key.
        key: String,
    },
}

impl PayloadRef {
    /// The reference to `body` stored as `key` in `bucket`.
    pub fn of(bucket: &str, key: String, body: &[u8]) -> Self {
        Self {
            bucket: bucket.to_owned(),
            key,
            sha256: hex::encode(Sha256::digest(body)),
            size: body.len() as u64,
        }
    }

    /// Checks that `body`, read back, is the object this reference
    /// recorded: its size, then its SHA-256.
    pub fn check(&self, body: &[u8]) -> Result<(), PayloadMismatch> {
        if body.len() as u64 != self.size {
            return Err(PayloadMismatch::Size {
                key: self.key.clone(),
                expected: self.size,
                actual: body.len() as u64,
            });
        }
        if hex::encode(Sha256::digest(body)) != self.sha256 {
            return Err(PayloadMismatch::Hash {
                key: self.key.clone(),
            });
        }
        Ok(())
    }

    /// The message body the SNS and SQS Extended Client libraries send in
    /// place of a large body, and fetch from S3 on receipt:
    /// `["software.amazon.payloadoffloading.PayloadS3Pointer",{"s3BucketName":…,"s3Key":…}]`.
    pub fn extended_client_pointer(&self) -> String {
        serde_json::json!([
            S3_POINTER_CLASS,
            {"s3BucketName": self.bucket, "s3Key": self.key}
        ])
        .to_string()
    }

    /// The SHA-256 as S3's `ChecksumSHA256` (base64 of the digest), so
    /// that S3 itself refuses an upload that does not arrive whole.
    pub fn checksum_sha256(&self) -> Option<String> {
        hex::decode(&self.sha256)
            .ok()
            .map(aws_smithy_types::base64::encode)
    }
}

/// The writer's claim check: with a bucket configured, an event whose item
/// would be larger than `threshold` bytes, or whose entry the sink would
/// refuse for its size, is stored in the bucket first.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ClaimCheck {
    /// `PAYLOAD_BUCKET`.
    pub bucket: String,
    /// `PAYLOAD_THRESHOLD_BYTES` (default [`DEFAULT_THRESHOLD_BYTES`]).
    pub threshold: usize,
}

impl ClaimCheck {
    /// A claim check into `bucket`, with the default threshold.
    pub fn new(bucket: impl Into<String>) -> Self {
        Self {
            bucket: bucket.into(),
            threshold: DEFAULT_THRESHOLD_BYTES,
        }
    }

    /// The same with items over `threshold` bytes claim-checked.
    pub fn with_threshold(mut self, threshold: usize) -> Self {
        self.threshold = threshold;
        self
    }

    /// The claim check the variables configure: `None` without
    /// `PAYLOAD_BUCKET` (the feature is off).
    pub fn from_lookup(
        lookup: impl Fn(&str) -> Option<String>,
    ) -> Result<Option<Self>, ConfigError> {
        let get = |name: &str| lookup(name).filter(|v| !v.trim().is_empty());
        let Some(bucket) = get("PAYLOAD_BUCKET") else {
            return Ok(None);
        };
        let bucket = bucket.trim().to_owned();
        if !is_bucket_name(&bucket) {
            return Err(ConfigError::Invalid {
                name: "PAYLOAD_BUCKET",
                value: bucket,
                reason:
                    "not an S3 bucket name (3 to 63 lowercase letters, digits, dots and hyphens)"
                        .to_owned(),
            });
        }
        let threshold = match get("PAYLOAD_THRESHOLD_BYTES") {
            None => DEFAULT_THRESHOLD_BYTES,
            Some(raw) => ConfigError::bounded(
                "PAYLOAD_THRESHOLD_BYTES",
                &raw,
                1_024,
                DEFAULT_THRESHOLD_BYTES,
            )?,
        };
        Ok(Some(Self { bucket, threshold }))
    }

    /// The reference to `body`, the whole envelope of the event
    /// `event_id`, at `outbox/<eventId>/<sha256>`: content-addressed, so a
    /// retry that rebuilt the event with other bytes writes another object
    /// and never replaces the one a committed item names.
    pub fn reference(&self, event_id: ulid::Ulid, body: &[u8]) -> PayloadRef {
        let sha256 = hex::encode(Sha256::digest(body));
        PayloadRef {
            bucket: self.bucket.clone(),
            key: format!("{PREFIX}{event_id}/{sha256}"),
            sha256,
            size: body.len() as u64,
        }
    }
}

/// An S3 bucket name as S3 takes it for a new bucket (its naming rules:
/// 3 to 63 characters, lowercase letters, digits, `.` and `-`, starting
/// and ending with a letter or digit).
fn is_bucket_name(name: &str) -> bool {
    let edge = |c: char| c.is_ascii_lowercase() || c.is_ascii_digit();
    (3..=63).contains(&name.len())
        && name.chars().all(|c| edge(c) || c == '.' || c == '-')
        && name.starts_with(edge)
        && name.ends_with(edge)
}

/// An object a transaction stores before it commits: an event's whole
/// envelope.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Offload {
    /// The event.
    pub event_id: ulid::Ulid,
    /// Where it goes, with its hash and size.
    pub payload_ref: PayloadRef,
    /// The whole envelope's JSON.
    pub body: Vec<u8>,
}

/// Why an object could not be stored or read.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum PayloadError {
    /// The object does not exist (S3 `NoSuchKey`; a reader without
    /// `s3:ListBucket` gets `AccessDenied` instead, which is `Failed`).
    #[error("object {key} does not exist")]
    Missing {
        /// The key.
        key: String,
    },
    /// Any other failure: the service's code and message, and whether
    /// retrying soon may help (throttling, 5xx, the connection).
    #[error("{code}: {message}")]
    Failed {
        /// The service's error code, or a code of ours.
        code: String,
        /// A short message.
        message: String,
        /// Throttling, 5xx, a timeout or a dropped connection.
        transient: bool,
    },
}

/// What the claim check needs of S3: one `PutObject` (the writer, before
/// the transaction) and one `GetObject` (the publisher and the sweeper,
/// before publishing).
pub trait PayloadStore: Send + Sync {
    /// Stores `offload`'s body at its reference, S3 checking its SHA-256.
    fn put_payload(
        &self,
        offload: &Offload,
    ) -> impl Future<Output = Result<(), PayloadError>> + Send;

    /// Reads the object `payload_ref` names (unchecked: see
    /// [`PayloadRef::check`]).
    fn get_payload(
        &self,
        payload_ref: &PayloadRef,
    ) -> impl Future<Output = Result<Vec<u8>, PayloadError>> + Send;
}

/// A shared store is a store too.
impl<T: PayloadStore + ?Sized> PayloadStore for std::sync::Arc<T> {
    fn put_payload(
        &self,
        offload: &Offload,
    ) -> impl Future<Output = Result<(), PayloadError>> + Send {
        (**self).put_payload(offload)
    }

    fn get_payload(
        &self,
        payload_ref: &PayloadRef,
    ) -> impl Future<Output = Result<Vec<u8>, PayloadError>> + Send {
        (**self).get_payload(payload_ref)
    }
}

#[cfg(feature = "s3")]
impl PayloadStore for aws_sdk_s3::Client {
    async fn put_payload(&self, offload: &Offload) -> Result<(), PayloadError> {
        let r = &offload.payload_ref;
        self.put_object()
            .bucket(&r.bucket)
            .key(&r.key)
            .body(offload.body.clone().into())
            .content_type("application/json")
            .set_checksum_sha256(r.checksum_sha256())
            .send()
            .await
            .map(|_| ())
            .map_err(|e| s3_failure(&r.key, e))
    }

    async fn get_payload(&self, payload_ref: &PayloadRef) -> Result<Vec<u8>, PayloadError> {
        let out = self
            .get_object()
            .bucket(&payload_ref.bucket)
            .key(&payload_ref.key)
            .send()
            .await
            .map_err(|e| s3_failure(&payload_ref.key, e))?;
        let body = out.body.collect().await.map_err(|e| PayloadError::Failed {
            code: "BodyNotRead".to_owned(),
            message: e.to_string(),
            transient: true,
        })?;
        Ok(body.into_bytes().to_vec())
    }
}

#[cfg(feature = "s3")]
fn s3_failure<E>(
    key: &str,
    e: aws_smithy_runtime_api::client::result::SdkError<
        E,
        aws_smithy_runtime_api::client::orchestrator::HttpResponse,
    >,
) -> PayloadError
where
    E: aws_smithy_types::error::metadata::ProvideErrorMetadata
        + std::error::Error
        + Send
        + Sync
        + 'static,
{
    use aws_smithy_runtime_api::client::result::SdkError;
    use aws_smithy_types::error::metadata::ProvideErrorMetadata;
    let code = e.code().map(str::to_owned);
    if code.as_deref() == Some("NoSuchKey") {
        return PayloadError::Missing {
            key: key.to_owned(),
        };
    }
    let transient = match &e {
        SdkError::ServiceError(service) => {
            service.raw().status().as_u16() >= 500
                || code.as_deref().is_some_and(crate::codes::is_transient)
        }
        SdkError::TimeoutError(_) | SdkError::DispatchFailure(_) | SdkError::ResponseError(_) => {
            true
        }
        _ => false,
    };
    let mut message = aws_smithy_types::error::display::DisplayErrorContext(&e).to_string();
    if let Some((cut, _)) = message.char_indices().nth(256) {
        message.truncate(cut);
    }
    PayloadError::Failed {
        code: code.unwrap_or_else(|| "S3CallFailed".to_owned()),
        message,
        transient,
    }
}

#[cfg(any(test, feature = "testing"))]
mod memory {
    use std::collections::HashMap;
    use std::sync::Mutex;

    use super::{Offload, PayloadError, PayloadRef, PayloadStore};

    /// An in-memory [`PayloadStore`] for unit tests: objects by bucket and
    /// key, each call counted. moto's S3 is the test of the adapter.
    #[derive(Debug, Default)]
    pub struct MemoryPayloads {
        objects: Mutex<HashMap<(String, String), Vec<u8>>>,
        fail_puts: Mutex<Option<PayloadError>>,
    }

    impl MemoryPayloads {
        /// An empty store.
        pub fn new() -> Self {
            Self::default()
        }

        /// The body stored at `bucket`/`key`.
        pub fn object(&self, bucket: &str, key: &str) -> Option<Vec<u8>> {
            self.lock()
                .get(&(bucket.to_owned(), key.to_owned()))
                .cloned()
        }

        /// How many objects it holds.
        pub fn len(&self) -> usize {
            self.lock().len()
        }

        /// Whether it holds none.
        pub fn is_empty(&self) -> bool {
            self.lock().is_empty()
        }

        /// Replaces (or, with `None`, deletes) an object.
        pub fn set(&self, bucket: &str, key: &str, body: Option<Vec<u8>>) {
            let k = (bucket.to_owned(), key.to_owned());
            match body {
                Some(body) => self.lock().insert(k, body),
                None => self.lock().remove(&k),
            };
        }

        /// Every later `put_payload` fails with `error`.
        pub fn fail_puts(&self, error: PayloadError) {
            *self.fail_puts.lock().unwrap_or_else(|p| p.into_inner()) = Some(error);
        }

        fn lock(&self) -> std::sync::MutexGuard<'_, HashMap<(String, String), Vec<u8>>> {
            self.objects.lock().unwrap_or_else(|p| p.into_inner())
        }
    }

    impl PayloadStore for MemoryPayloads {
        async fn put_payload(&self, offload: &Offload) -> Result<(), PayloadError> {
            if let Some(e) = self
                .fail_puts
                .lock()
                .unwrap_or_else(|p| p.into_inner())
                .clone()
            {
                return Err(e);
            }
            let r = &offload.payload_ref;
            self.set(&r.bucket, &r.key, Some(offload.body.clone()));
            Ok(())
        }

        async fn get_payload(&self, payload_ref: &PayloadRef) -> Result<Vec<u8>, PayloadError> {
            self.object(&payload_ref.bucket, &payload_ref.key)
                .ok_or_else(|| PayloadError::Missing {
                    key: payload_ref.key.clone(),
                })
        }
    }
}

#[cfg(any(test, feature = "testing"))]
pub use memory::MemoryPayloads;

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_reference_checks_the_size_then_the_hash() {
        let r = PayloadRef::of("b", "outbox/1".into(), b"{\"a\":1}");
        assert_eq!(r.size, 7);
        assert_eq!(r.sha256.len(), 64);
        assert!(r.check(b"{\"a\":1}").is_ok());
        assert!(matches!(r.check(b"{}"), Err(PayloadMismatch::Size { .. })));
        assert!(matches!(
            r.check(b"{\"a\":2}"),
            Err(PayloadMismatch::Hash { .. })
        ));
        // S3's ChecksumSHA256 is the base64 of the same digest.
        assert_eq!(r.checksum_sha256().map(|c| c.len()), Some(44));
        assert_eq!(
            r.extended_client_pointer(),
            r#"["software.amazon.payloadoffloading.PayloadS3Pointer",{"s3BucketName":"b","s3Key":"outbox/1"}]"#
        );
    }

    #[test]
    fn the_variables_turn_the_claim_check_on_and_shape_it() {
        let none = |_: &str| None;
        assert_eq!(ClaimCheck::from_lookup(none), Ok(None));
        let vars = |pairs: &'static [(&'static str, &'static str)]| {
            move |name: &str| {
                pairs
                    .iter()
                    .find(|(k, _)| *k == name)
                    .map(|(_, v)| (*v).to_owned())
            }
        };
        let on = ClaimCheck::from_lookup(vars(&[("PAYLOAD_BUCKET", "my-payloads")]))
            .unwrap()
            .unwrap();
        assert_eq!(on, ClaimCheck::new("my-payloads"));
        let r = on.reference(ulid::Ulid::nil(), b"{}");
        assert_eq!(
            r.key,
            format!("outbox/00000000000000000000000000/{}", r.sha256)
        );
        assert!(r.check(b"{}").is_ok());
        let shaped = ClaimCheck::from_lookup(vars(&[
            ("PAYLOAD_BUCKET", "my-payloads"),
            ("PAYLOAD_THRESHOLD_BYTES", "2048"),
        ]))
        .unwrap()
        .unwrap();
        assert_eq!(shaped.threshold, 2048);
        for bad in [
            &[("PAYLOAD_BUCKET", "My_Bucket")][..],
            &[("PAYLOAD_BUCKET", "ab")],
            &[
                ("PAYLOAD_BUCKET", "b-ok"),
                ("PAYLOAD_THRESHOLD_BYTES", "500000"),
            ],
            &[
                ("PAYLOAD_BUCKET", "b-ok"),
                ("PAYLOAD_THRESHOLD_BYTES", "12"),
            ],
        ] {
            assert!(ClaimCheck::from_lookup(vars(bad)).is_err(), "{bad:?}");
        }
    }
}
