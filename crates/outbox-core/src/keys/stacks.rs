//! The stack settings records: which outbox stacks publish from a table,
//! in which region, with which variables.
//!
//! Each publishing function (publisher, sweeper) writes one record at cold
//! start, and the sweeper again on every run (its heartbeat), under
//! `OUTBOX_SETTINGS` / `STACK#<region>#<stack>#<function>`
//! ([`stack_settings_key`]). From them:
//! - a writer learns the stack's key schema, shards, home region and size
//!   limit ([`crate::transaction::OutboxSettings::from_stack`]);
//! - `outboxctl` learns the same, and asks which stack when there are
//!   several ([`choose_stack`]);
//! - a publishing function refuses to start while an older stack of its
//!   region is live on the same table ([`rivals`]): two stacks would each
//!   publish and delete a share of the events, and each would take the
//!   other's deletes for its own publishes.

use std::collections::{BTreeMap, HashMap};

use aws_sdk_dynamodb::types::AttributeValue;
use time::format_description::well_known::Rfc3339;
use time::OffsetDateTime;

use super::{attr, ItemKey, SETTINGS_PK};

/// Sort-key prefix of the stack settings records (one per region, stack
/// and function, beside the shard settings item).
pub const STACK_SETTINGS_PREFIX: &str = "STACK#";

/// A stack whose functions recorded nothing for this long is taken as gone
/// (deleted), at the least: its sweeper records every run (five minutes by
/// default: an hour is twelve missed runs), its publisher every five
/// minutes while invoked. A sweep schedule slower than a third of it
/// stretches it ([`RecordedSettings::live_within`]).
pub const LIVE_WITHIN: time::Duration = time::Duration::hours(1);

/// The sweep period a record without `SWEEP_SCHEDULE` runs at (the
/// templates' default, `rate(5 minutes)`).
const DEFAULT_SWEEP_PERIOD: std::time::Duration = std::time::Duration::from_secs(300);

/// The period of an EventBridge schedule expression: `rate(<n> <unit>)`
/// exactly; a `cron(...)` expression, whose gaps vary, counts as one hour.
/// `None` for anything else.
pub fn schedule_period(expression: &str) -> Option<std::time::Duration> {
    let expression = expression.trim();
    if expression.starts_with("cron(") && expression.ends_with(')') {
        return Some(std::time::Duration::from_secs(3_600));
    }
    let inner = expression.strip_prefix("rate(")?.strip_suffix(')')?;
    let (count, unit) = inner.trim().split_once(' ')?;
    let count: u64 = count.parse().ok().filter(|c| *c > 0)?;
    let unit = match unit.trim() {
        "minute" | "minutes" => 60,
        "hour" | "hours" => 3_600,
        "day" | "days" => 86_400,
        _ => return None,
    };
    Some(std::time::Duration::from_secs(count.checked_mul(unit)?))
}

/// The key of the settings record `function` of `stack` writes in
/// `region`: `OUTBOX_SETTINGS` / `STACK#<region>#<stack>#<function>`. One per
/// region, so on a global table one region's record never overwrites
/// another's; one per stack, so a second stack on the table is seen.
pub fn stack_settings_key(region: &str, stack: &str, function: &str) -> ItemKey {
    ItemKey::new(
        SETTINGS_PK,
        format!("{STACK_SETTINGS_PREFIX}{region}#{stack}#{function}"),
    )
}

/// The settings a function of a stack runs with, as it records them in the
/// table.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RecordedSettings {
    /// The region the function runs in.
    pub region: String,
    /// The stack's name (`STACK_NAME`); on a record of a release before
    /// records were keyed by stack, its recorded `STACK_NAME`, or empty.
    pub stack: String,
    /// `publisher` or `sweeper`.
    pub function: String,
    /// The function's name and when it recorded them (`<name> at <RFC 3339>`).
    pub by: String,
    /// When this stack's function first recorded (RFC 3339); `None` on a
    /// record of an earlier release.
    pub since: Option<String>,
    /// Each variable the function was given, with its value.
    pub variables: BTreeMap<String, String>,
}

