//! Operations on a deployed stack's outbox, through the store port
//! ([`OutboxStore`]): status, dead letters (list, find, redrive, discard).
//! Read only through the two sparse indexes, each read bounded per shard;
//! every write is conditional, so two operators (or an operator and the
//! sweeper) never double an effect.

use outbox_engine::Deadline;
use outbox_engine::{
    Created, Cursor, DeadLetterRecord, Marked, OutboxStore, PendingItem, PendingQuery, StoreError,
};
use serde::Serialize;
use time::format_description::well_known::Rfc3339;
use time::OffsetDateTime;
use ulid::Ulid;

/// An operation failed.
#[derive(Debug, thiserror::Error)]
pub enum OpsError {
    /// A store call failed (its AWS error code).
    #[error(transparent)]
    Store(#[from] StoreError),
    /// No dead letter has that id.
    #[error("no dead letter with event id {0}")]
    NotFound(String),
    /// The id is not a ULID.
    #[error("{0} is not an event id (a ULID)")]
    BadEventId(String),
    /// `release`: the aggregate is not parked.
    #[error("aggregate {0} is not parked (no event of it is held for longer than the sweep period, and it has no dead letter); `outboxctl status` lists the parked ones")]
    NotParked(String),
    /// `release`: the aggregate waits behind a dead letter, which only a
    /// redrive or a discard settles.
    #[error("aggregate {aggregate} waits behind its dead letter {dead_letter}: redrive it (`outboxctl dead-letters redrive {dead_letter}`) or discard it; releasing would publish its later events before it")]
    BehindDeadLetter {
        /// The aggregate.
        aggregate: String,
        /// Its oldest dead letter.
        dead_letter: String,
    },
}

/// Items read per shard and index, at most (a status is a bounded read).
pub const READ_LIMIT: usize = 1_000;

/// How long one operator read or write may take, its SDK retries included.
const CALL_DEADLINE: std::time::Duration = std::time::Duration::from_secs(60);

fn deadline() -> Deadline {
    Deadline::after(CALL_DEADLINE)
}

/// One shard's figures.
#[derive(Debug, Clone, Default, Serialize, PartialEq, Eq)]
#[serde(rename_all = "camelCase")]
pub struct ShardStatus {
    /// The shard.
    pub shard: u16,
    /// Pending items.
    pub pending: usize,
    /// `pending` stopped at [`READ_LIMIT`]: it is a lower bound.
    pub pending_capped: bool,
    /// Pending items a sweeper attempt failed for, waiting for their backoff.
    pub backing_off: usize,
    /// Dead letters.
    pub dead_letters: usize,
    /// `dead_letters` stopped at [`READ_LIMIT`].
    pub dead_letters_capped: bool,
    /// Age of the shard's oldest pending event.
    pub oldest_pending_age_seconds: Option<i64>,
}

/// `outboxctl status`.
#[derive(Debug, Clone, Default, Serialize, PartialEq, Eq)]
#[serde(rename_all = "camelCase")]
pub struct Status {
    /// Pending items, every shard.
    pub pending: usize,
    /// Age of the oldest pending event.
    pub oldest_pending_age_seconds: Option<i64>,
    /// Pending items a sweeper attempt failed for, waiting for their backoff.
    pub backing_off: usize,
    /// When the earliest of them is due (RFC 3339).
    pub next_attempt_due: Option<String>,
    /// Dead letters, every shard.
    pub dead_letters: usize,
    /// A count stopped at the read limit somewhere: totals are lower bounds.
    pub capped: bool,
    /// Pending events held behind an older event of their aggregate
    /// (strict ordering).
    pub held: usize,
    /// Parked aggregates: those with a dead letter, oldest dead letter
    /// first (with strict ordering their later events wait, held, until
    /// it is redriven or discarded), then those with an event held for
    /// longer than the sweep period (`outboxctl release` hands them to the
    /// next sweep).
    pub parked: Vec<ParkedAggregate>,
    /// Per shard.
    pub shards: Vec<ShardStatus>,
}

/// A parked aggregate (`outboxctl status`): one with a dead letter, or
/// with an event held for longer than the sweep period.
#[derive(Debug, Clone, Default, Serialize, PartialEq, Eq)]
#[serde(rename_all = "camelCase")]
pub struct ParkedAggregate {
    /// The aggregate.
    pub aggregate_id: String,
    /// Its item collection (partition key).
    pub partition_key: String,
    /// Its oldest dead letter, when it has one.
    pub dead_letter: Option<String>,
    /// Otherwise its oldest held event, held for longer than the sweep
    /// period ...
    pub held: Option<String>,
    /// ... behind this older event (its id: pending, backing off or
    /// claimed) ...
    pub held_behind: Option<String>,
    /// ... since (RFC 3339).
    pub held_since: Option<String>,
    /// Its pending events newer than the dead letter (or the held event's
    /// blocker): with strict ordering, the events waiting.
    pub waiting: usize,
    /// The sort key below every outbox key of the collection (the outbox
    /// prefix), where `release` starts reading.
    #[serde(skip)]
    outbox_start: String,
}

/// The event id at the end of an outbox sort key (`<prefix><ulid>`),
/// whatever the prefix.
fn ulid_of(sk: &str) -> Option<Ulid> {
    sk.len()
        .checked_sub(26)
        .and_then(|at| sk.get(at..))
        .and_then(|id| Ulid::from_string(id).ok())
}

/// Which dead letters a list or a redrive takes.
#[derive(Debug, Clone, Default)]
pub struct DeadLetterFilter {
    /// Only this event type.
    pub event_type: Option<String>,
    /// Only this aggregate.
    pub aggregate_id: Option<String>,
    /// Dead-lettered at or after.
    pub since: Option<OffsetDateTime>,
}

impl DeadLetterFilter {
    /// Whether any criterion is set.
    pub(crate) fn is_set(&self) -> bool {
        self.event_type.is_some() || self.aggregate_id.is_some() || self.since.is_some()
    }

