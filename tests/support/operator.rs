//! `outboxctl` as an operator runs it against one table: the real binary,
//! a method per command. Each method takes the command's other arguments
//! (positional and flags, in order) and returns whether the process
//! succeeded, its stdout and its stderr.

/// The operator's tool pointed at one table (`--table`), with extra
/// environment variables for every command.
#[derive(Debug, Clone)]
pub struct Operator {
    table: String,
    env: Vec<(String, String)>,
}

/// What one `outboxctl` run said: success, stdout, stderr.
pub type Said = (bool, String, String);

/// The JSON a run that must succeed printed (`--json`); a failure panics
/// with its stderr.
pub fn ok_json((ok, out, err): Said) -> serde_json::Value {
    assert!(ok, "{err}");
    serde_json::from_str(&out).unwrap_or_else(|e| panic!("not JSON ({e}): {out}"))
}

/// The JSON and the stderr of a run that must fail, for the reason `why`.
pub fn failed_json((ok, out, err): Said, why: &str) -> (serde_json::Value, String) {
    assert!(!ok, "{why}: {out}");
    let json = serde_json::from_str(&out).unwrap_or_else(|e| panic!("not JSON ({e}): {out}"));
    (json, err)
}

impl Operator {
    /// `outboxctl … --table table`.
    pub fn new(table: &str) -> Self {
        Self {
            table: table.to_owned(),
            env: Vec::new(),
        }
    }

    /// The same, with `env` added to every command's environment.
    pub fn with_env(mut self, env: &[(&str, &str)]) -> Self {
        self.env
            .extend(env.iter().map(|(k, v)| ((*k).to_owned(), (*v).to_owned())));
        self
    }

    fn run(&self, command: &[&str], args: &[&str]) -> Said {
        let mut line: Vec<&str> = command.to_vec();
        line.extend(["--table", self.table.as_str()]);
        line.extend_from_slice(args);
        let env: Vec<(&str, &str)> = self
            .env
            .iter()
            .map(|(k, v)| (k.as_str(), v.as_str()))
            .collect();
        crate::outboxctl_with(&line, &env)
    }

    /// `outboxctl status`.
    pub fn status(&self, args: &[&str]) -> Said {
        self.run(&["status"], args)
    }

    /// `outboxctl release AGGREGATE`.
    pub fn release(&self, args: &[&str]) -> Said {
        self.run(&["release"], args)
    }

    /// `outboxctl make-due`.
    pub fn make_due(&self, args: &[&str]) -> Said {
        self.run(&["make-due"], args)
    }

    /// `outboxctl dead-letters list`.
    pub fn list(&self, args: &[&str]) -> Said {
        self.run(&["dead-letters", "list"], args)
    }

    /// `outboxctl dead-letters show EVENT_ID`.
    pub fn show(&self, args: &[&str]) -> Said {
        self.run(&["dead-letters", "show"], args)
    }

    /// `outboxctl dead-letters redrive (EVENT_ID… | --all | filters)`.
    pub fn redrive(&self, args: &[&str]) -> Said {
        self.run(&["dead-letters", "redrive"], args)
    }

    /// `outboxctl dead-letters discard EVENT_ID…`.
    pub fn discard(&self, args: &[&str]) -> Said {
        self.run(&["dead-letters", "discard"], args)
    }

    /// `outboxctl redrive-on-failure --queue URL`.
    pub fn redrive_on_failure(&self, args: &[&str]) -> Said {
        self.run(&["redrive-on-failure"], args)
    }

    /// `outboxctl adopt-region --from R`.
    pub fn adopt_region(&self, args: &[&str]) -> Said {
        self.run(&["adopt-region"], args)
    }

    /// `outboxctl doctor`.
    pub fn doctor(&self, args: &[&str]) -> Said {
        self.run(&["doctor"], args)
    }
}