impl RecordedSettings {
    /// The record's key.
    pub fn key(&self) -> ItemKey {
        stack_settings_key(&self.region, &self.stack, &self.function)
    }

    /// `<name> at <now>`, the `by` of a record written now.
    pub fn by_now(name: &str, now: OffsetDateTime) -> String {
        format!("{name} at {}", now.format(&Rfc3339).unwrap_or_default())
    }

    /// The same record written at `now` (the sweeper's heartbeat).
    pub fn renewed(&self, now: OffsetDateTime) -> Self {
        let name = self
            .by
            .rsplit_once(" at ")
            .map_or(self.by.as_str(), |(name, _)| name);
        Self {
            by: Self::by_now(name, now),
            ..self.clone()
        }
    }

    /// Reads a record out of a settings item whose sort key is the
    /// attribute `sort_key`. `None` for anything else.
    pub fn from_item(item: &HashMap<String, AttributeValue>, sort_key: &str) -> Option<Self> {
        let sk = item.get(sort_key)?.as_s().ok()?;
        let rest = sk.strip_prefix(STACK_SETTINGS_PREFIX)?;
        let variables: BTreeMap<String, String> = item
            .get(attr::VARIABLES)?
            .as_m()
            .ok()?
            .iter()
            .filter_map(|(k, v)| Some((k.clone(), v.as_s().ok()?.clone())))
            .collect();
        let parts: Vec<&str> = rest.splitn(3, '#').collect();
        let (region, stack, function) = match parts.as_slice() {
            [region, stack, function] => (*region, (*stack).to_owned(), *function),
            // `STACK#<region>#<function>`, before records were keyed by stack.
            [region, function] => (
                *region,
                variables.get("STACK_NAME").cloned().unwrap_or_default(),
                *function,
            ),
            _ => return None,
        };
        let text = |name: &str| item.get(name).and_then(|v| v.as_s().ok()).cloned();
        Some(Self {
            region: region.to_owned(),
            stack,
            function: function.to_owned(),
            by: text(attr::RECORDED_BY).unwrap_or_default(),
            since: text(attr::RECORDED_SINCE),
            variables,
        })
    }

    /// When the record was written (from [`RecordedSettings::by`]).
    pub fn recorded_at(&self) -> Option<OffsetDateTime> {
        let (_, at) = self.by.rsplit_once(" at ")?;
        OffsetDateTime::parse(at, &Rfc3339).ok()
    }

    /// How long after its last record this record's stack still counts as
    /// live: three periods of its sweep schedule (`SWEEP_SCHEDULE`, a
    /// `cron(...)` counting as an hour), and never less than
    /// [`LIVE_WITHIN`].
    pub fn live_within(&self) -> time::Duration {
        let period = self
            .variable("SWEEP_SCHEDULE")
            .and_then(schedule_period)
            .unwrap_or(DEFAULT_SWEEP_PERIOD);
        let three =
            time::Duration::try_from(period.saturating_mul(3)).unwrap_or(time::Duration::MAX);
        three.max(LIVE_WITHIN)
    }

    /// Whether it was written within [`RecordedSettings::live_within`] of
    /// `now`.
    pub fn is_live(&self, now: OffsetDateTime) -> bool {
        self.recorded_at()
            .is_some_and(|at| now - at < self.live_within())
    }

    /// Whether `other` is a record of the same stack: the same
    /// CloudFormation stack id (`STACK_ID`) when both have one, which a
    /// renamed `NamePrefix` keeps; otherwise the same name.
    pub fn same_stack(&self, other: &Self) -> bool {
        match (
            self.variables.get("STACK_ID"),
            other.variables.get("STACK_ID"),
        ) {
            (Some(a), Some(b)) => a == b,
            _ => self.stack == other.stack,
        }
    }