    fn keeps(&self, row: &DeadLetterRecord) -> bool {
        self.event_type
            .as_ref()
            .is_none_or(|t| *t == row.event_type)
            && self
                .aggregate_id
                .as_ref()
                .is_none_or(|a| *a == row.aggregate_id)
            && self.since.is_none_or(|since| {
                OffsetDateTime::parse(&row.dead_lettered_at, &Rfc3339).is_ok_and(|at| at >= since)
            })
    }
}

/// The operator's operations on one stack's outbox.
#[derive(Debug, Clone)]
pub struct Operations<S> {
    store: S,
    parked_after: std::time::Duration,
}

/// Which pending events `make-due` takes: those matching every selector
/// given (at least one).
#[derive(Debug, Clone, Default)]
pub struct DueSelector {
    /// These events.
    pub event_ids: Vec<Ulid>,
    /// The events of this aggregate.
    pub aggregate: Option<String>,
    /// Events created longer ago than this.
    pub older_than: Option<time::Duration>,
}

impl DueSelector {
    /// Whether it selects anything narrower than "everything".
    pub fn is_empty(&self) -> bool {
        self.event_ids.is_empty() && self.aggregate.is_none() && self.older_than.is_none()
    }
}

/// What `release` or `make-due` did to one pending event.
#[derive(Debug, Clone, Serialize, PartialEq, Eq)]
#[serde(rename_all = "camelCase")]
pub struct Released {
    /// The event.
    pub event_id: String,
    /// `released` (due now, in the next scheduled sweep's hands), or
    /// `skipped` (published, dead-lettered or claimed meanwhile).
    pub outcome: String,
}

impl<S: OutboxStore> Operations<S> {
    /// Operations through `store`; an aggregate held for longer than the
    /// template's default sweep period (5 minutes) counts as parked.
    pub fn new(store: S) -> Self {
        Self {
            store,
            parked_after: std::time::Duration::from_secs(300),
        }
    }

    /// An aggregate held for longer than `period` (the stack's sweep
    /// period, `SWEEP_SCHEDULE`) counts as parked.
    pub(crate) fn parked_after(mut self, period: std::time::Duration) -> Self {
        self.parked_after = period;
        self
    }

    /// The store.
    pub fn store(&self) -> &S {
        &self.store
    }

