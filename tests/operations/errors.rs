//! What `outboxctl` says when it cannot do what it is asked: bad
//! arguments fail clearly and change nothing; AWS's reason in one line.

use std::process::Command;

use testkit::{outboxctl, Stack};

use super::DAY;

#[tokio::test]
async fn bad_arguments_fail_clearly_and_change_nothing() {
    let stack = Stack::new().await;
    // Its functions never ran: nothing recorded (a republish needs a sink).
    stack.forget_settings().await;
    stack.put_event_aged(DAY).await;
    let before = stack.items().await.len();
    let t = stack.table.as_str();
    let id = "01ARZ3NDEKTSV4RRFFQ69G5FAV";
    for (args, expected) in [
        (vec!["status"], "--table <TABLE>"),
        (
            on(t, "status", &["--bogus"]),
            "unexpected argument '--bogus'",
        ),
        (on(t, "dead-letters show", &["nope"]), "not an event id"),
        (on(t, "dead-letters redrive", &[]), "name the dead letters"),
        (on(t, "dead-letters discard", &[id]), "--yes"),
        (
            on(t, "dead-letters discard", &[id, "--yes"]),
            "no dead letter with event id",
        ),
        (
            on(t, "dead-letters redrive", &["--all", "--now"]),
            "no sink settings are recorded in the table",
        ),
        (
            on("no-such-table", "status", &[]),
            "ResourceNotFoundException",
        ),
        (
            vec!["dead-letters", "frobnicate"],
            "unrecognized subcommand",
        ),
        // A command that cannot honour a switch refuses it: discard has no
        // dry run, so `--dry-run` deletes nothing (it did, once).
        (
            on(t, "dead-letters discard", &[id, "--yes", "--dry-run"]),
            "unexpected argument '--dry-run'",
        ),
        (
            on(t, "status", &["--table", t]),
            "cannot be used multiple times",
        ),
    ] {
        let (ok, _, err) = outboxctl(&args);
        assert!(!ok, "{args:?} should fail");
        assert!(err.contains(expected), "{args:?}: {err}");
    }
    assert_eq!(stack.items().await.len(), before, "nothing changed");
}

/// The command line `COMMAND --table TABLE ARGS…` (`command`'s words split
/// on spaces): one row of the table above.
fn on<'a>(table: &'a str, command: &'a str, args: &[&'a str]) -> Vec<&'a str> {
    let mut line: Vec<&str> = command.split(' ').collect();
    line.extend(["--table", table]);
    line.extend_from_slice(args);
    line
}

/// Errors carry AWS's reason from the SDK's error metadata, in one line: a
/// missing table names the service's code and message; missing credentials
/// read as such (the instance-metadata provider is disabled, as in every
/// local run, so nothing leaves this machine).
#[tokio::test]
async fn errors_carry_the_reason_in_one_readable_line() {
    let (ok, _, err) = testkit::Operator::new("no-such-table").status(&[]);
    assert!(!ok);
    let line = err.trim();
    assert!(!line.contains('\n'), "{line}");
    assert!(line.contains("ResourceNotFoundException: "), "{line}");

    let binary = testkit::lambda::binary("outboxctl").expect("outboxctl binary");
    let out = Command::new(binary)
        .args(["status", "--table", "t"])
        .env_remove("AWS_ACCESS_KEY_ID")
        .env_remove("AWS_SECRET_ACCESS_KEY")
        .env_remove("AWS_SESSION_TOKEN")
        .env_remove("AWS_PROFILE")
        .env("AWS_CONFIG_FILE", "/dev/null")
        .env("AWS_SHARED_CREDENTIALS_FILE", "/dev/null")
        .env("AWS_EC2_METADATA_DISABLED", "true")
        .output()
        .expect("run outboxctl");
    assert!(!out.status.success());
    let line = String::from_utf8_lossy(&out.stderr).trim().to_owned();
    assert!(!line.contains('\n'), "{line}");
    assert!(line.contains("no credentials found"), "{line}");
}