    /// A variable's value, if recorded and not blank.
    pub fn variable(&self, name: &str) -> Option<&str> {
        self.variables
            .get(name)
            .map(String::as_str)
            .filter(|v| !v.trim().is_empty())
    }
}

/// The records of another stack than `mine` in `mine`'s region that is live
/// and was there first (its earliest `since` is earlier than this stack's;
/// a tie goes to the smaller name): while there is one, `mine`'s functions
/// must not publish. The first stack keeps publishing while a second one
/// refuses, so adding a stack never stops the one in service. A record
/// without `since` (of an earlier release, which did not check, or written
/// by hand) is never a rival, and does not date its stack.
pub fn rivals<'a>(
    records: &'a [RecordedSettings],
    mine: &RecordedSettings,
    now: OffsetDateTime,
) -> Vec<&'a RecordedSettings> {
    let since = |r: &RecordedSettings| {
        r.since
            .as_deref()
            .and_then(|at| OffsetDateTime::parse(at, &Rfc3339).ok())
    };
    // A stack's first record; `now` when none of its records says.
    let first = |of: &RecordedSettings| {
        records
            .iter()
            .filter(|r| r.region == of.region && r.same_stack(of))
            .chain(std::iter::once(of))
            .filter_map(since)
            .min()
            .unwrap_or(now)
    };
    let my_first = first(mine);
    records
        .iter()
        .filter(|r| r.region == mine.region && !r.same_stack(mine) && r.is_live(now))
        .filter(|r| since(r).is_some())
        .filter(|r| (first(r), r.stack.as_str()) < (my_first, mine.stack.as_str()))
        .collect()
}

/// Why no one stack's settings could be chosen.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum StackChoiceError {
    /// No function of any stack recorded its settings in the table.
    #[error("no outbox stack recorded its settings in the table (its publisher and sweeper record them when they start: have they run?)")]
    NotRecorded,
    /// Records exist, none in this region.
    #[error("the table holds the settings of outbox stacks in {} but none in {region}", .regions.join(", "))]
    OtherRegions {
        /// The region asked for.
        region: String,
        /// The regions that have records.
        regions: Vec<String>,
    },
    /// More than one stack in the region, and none was named.
    #[error("{} outbox stacks recorded their settings in {region}: {}; name one", .stacks.len(), .stacks.join(", "))]
    SeveralStacks {
        /// The region.
        region: String,
        /// Each stack, with whether it is live.
        stacks: Vec<String>,
    },
    /// The stack named has no record in the region.
    #[error("no outbox stack named {stack:?} recorded its settings in {region} (recorded: {})", .found.join(", "))]
    NoSuchStack {
        /// The name asked for.
        stack: String,
        /// The region.
        region: String,
        /// The stacks that did record there.
        found: Vec<String>,
    },
}