    /// Shards to read: the highest count the writers and sweepers recorded.
    pub async fn shards(&self) -> Result<u16, OpsError> {
        Ok(self.store.recorded_shards(&deadline()).await?)
    }

    /// Pending items of one shard, oldest first, at most [`READ_LIMIT`]
    /// (and whether it stopped there).
    async fn pending(&self, shard: u16) -> Result<(Vec<PendingItem>, bool), OpsError> {
        let query = PendingQuery {
            shard,
            created: Created::Any,
            limit: READ_LIMIT as i32,
        };
        read_capped(READ_LIMIT, |cursor| async {
            let page = self.store.pending_page(&query, cursor, &deadline()).await?;
            Ok((page.items, page.next))
        })
        .await
    }

    /// Dead letters of one shard, oldest first, at most `cap` (and whether
    /// the read stopped there).
    async fn shard_dead_letters(
        &self,
        shard: u16,
        cap: usize,
    ) -> Result<(Vec<DeadLetterRecord>, bool), OpsError> {
        read_capped(cap, |cursor| async {
            let page = self
                .store
                .dead_letter_page(shard, READ_LIMIT as i32, cursor, &deadline())
                .await?;
            Ok((page.items, page.next))
        })
        .await
    }

    /// Pending, backing-off and dead-lettered events, per shard.
    pub async fn status(&self, now: OffsetDateTime) -> Result<Status, OpsError> {
        let mut status = Status::default();
        let mut next_due: Option<i64> = None;
        let mut all_dead: Vec<DeadLetterRecord> = Vec::new();
        let mut all_pending: Vec<(String, Ulid)> = Vec::new();
        let mut long_held: Vec<outbox_core::OutboxItem> = Vec::new();
        let parked_since =
            now.unix_timestamp() - i64::try_from(self.parked_after.as_secs()).unwrap_or(i64::MAX);
        for shard in 0..self.shards().await? {
            let (pending, pending_capped) = self.pending(shard).await?;
            let (dead, dead_capped) = self.shard_dead_letters(shard, READ_LIMIT).await?;
            for p in &pending {
                if let PendingItem::Item(item) = p {
                    status.held += usize::from(item.held_behind.is_some());
                    all_pending.push((item.aggregate_id.clone(), item.event_id));
                    if item.held_behind.is_some()
                        && item.held_since.is_some_and(|since| since < parked_since)
                    {
                        long_held.push(item.clone());
                    }
                }
            }
            // The oldest by creation, not the index's first: a redriven
            // item (`!<ulid>`) sorts first whatever its age.
            let age = pending.iter().filter_map(created_at).min().map(|created| {
                (now.unix_timestamp() - (created.timestamp_ms() / 1000) as i64).max(0)
            });
            let waiting: Vec<i64> = pending
                .iter()
                .filter_map(|p| match p {
                    PendingItem::Item(item) => item.next_attempt_at,
                    PendingItem::Undecodable { .. } => None,
                })
                .filter(|at| *at > now.unix_timestamp())
                .collect();
            if let Some(min) = waiting.iter().min() {
                next_due = Some(next_due.map_or(*min, |d| d.min(*min)));
            }
            let row = ShardStatus {
                shard,
                pending: pending.len(),
                pending_capped,
                backing_off: waiting.len(),
                dead_letters: dead.len(),
                dead_letters_capped: dead_capped,
                oldest_pending_age_seconds: age,
            };
            status.pending += row.pending;
            status.backing_off += row.backing_off;
            status.dead_letters += row.dead_letters;
            status.capped |= pending_capped || dead_capped;
            status.oldest_pending_age_seconds = match (status.oldest_pending_age_seconds, age) {
                (Some(a), Some(b)) => Some(a.max(b)),
                (a, b) => a.or(b),
            };
            status.shards.push(row);
            all_dead.extend(dead);
        }
        all_dead.sort_by(|a, b| a.event_id.cmp(&b.event_id));
        for letter in all_dead {
            if letter.aggregate_id.is_empty()
                || status
                    .parked
                    .iter()
                    .any(|p| p.aggregate_id == letter.aggregate_id)
            {
                continue;
            }
            let waiting = all_pending
                .iter()
                .filter(|(aggregate, id)| {
                    *aggregate == letter.aggregate_id && id.to_string() > letter.event_id
                })
                .count();
            status.parked.push(ParkedAggregate {
                aggregate_id: letter.aggregate_id,
                partition_key: letter.key.pk,
                dead_letter: Some(letter.event_id),
                waiting,
                ..ParkedAggregate::default()
            });
        }
        long_held.sort_by_key(|item| item.event_id);
        for item in long_held {
            if status
                .parked
                .iter()
                .any(|p| p.aggregate_id == item.aggregate_id)
            {
                continue;
            }
            let behind = item.held_behind.as_deref().and_then(ulid_of);
            let waiting = all_pending
                .iter()
                .filter(|(aggregate, id)| {
                    *aggregate == item.aggregate_id && behind.is_none_or(|b| *id > b)
                })
                .count();
            status.parked.push(ParkedAggregate {
                aggregate_id: item.aggregate_id.clone(),
                partition_key: item.pk.clone(),
                dead_letter: None,
                held: Some(item.event_id.to_string()),
                held_behind: behind.map(|b| b.to_string()),
                held_since: item
                    .held_since
                    .and_then(|t| OffsetDateTime::from_unix_timestamp(t).ok())
                    .and_then(|t| t.format(&Rfc3339).ok()),
                waiting,
                outbox_start: item
                    .sk
                    .get(..item.sk.len().saturating_sub(26))
                    .unwrap_or_default()
                    .to_owned(),
            });
        }
        status.next_attempt_due = next_due
            .and_then(|t| OffsetDateTime::from_unix_timestamp(t).ok())
            .and_then(|t| t.format(&Rfc3339).ok());
        Ok(status)
    }

