//! The proxy's state, shared by [`FaultProxy`](super::FaultProxy) and the
//! server: the fault plan (the rules in the order they were added, the
//! chooser, the crash hook, the sabotage, the current tag) and what it
//! recorded (operations seen and faulted, IAM grants, the journal); and
//! [`fault_for`], the fault a call gets from the plan.

use std::sync::{Arc, Mutex};

use super::{Call, Chooser, Fault, Sabotage};

/// A rule of the plan: `fault` for the calls of `operation`.
#[derive(Debug)]
pub(super) struct Rule {
    pub(super) operation: String,
    pub(super) fault: Fault,
    /// Calls it still applies to (`None`: every call).
    pub(super) remaining: Option<usize>,
}

/// What [`FaultProxy`](super::FaultProxy) and its server share.
#[derive(Default)]
pub(super) struct State {
    pub(super) rules: Vec<Rule>,
    pub(super) chooser: Option<Chooser>,
    pub(super) crash: Option<Arc<dyn Fn() + Send + Sync>>,
    pub(super) tag: u64,
    pub(super) journal: Vec<Call>,
    /// Operations seen, in order.
    pub(super) seen: Vec<String>,
    /// Operations a fault was applied to.
    pub(super) faulted: Vec<String>,
    /// IAM actions of the calls seen, each with the resource it names.
    pub(super) actions: Vec<(String, String)>,
    /// The stream of the latest shard iterator taken (a `GetRecords`
    /// names only an opaque iterator).
    pub(super) last_stream: Option<String>,
    pub(super) sabotage: Option<Sabotage>,
    /// Calls answered and not forwarded yet ([`Sabotage::AcknowledgeEarly`]).
    pub(super) delayed: usize,
    /// Deletes answered and held until their invocation ends
    /// ([`Sabotage::DeferDeletes`]).
    pub(super) deferred: Vec<super::server::Deferred>,
    /// [`Sabotage::DeferDeletes`]: events published per invocation, until
    /// the kill is set.
    pub(super) published: std::collections::HashMap<u64, usize>,
    pub(super) kill_set: bool,
    /// Holds the unfaulted sink calls to what moto serves.
    pub(super) gate: Option<Arc<super::SinkGate>>,
}

/// Records a call of `operation` as seen and gives its fault: the first
/// rule of the operation with calls left, else the chooser's, asked about
/// `subject`; with the current tag.
pub(super) fn fault_for(
    state: &Mutex<State>,
    operation: &str,
    subject: &str,
) -> (u64, Option<Fault>) {
    let mut state = state.lock().unwrap();
    state.seen.push(operation.to_owned());
    let tag = state.tag;
    let ruled = state
        .rules
        .iter_mut()
        .find(|r| r.operation == operation && r.remaining != Some(0))
        .map(|rule| {
            if let Some(n) = &mut rule.remaining {
                *n -= 1;
            }
            rule.fault.clone()
        });
    let fault = match ruled {
        Some(fault) => Some(fault),
        None => state
            .chooser
            .as_mut()
            .and_then(|choose| choose(subject, tag)),
    };
    if fault.as_ref().is_some_and(|f| *f != Fault::Pass) {
        state.faulted.push(operation.to_owned());
    }
    (tag, fault)
}
