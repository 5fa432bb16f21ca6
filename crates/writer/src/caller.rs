//! Who is calling: the API Gateway principal, parsed at the edge. Orders and
//! idempotency keys belong to the caller that made them.

use std::fmt;

/// Longest principal accepted (an IAM ARN is at most 2,048 characters).
const MAX_PRINCIPAL: usize = 2048;

/// An authenticated caller. Its [`Caller::id`] is stored with each order it
/// creates (`ownerId`) and scopes its idempotency keys; the prefix keeps an
/// IAM principal and a JWT subject apart even when their text is equal.
#[derive(Clone, PartialEq, Eq, Hash)]
pub struct Caller(String);

impl Caller {
    /// An IAM-authorized caller, by its ARN (`requestContext.authorizer.iam.userArn`).
    pub fn iam(arn: &str) -> Option<Self> {
        Self::with_prefix("iam:", arn)
    }

    /// A JWT-authorized caller, by its `sub` claim.
    pub fn jwt(subject: &str) -> Option<Self> {
        Self::with_prefix("jwt:", subject)
    }

    /// A caller named by the deployment, not by a request: the local
    /// setting `WRITER_LOCAL_CALLER`, for runs without an authorizer.
    pub fn local(name: &str) -> Option<Self> {
        Self::with_prefix("local:", name)
    }

    /// The stored form, e.g. `iam:arn:aws:iam::123456789012:user/alice`.
    pub fn id(&self) -> &str {
        &self.0
    }

    fn with_prefix(prefix: &str, principal: &str) -> Option<Self> {
        let ok = !principal.is_empty()
            && principal.len() <= MAX_PRINCIPAL
            && !principal.chars().any(char::is_control);
        ok.then(|| Self(format!("{prefix}{principal}")))
    }
}

/// A caller is an identity: it is never printed in full, so that it stays
/// out of logs.
impl fmt::Debug for Caller {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let kind = self.0.split(':').next().unwrap_or_default();
        write!(f, "Caller({kind}:…)")
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn kinds_are_kept_apart_and_empty_principals_refused() {
        assert_ne!(Caller::iam("x"), Caller::jwt("x"));
        assert_eq!(
            Caller::jwt("x").map(|c| c.id().to_owned()),
            Some("jwt:x".into())
        );
        assert!(Caller::iam("").is_none());
        assert!(Caller::jwt("a\nb").is_none());
        assert!(Caller::jwt(&"s".repeat(MAX_PRINCIPAL + 1)).is_none());
        assert_eq!(
            format!("{:?}", Caller::iam("arn:secret").unwrap()),
            "Caller(iam:…)"
        );
    }
}