    /// Every dead letter that `filter` keeps, oldest first: every page of
    /// every shard (a list or a redrive covers its whole selection; only
    /// `status` is a bounded read).
    pub async fn dead_letters(
        &self,
        filter: &DeadLetterFilter,
    ) -> Result<Vec<DeadLetterRecord>, OpsError> {
        let mut rows = Vec::new();
        for shard in 0..self.shards().await? {
            let (items, _) = self.shard_dead_letters(shard, usize::MAX).await?;
            rows.extend(items.into_iter().filter(|row| filter.keeps(row)));
        }
        rows.sort_by(|a, b| a.event_id.cmp(&b.event_id));
        Ok(rows)
    }

    /// The dead letter of `event_id`.
    pub async fn find(&self, event_id: &str) -> Result<DeadLetterRecord, OpsError> {
        let id =
            Ulid::from_string(event_id).map_err(|_| OpsError::BadEventId(event_id.to_owned()))?;
        for shard in 0..self.shards().await? {
            if let Some(row) = self.store.find_dead_letter(shard, id, &deadline()).await? {
                return Ok(row);
            }
        }
        Err(OpsError::NotFound(id.to_string()))
    }

    /// Puts a dead letter back into the pending index ([`Marked::Gone`]:
    /// someone else redrove or discarded it first).
    pub async fn redrive(&self, row: &DeadLetterRecord) -> Result<Marked, OpsError> {
        Ok(self.store.redrive(row, &deadline()).await?)
    }

