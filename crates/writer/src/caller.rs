//! Who is calling: the API Gateway principal, parsed at the edge. Orders and
//! idempotency keys belong to the caller that made them.
//!
//! A caller is a *principal*, never a session: an assumed role's ARN ends in
//! a session name that whoever assumes the role chooses (and that changes
//! when an ECS task or an EC2 instance is replaced), and every user of a
//! Cognito identity pool signs as the same role session. So
//! (docs/writer.md, "Who owns an order"):
//!
//! | request signed by | caller id |
//! |---|---|
//! | Cognito identity-pool credentials (`authorizer.iam.cognitoIdentity`) | `cognito:<identityId>` |
//! | an assumed role (`arn:…:sts::<account>:assumed-role/<role>/<session>`) | `iam:arn:…:sts::<account>:assumed-role/<role>`: the role, without the session |
//! | an IAM user, the account root, a federated user | `iam:<userArn>` |
//! | a JWT authorizer | `jwt:<sub>` |
//!
//! An assumed role named `CognitoIdentityCredentials` without a Cognito
//! identity in the context is refused (it would make every pool user one
//! caller).

use std::fmt;

/// Longest principal accepted (an IAM ARN is at most 2,048 characters).
const MAX_PRINCIPAL: usize = 2048;

/// The session name Cognito identity pools give the role sessions of all
/// their users.
const COGNITO_SESSION: &str = "CognitoIdentityCredentials";

/// An authenticated caller. Its [`Caller::id`] is stored with each order it
/// creates (`ownerId`) and scopes its idempotency keys; the prefix keeps an
/// IAM principal and a JWT subject apart even when their text is equal.
#[derive(Clone, PartialEq, Eq, Hash)]
pub struct Caller(String);

impl Caller {
    /// An IAM-authorized caller, from `requestContext.authorizer.iam`: its
    /// `userArn` and, for Cognito identity-pool credentials,
    /// `cognitoIdentity.identityId`. The Cognito identity when present;
    /// for an assumed role, the role (the ARN without its session name);
    /// else the ARN. `None` for an empty or malformed principal.
    pub fn iam(user_arn: &str, cognito_identity_id: Option<&str>) -> Option<Self> {
        if let Some(identity) = cognito_identity_id.filter(|id| !id.is_empty()) {
            return Self::with_prefix("cognito:", identity);
        }
        match assumed_role(user_arn) {
            Some(AssumedRole { session, .. }) if session == COGNITO_SESSION => None,
            Some(AssumedRole { role, .. }) => Self::with_prefix("iam:", role),
            None if user_arn.contains(":assumed-role/") => None,
            None => Self::with_prefix("iam:", user_arn),
        }
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

/// An assumed-role ARN, `arn:<partition>:sts::<account>:assumed-role/<role>/<session>`,
/// split into the role's part and the session name.
struct AssumedRole<'a> {
    role: &'a str,
    session: &'a str,
}

fn assumed_role(arn: &str) -> Option<AssumedRole<'_>> {
    let mut fields = arn.splitn(6, ':');
    let (Some("arn"), Some(_partition), Some("sts"), Some(""), Some(account), Some(resource)) = (
        fields.next(),
        fields.next(),
        fields.next(),
        fields.next(),
        fields.next(),
        fields.next(),
    ) else {
        return None;
    };
    let mut parts = resource.split('/');
    match (parts.next(), parts.next(), parts.next(), parts.next()) {
        (Some("assumed-role"), Some(role), Some(session), None)
            if !account.is_empty() && !role.is_empty() && !session.is_empty() =>
        {
            let end = arn.len() - session.len() - 1;
            Some(AssumedRole {
                role: &arn[..end],
                session,
            })
        }
        _ => None,
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

    fn id(caller: Option<Caller>) -> Option<String> {
        caller.map(|c| c.id().to_owned())
    }

    #[test]
    fn a_caller_is_a_principal_not_a_session() {
        // An IAM user, the root, a federated user: the ARN.
        for arn in [
            "arn:aws:iam::123456789012:user/alice",
            "arn:aws:iam::123456789012:user/division/bob",
            "arn:aws:iam::123456789012:root",
            "arn:aws:sts::123456789012:federated-user/carol",
        ] {
            assert_eq!(id(Caller::iam(arn, None)), Some(format!("iam:{arn}")));
        }
        // An assumed role: the role, whatever the session (a redeployed
        // task, or a session name chosen to look like someone else's).
        let role = "iam:arn:aws:sts::123456789012:assumed-role/OrdersService";
        for session in ["i-0abc", "ecs-task-1", "alice"] {
            let arn = format!("arn:aws:sts::123456789012:assumed-role/OrdersService/{session}");
            assert_eq!(id(Caller::iam(&arn, None)).as_deref(), Some(role));
        }
        let china = "arn:aws-cn:sts::123456789012:assumed-role/R/s";
        assert_eq!(
            id(Caller::iam(china, None)).as_deref(),
            Some("iam:arn:aws-cn:sts::123456789012:assumed-role/R")
        );
        // Cognito identity-pool users share one role session: each is its
        // identity, and the shared session alone is refused.
        let pool = "arn:aws:sts::123456789012:assumed-role/AuthRole/CognitoIdentityCredentials";
        assert_eq!(
            id(Caller::iam(pool, Some("us-east-1:1111"))).as_deref(),
            Some("cognito:us-east-1:1111")
        );
        assert_ne!(
            Caller::iam(pool, Some("us-east-1:1111")),
            Caller::iam(pool, Some("us-east-1:2222"))
        );
        assert_eq!(Caller::iam(pool, None), None);
        assert_eq!(Caller::iam(pool, Some("")), None);
        // Malformed assumed-role ARNs are refused, not taken whole.
        for arn in [
            "arn:aws:sts::123456789012:assumed-role/R",
            "arn:aws:sts::123456789012:assumed-role/R/s/x",
            "arn:aws:sts::123456789012:assumed-role//s",
        ] {
            assert_eq!(Caller::iam(arn, None), None, "{arn}");
        }
    }

    #[test]
    fn kinds_are_kept_apart_and_empty_principals_refused() {
        assert_ne!(Caller::iam("x", None), Caller::jwt("x"));
        assert_eq!(
            Caller::jwt("x").map(|c| c.id().to_owned()),
            Some("jwt:x".into())
        );
        assert!(Caller::iam("", None).is_none());
        assert!(Caller::jwt("a\nb").is_none());
        assert!(Caller::jwt(&"s".repeat(MAX_PRINCIPAL + 1)).is_none());
        assert_eq!(
            format!("{:?}", Caller::iam("arn:secret", None).unwrap()),
            "Caller(iam:…)"
        );
    }
}