/// The record to take the settings of `region`'s stack from: the sweeper's
/// of the stack named `wanted`, else of the only stack of the region, else
/// of the only live one (a deleted stack's records stay in the table), else
/// of the live one in service (the one the others yield to, [`rivals`]);
/// the publisher's when the sweeper never recorded.
pub fn choose_stack<'a>(
    records: &'a [RecordedSettings],
    region: &str,
    wanted: Option<&str>,
    now: OffsetDateTime,
) -> Result<&'a RecordedSettings, StackChoiceError> {
    if records.is_empty() {
        return Err(StackChoiceError::NotRecorded);
    }
    let here: Vec<&RecordedSettings> = records.iter().filter(|r| r.region == region).collect();
    if here.is_empty() {
        let mut regions: Vec<String> = records.iter().map(|r| r.region.clone()).collect();
        regions.sort_unstable();
        regions.dedup();
        return Err(StackChoiceError::OtherRegions {
            region: region.to_owned(),
            regions,
        });
    }
    // One entry per stack: its best record (the sweeper's, the latest).
    let mut stacks: Vec<&RecordedSettings> = Vec::new();
    for record in &here {
        match stacks.iter_mut().find(|s| s.same_stack(record)) {
            Some(best) => {
                if (record.function == "sweeper", record.recorded_at())
                    > (best.function == "sweeper", best.recorded_at())
                {
                    *best = record;
                }
            }
            None => stacks.push(record),
        }
    }
    let names = |of: &[&RecordedSettings]| -> Vec<String> {
        of.iter()
            .map(|r| {
                let name = if r.stack.is_empty() {
                    "(unnamed)"
                } else {
                    r.stack.as_str()
                };
                if r.is_live(now) {
                    format!("{name} (live)")
                } else {
                    format!("{name} (last recorded {})", r.by)
                }
            })
            .collect()
    };
    if let Some(wanted) = wanted {
        return stacks
            .iter()
            .find(|r| r.stack == wanted)
            .copied()
            .ok_or_else(|| StackChoiceError::NoSuchStack {
                stack: wanted.to_owned(),
                region: region.to_owned(),
                found: names(&stacks),
            });
    }
    if let [only] = stacks.as_slice() {
        return Ok(only);
    }
    let live: Vec<&RecordedSettings> = stacks.iter().copied().filter(|r| r.is_live(now)).collect();
    // Of several live ones, the one in service: the one no other was
    // there before (the others refuse to publish).
    let in_service: Vec<&RecordedSettings> = live
        .iter()
        .copied()
        .filter(|r| r.since.is_some() && rivals(records, r, now).is_empty())
        .collect();
    match (live.as_slice(), in_service.as_slice()) {
        ([only], _) | (_, [only]) => Ok(only),
        _ => Err(StackChoiceError::SeveralStacks {
            region: region.to_owned(),
            stacks: names(&stacks),
        }),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A record of `stack`'s `function`, written at `at` and in service
    /// since `since` (none if empty), both `MM-DDTHH:MM` in 2026 UTC.
    fn record(stack: &str, function: &str, at: &str, since: &str) -> RecordedSettings {
        RecordedSettings {
            region: "eu-west-1".into(),
            stack: stack.into(),
            function: function.into(),
            by: format!("{stack}-{function} at 2026-{at}:00Z"),
            since: (!since.is_empty()).then(|| format!("2026-{since}:00Z")),
            variables: BTreeMap::from([("STACK_NAME".to_owned(), stack.to_owned())]),
        }
    }

    fn now() -> OffsetDateTime {
        OffsetDateTime::parse("2026-12-07T12:00:00Z", &Rfc3339).unwrap()
    }

    #[test]
    fn the_key_parses_back_and_an_old_key_takes_its_recorded_name() {
        let mine = record("orders", "sweeper", "12-07T11:59", "12-01T00:00");
        let key = mine.key();
        assert_eq!(key.sk, "STACK#eu-west-1#orders#sweeper");
        let s = |v: &str| AttributeValue::S(v.to_owned());
        let item = |sk: &str| {
            let variables = HashMap::from([("STACK_NAME".to_owned(), s("orders"))]);
            HashMap::from([
                ("SK".to_owned(), s(sk)),
                (attr::VARIABLES.to_owned(), AttributeValue::M(variables)),
                (attr::RECORDED_BY.to_owned(), s(&mine.by)),
                (attr::RECORDED_SINCE.to_owned(), s("2026-12-01T00:00:00Z")),
            ])
        };
        let from = |sk: &str| RecordedSettings::from_item(&item(sk), "SK");
        assert_eq!(from(&key.sk), Some(mine.clone()));
        let old = from("STACK#eu-west-1#sweeper").unwrap();
        assert_eq!(
            (old.stack.as_str(), old.function.as_str()),
            ("orders", "sweeper")
        );
        assert!(old.same_stack(&mine));
        assert_eq!(from("META"), None);
    }

    #[test]
    fn a_second_stack_yields_to_the_first_live_one_and_the_first_keeps_going() {
        let one = record("one", "sweeper", "12-07T11:58", "11-01T00:00");
        let two = record("two", "publisher", "12-07T11:59", "12-07T11:59");
        let records = vec![one.clone(), two.clone()];
        assert_eq!(rivals(&records, &two, now()), vec![&one]);
        assert!(rivals(&records, &one, now()).is_empty());
        // Stack one deleted: an hour after its last record, two publishes.
        let later = now() + time::Duration::minutes(61);
        assert!(rivals(&records, &two, later).is_empty());
        // A record of an earlier release (no `since`) is never a rival.
        let old = record("old", "sweeper", "12-07T11:58", "");
        assert!(rivals(&[old.clone(), one.clone()], &one, now()).is_empty());
        // A slow sweep schedule keeps its stack live for three periods.
        let mut slow = record("slow", "sweeper", "12-07T07:00", "11-01T00:00");
        slow.variables
            .insert("SWEEP_SCHEDULE".into(), "rate(2 hours)".into());
        assert_eq!(slow.live_within(), time::Duration::hours(6));
        assert_eq!(rivals(&[slow.clone()], &two, now()), vec![&slow]);
        // Another region's stack is never a rival.
        let mut far = one.clone();
        far.region = "us-east-1".into();
        assert!(rivals(&[far, two.clone()], &two, now()).is_empty());
    }

    #[test]
    fn a_renamed_stack_is_the_same_stack_by_its_id() {
        let mut before = record("old-name", "sweeper", "12-07T11:58", "11-01T00:00");
        let mut after = record("new-name", "sweeper", "12-07T11:59", "12-07T11:59");
        for r in [&mut before, &mut after] {
            r.variables
                .insert("STACK_ID".into(), "arn:stack/x/1".into());
        }
        assert!(rivals(&[before.clone()], &after, now()).is_empty());
    }

    #[test]
    fn the_stack_chosen_is_the_named_the_only_or_the_only_live_one() {
        fn choose<'a>(
            records: &'a [RecordedSettings],
            wanted: Option<&str>,
        ) -> Result<&'a RecordedSettings, StackChoiceError> {
            choose_stack(records, "eu-west-1", wanted, now())
        }
        let one_p = record("one", "publisher", "12-07T11:58", "11-01T00:00");
        let one_s = record("one", "sweeper", "12-07T11:57", "11-01T00:00");
        let gone = record("gone", "sweeper", "12-01T00:00", "10-01T00:00");
        let two = record("two", "sweeper", "12-07T11:59", "12-07T11:00");
        assert_eq!(choose(&[one_p.clone(), one_s.clone()], None), Ok(&one_s));
        assert_eq!(choose(std::slice::from_ref(&one_p), None), Ok(&one_p));
        let records = vec![one_p.clone(), one_s.clone(), gone.clone()];
        assert_eq!(choose(&records, None), Ok(&one_s));
        assert_eq!(choose(&records, Some("gone")), Ok(&gone));
        // Two live stacks: the one in service (the other refuses).
        let records = vec![one_s.clone(), two.clone()];
        assert_eq!(choose(&records, None), Ok(&one_s));
        // Two live stacks that nothing tells apart: name one.
        let (mut one_s, mut two) = (one_s, two);
        one_s.since = None;
        two.since = None;
        let records = vec![one_s.clone(), two.clone()];
        let several = choose(&records, None).unwrap_err();
        assert!(
            matches!(&several, StackChoiceError::SeveralStacks { stacks, .. } if stacks.len() == 2),
            "{several}"
        );
        assert!(
            several.to_string().contains("one (live), two (live)"),
            "{several}"
        );
        assert!(matches!(
            choose(&records, Some("three")),
            Err(StackChoiceError::NoSuchStack { .. })
        ));
        assert!(matches!(
            choose_stack(&records, "us-east-1", None, now()),
            Err(StackChoiceError::OtherRegions { regions, .. }) if regions == ["eu-west-1"]
        ));
        assert_eq!(choose(&[], None), Err(StackChoiceError::NotRecorded));
    }
}