    /// Makes every pending event `which` selects due now (`make-due`): the
    /// pending index of every shard read whole, each event selected made
    /// due and handed to the scheduled sweep (`OperatorStore::make_due`,
    /// the write `release` makes), which publishes it (after every older
    /// event of its aggregate in strict mode). Each selector given must
    /// match; dead letters are not pending (redrive them).
    pub async fn make_due(
        &self,
        which: &DueSelector,
        now: OffsetDateTime,
    ) -> Result<Vec<Released>, OpsError> {
        // An age beyond the calendar selects what was created before it:
        // nothing.
        let created_before = which.older_than.map(|age| {
            let before = now.checked_sub(age).unwrap_or(OffsetDateTime::UNIX_EPOCH);
            Ulid::from_parts(
                u64::try_from(before.unix_timestamp_nanos() / 1_000_000).unwrap_or(0),
                0,
            )
        });
        let mut released = Vec::new();
        for shard in 0..self.shards().await? {
            let query = PendingQuery {
                shard,
                created: Created::Any,
                limit: READ_LIMIT as i32,
            };
            let (pending, _) = read_capped(usize::MAX, |cursor| async {
                let page = self.store.pending_page(&query, cursor, &deadline()).await?;
                Ok((page.items, page.next))
            })
            .await?;
            for stored in pending {
                let (key, event_id, aggregate) = match &stored {
                    PendingItem::Item(item) => (
                        item.key(),
                        Some(item.event_id),
                        Some(item.aggregate_id.as_str()),
                    ),
                    PendingItem::Undecodable { key, event_id, .. } => {
                        (key.clone(), *event_id, None)
                    }
                };
                let selected = (which.event_ids.is_empty()
                    || event_id.is_some_and(|id| which.event_ids.contains(&id)))
                    && which
                        .aggregate
                        .as_deref()
                        .is_none_or(|wanted| aggregate == Some(wanted))
                    && created_before.is_none_or(|before| event_id.is_some_and(|id| id < before));
                if !selected {
                    continue;
                }
                released.push(Released {
                    outcome: self.make_one_due(&key, "due now").await?,
                    event_id: event_id.map_or(key.sk.clone(), |id| id.to_string()),
                });
            }
        }
        Ok(released)
    }

    /// Releases a parked aggregate whose events wait behind one that is
    /// not a dead letter (backing off, held, or pending under its normal
    /// key): every pending event of its collection becomes due now and is
    /// handed to the scheduled sweep, which publishes them oldest first
    /// (each still guarded in strict mode). An aggregate parked behind a
    /// dead letter is refused ([`OpsError::BehindDeadLetter`]): only a
    /// redrive or a discard settles that one.
    pub async fn release(
        &self,
        aggregate_id: &str,
        now: OffsetDateTime,
    ) -> Result<Vec<Released>, OpsError> {
        let status = self.status(now).await?;
        let Some(parked) = status
            .parked
            .iter()
            .find(|p| p.aggregate_id == aggregate_id)
        else {
            return Err(OpsError::NotParked(aggregate_id.to_owned()));
        };
        if let Some(dead_letter) = &parked.dead_letter {
            return Err(OpsError::BehindDeadLetter {
                aggregate: aggregate_id.to_owned(),
                dead_letter: dead_letter.clone(),
            });
        }
        // Every pending event of the collection, oldest first (the blocker
        // included).
        let start = outbox_core::keys::ItemKey {
            pk: parked.partition_key.clone(),
            sk: parked.outbox_start.clone(),
        };
        let mut released = Vec::new();
        for stored in self.store.newer_pending(&start, &deadline()).await? {
            let key = match &stored {
                PendingItem::Item(item) => item.key(),
                PendingItem::Undecodable { key, .. } => key.clone(),
            };
            released.push(Released {
                outcome: self.make_one_due(&key, "released").await?,
                event_id: ulid_of(&key.sk).map_or(key.sk.clone(), |id| id.to_string()),
            });
        }
        Ok(released)
    }

    /// Makes one pending event due (`OperatorStore::make_due`); what
    /// happened, `done` when it was.
    async fn make_one_due(
        &self,
        key: &outbox_core::keys::ItemKey,
        done: &str,
    ) -> Result<String, OpsError> {
        Ok(match self.store.make_due(key, &deadline()).await? {
            Marked::Updated => done,
            Marked::Gone | Marked::Claimed => "skipped: published, dead-lettered or claimed meanwhile",
            Marked::Refused => {
                "refused: still in the table, in no pending index this stack reads (check the writer's keys)"
            }
        }
        .to_owned())
    }

