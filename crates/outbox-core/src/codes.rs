//! The one classification of AWS error codes worth retrying: the SDK's
//! own lists (`aws-runtime`'s retry classifiers) plus the per-entry codes
//! it never sees (`PutEvents`, `PublishBatch`, transaction cancellation
//! reasons). The transaction builder and the functions' runtime both use it.

/// Throttling codes beyond the SDK's own list
/// ([`aws_runtime::retries::classifiers::THROTTLING_ERRORS`], which knows
/// whole-call codes only): the per-entry codes of `PutEvents` and
/// `PublishBatch` answers and DynamoDB's cancellation-reason codes.
const ENTRY_THROTTLING_CODES: &[&str] = &[
    "Throttled",
    "ThrottlingError",
    "ProvisionedThroughputExceeded",
    // SNS `PublishBatch` per-entry (the KMS key of an encrypted topic).
    "KMSThrottling",
    "KMSThrottlingException",
];

/// Server-side failures that a retry may clear, beyond the SDK's
/// transient list ([`aws_runtime::retries::classifiers::TRANSIENT_ERRORS`]):
/// the per-entry codes of `PutEvents` and `PublishBatch` and the 5xx codes
/// services put in a body (whole calls are classified by their status too,
/// `outbox_runtime::is_retryable`).
const SERVER_CODES: &[&str] = &[
    "InternalFailure",
    "InternalException",
    "InternalError",
    "InternalServerError",
    "ServiceUnavailable",
    "ServiceUnavailableException",
];

/// Whether `code` says the caller is being throttled: the SDK's own list,
/// and the per-entry codes it never sees.
pub fn is_throttling(code: &str) -> bool {
    aws_runtime::retries::classifiers::THROTTLING_ERRORS.contains(&code)
        || ENTRY_THROTTLING_CODES.contains(&code)
}

/// Whether a failure with `code` is worth retrying: throttling or a
/// transient or server-side fault, as the SDK's retry classifier lists them
/// plus the per-entry codes. The one classification of codes used by the
/// publishing module, the store and the writer.
pub fn is_transient(code: &str) -> bool {
    is_throttling(code)
        || aws_runtime::retries::classifiers::TRANSIENT_ERRORS.contains(&code)
        || SERVER_CODES.contains(&code)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// #26 item 11: codes the SDK's classifier knows and a hand-written
    /// list missed, and per-entry codes the SDK never sees.
    #[test]
    fn transient_codes_follow_the_sdk_classifier() {
        for code in [
            "ThrottlingException",
            "TransactionInProgressException",
            "LimitExceededException",
            "RequestThrottledException",
            "SlowDown",
            "PriorRequestNotComplete",
            "RequestTimeout",
            "KMSThrottling",
            "KMSThrottlingException",
            "ProvisionedThroughputExceeded",
            "InternalFailure",
            "ServiceUnavailable",
        ] {
            assert!(is_transient(code), "{code}");
        }
        for code in [
            "AccessDeniedException",
            "ValidationException",
            "ResourceNotFoundException",
            "KMSDisabled",
            "Unknown",
            "MalformedDetail",
        ] {
            assert!(!is_transient(code), "{code}");
        }
        // Throttling is transient; a server fault is not throttling.
        assert!(is_throttling("ThrottlingException"));
        assert!(!is_throttling("InternalFailure"));
    }
}