    /// Deletes a dead letter ([`Marked::Gone`]: it was no longer one).
    pub async fn discard(&self, row: &DeadLetterRecord) -> Result<Marked, OpsError> {
        Ok(self.store.discard(row, &deadline()).await?)
    }
}

/// Reads pages until the last or until `cap` items (then `true`: the read
/// stopped there).
async fn read_capped<T, F, Fut>(cap: usize, mut page: F) -> Result<(Vec<T>, bool), OpsError>
where
    F: FnMut(Option<Cursor>) -> Fut,
    Fut: std::future::Future<Output = Result<(Vec<T>, Option<Cursor>), StoreError>>,
{
    let mut items = Vec::new();
    let mut cursor = None;
    loop {
        let (more, next) = page(cursor).await?;
        items.extend(more);
        cursor = next;
        if cursor.is_none() {
            return Ok((items, false));
        }
        if items.len() >= cap {
            items.truncate(cap);
            return Ok((items, true));
        }
    }
}

/// When a pending item's event was created (its ULID; an undecodable
/// item's as the store read it from the sort key with the table's own key
/// schema).
fn created_at(item: &PendingItem) -> Option<Ulid> {
    match item {
        PendingItem::Item(item) => Some(item.event_id),
        PendingItem::Undecodable { event_id, .. } => *event_id,
    }
}

/// The envelope of a dead letter, when it decodes.
pub fn envelope_of(row: &DeadLetterRecord) -> Option<serde_json::Value> {
    serde_json::from_str(row.envelope.as_deref()?).ok()
}

#[cfg(test)]
mod tests {
    use outbox_core::{EventEnvelope, OutboxItem};
    use outbox_engine::{DeadLetter, MemoryStore, PublishStore};
    use serde_json::json;

    use super::*;

    fn item(aggregate: &str) -> OutboxItem {
        let env = EventEnvelope::new("OrderCreated", "Order", aggregate, 1, json!({})).unwrap();
        let limits = outbox_core::size::EventLimits::eventbridge("src");
        OutboxItem::new(&format!("ORDER#{aggregate}"), &env, &limits, 1).unwrap()
    }

    /// An item of `aggregate` stored in `store` and dead-lettered after
    /// `attempts`.
    async fn dead_letter(
        store: &MemoryStore,
        aggregate: &str,
        attempts: Option<u32>,
    ) -> OutboxItem {
        let item = item(aggregate);
        store.insert(item.clone());
        let letter = DeadLetter {
            key: &item.key(),
            aggregate_id: Some(aggregate),
            reason: "poison",
            attempts,
            claim: None,
        };
        store.dead_letter(letter, &deadline()).await.unwrap();
        item
    }

    /// A list covers every dead letter; only the status is a bounded read
    /// (and says so).
    #[tokio::test]
    async fn lists_page_through_everything_and_only_status_is_capped() {
        let store = MemoryStore::new(1);
        for i in 0..READ_LIMIT + 1 {
            dead_letter(&store, &format!("a{i}"), None).await;
        }
        let ops = Operations::new(store);
        let all = ops.dead_letters(&Default::default()).await.unwrap();
        assert_eq!(all.len(), READ_LIMIT + 1);
        let status = ops.status(OffsetDateTime::now_utc()).await.unwrap();
        assert_eq!((status.dead_letters, status.capped), (READ_LIMIT, true));
    }

    /// Status, list, find, redrive and discard, through the port.
    #[tokio::test]
    async fn operations_go_through_the_store_port() {
        let store = MemoryStore::new(1);
        let a = dead_letter(&store, "a", Some(3)).await;
        store.insert(item("b"));
        let ops = Operations::new(store);
        let status = ops.status(OffsetDateTime::now_utc()).await.unwrap();
        assert_eq!((status.pending, status.dead_letters), (1, 1));
        let rows = ops.dead_letters(&Default::default()).await.unwrap();
        assert_eq!(rows.len(), 1);
        assert_eq!(rows[0].attempts, 3);
        let only_b = DeadLetterFilter {
            aggregate_id: Some("b".into()),
            ..DeadLetterFilter::default()
        };
        assert!(ops.dead_letters(&only_b).await.unwrap().is_empty());
        let id = a.event_id.to_string();
        let found = ops.find(&id).await.unwrap();
        assert_eq!(envelope_of(&found).unwrap()["eventId"], id);
        assert!(matches!(
            ops.find("nope").await,
            Err(OpsError::BadEventId(_))
        ));
        assert_eq!(ops.redrive(&found).await.unwrap(), Marked::Updated);
        assert_eq!(ops.discard(&found).await.unwrap(), Marked::Gone);
        assert!(matches!(ops.find(&id).await, Err(OpsError::NotFound(_))));
    }
}
