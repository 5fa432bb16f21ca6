//! [`ClaimChecked`]: the sink of claim-checked events (their item holds a
//! stub envelope and a `payloadRef`, `outbox_core::claim`). Before a call
//! it reads each such event's object and checks its size and SHA-256; an
//! event whose whole envelope fits the sink is published whole, any other
//! as its claim check (the stub on EventBridge; on SNS the adapter's
//! Extended Client pointer). A missing or mismatched object is poison:
//! dead-lettered with its reason, never published.

use futures::future::join_all;
use outbox_core::claim::{PayloadError, PayloadRef, PayloadStore};
use outbox_core::OutboxItem;

use crate::sink::{EntryOutcome, EventSink, FailureKind, PublishFailure, SendCounter, SinkError};

/// The code of a claim-checked event whose object does not exist.
pub const PAYLOAD_MISSING: &str = "PayloadMissing";
/// The code of a claim-checked event whose object is not the one the
/// outbox item records (its size or its SHA-256).
pub const PAYLOAD_MISMATCH: &str = "PayloadMismatch";
/// The code of a claim-checked event larger than a claim check takes
/// (`outbox_core::claim::MAX_PAYLOAD_BYTES`): not read, dead-lettered.
pub const PAYLOAD_TOO_LARGE: &str = "PayloadTooLarge";

/// Objects read at once, across every call of one sink (its clones
/// included): with [`MAX_PAYLOAD_BYTES`](outbox_core::claim::MAX_PAYLOAD_BYTES)
/// each, a bound on the memory they take.
pub const CONCURRENT_READS: usize = 4;

/// `sink`, resolving claim checks through `payloads` (every event without
/// a `payloadRef` goes through untouched, with no call to `payloads`).
#[derive(Debug, Clone)]
pub struct ClaimChecked<S, P> {
    sink: S,
    payloads: P,
    reads: std::sync::Arc<tokio::sync::Semaphore>,
}

impl<S, P> ClaimChecked<S, P> {
    /// `sink` reading claim-checked events' objects from `payloads`, at
    /// most [`CONCURRENT_READS`] at once.
    pub fn new(sink: S, payloads: P) -> Self {
        Self {
            sink,
            payloads,
            reads: std::sync::Arc::new(tokio::sync::Semaphore::new(CONCURRENT_READS)),
        }
    }

    /// The sink it publishes to.
    pub fn sink(&self) -> &S {
        &self.sink
    }
}

impl<S: EventSink, P: PayloadStore> ClaimChecked<S, P> {
    /// The size of `item`'s whole envelope as the sink's entry (the entry
    /// sizes of every sink grow by exactly the envelope's length:
    /// `outbox_core::size`).
    fn whole_size(&self, item: &OutboxItem, r: &PayloadRef) -> usize {
        let bare = OutboxItem {
            envelope: String::new(),
            payload_ref: None,
            ..item.clone()
        };
        self.sink
            .entry_size(&bare)
            .saturating_add(usize::try_from(r.size).unwrap_or(usize::MAX))
    }

    fn fits_whole(&self, item: &OutboxItem, r: &PayloadRef) -> bool {
        self.whole_size(item, r) <= self.sink.max_bytes()
    }

    /// What is sent for `item`: itself, or, when claim-checked, its whole
    /// envelope (when it fits) or itself again (the claim check), once its
    /// object has been read and checked.
    async fn resolve(&self, item: &OutboxItem) -> Result<Option<OutboxItem>, PublishFailure> {
        let Some(r) = &item.payload_ref else {
            return Ok(None);
        };
        if r.size > outbox_core::claim::MAX_PAYLOAD_BYTES as u64 {
            return Err(PublishFailure::new(
                FailureKind::Poison,
                PAYLOAD_TOO_LARGE,
                format!(
                    "the object is {} bytes; a claim check takes at most {}",
                    r.size,
                    outbox_core::claim::MAX_PAYLOAD_BYTES
                ),
            ));
        }
        // Never closed: a permit always comes.
        let _permit = self.reads.acquire().await.ok();
        let body = self.payloads.get_payload(r).await.map_err(|e| match e {
            PayloadError::Missing { key } => PublishFailure::new(
                FailureKind::Poison,
                PAYLOAD_MISSING,
                format!("object s3://{}/{key} does not exist", r.bucket),
            ),
            PayloadError::Failed {
                code,
                message,
                transient,
            } => PublishFailure::new(
                if transient {
                    FailureKind::Transient
                } else {
                    FailureKind::Rejected
                },
                code,
                message,
            ),
        })?;
        r.check(&body).map_err(|e| {
            PublishFailure::new(FailureKind::Poison, PAYLOAD_MISMATCH, e.to_string())
        })?;
        if !self.fits_whole(item, r) {
            return Ok(None);
        }
        let envelope = String::from_utf8(body).map_err(|_| {
            PublishFailure::new(
                FailureKind::Poison,
                PAYLOAD_MISMATCH,
                "the object is not UTF-8",
            )
        })?;
        Ok(Some(OutboxItem {
            envelope,
            payload_ref: None,
            ..item.clone()
        }))
    }
}

impl<S: EventSink, P: PayloadStore> EventSink for ClaimChecked<S, P> {
    fn max_entries(&self) -> usize {
        self.sink.max_entries()
    }

    fn max_bytes(&self) -> usize {
        self.sink.max_bytes()
    }

    fn entry_size(&self, item: &OutboxItem) -> usize {
        match &item.payload_ref {
            Some(r) if self.fits_whole(item, r) => self.whole_size(item, r),
            _ => self.sink.entry_size(item),
        }
    }

    async fn publish_batch(
        &self,
        items: &[&OutboxItem],
        max_sends: u32,
        sends: &SendCounter,
    ) -> Vec<EntryOutcome> {
        if items.iter().all(|item| item.payload_ref.is_none()) {
            return self.sink.publish_batch(items, max_sends, sends).await;
        }
        let resolved = join_all(items.iter().map(|item| self.resolve(item))).await;
        let mut outcomes: Vec<Option<EntryOutcome>> = vec![None; items.len()];
        let mut sent = Vec::with_capacity(items.len());
        let mut positions = Vec::with_capacity(items.len());
        for (i, (item, resolved)) in items.iter().zip(&resolved).enumerate() {
            match resolved {
                Ok(Some(whole)) => sent.push(whole),
                Ok(None) => sent.push(*item),
                Err(failure) => {
                    outcomes[i] = Some(Err(failure.clone()));
                    continue;
                }
            }
            positions.push(i);
        }
        if !sent.is_empty() {
            let answered = self.sink.publish_batch(&sent, max_sends, sends).await;
            for (i, outcome) in positions.into_iter().zip(answered) {
                outcomes[i] = Some(outcome);
            }
        }
        crate::sink::answered(
            outcomes,
            "ResultCountMismatch",
            "the sink answered fewer entries than it was sent",
        )
    }

    async fn verify(&self) -> Result<(), SinkError> {
        self.sink.verify().await
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::FakeSink;
    use outbox_core::claim::{ClaimCheck, MemoryPayloads};
    use outbox_core::size::EventLimits;
    use outbox_core::{EventEnvelope, KeySchema};

    fn claimed(bytes: usize, payloads: &MemoryPayloads) -> OutboxItem {
        let env = EventEnvelope::new(
            "OrderCreated",
            "Order",
            "o-1",
            1,
            serde_json::json!({"blob": "x".repeat(bytes)}),
        )
        .unwrap();
        let (item, offload) = OutboxItem::claim_checked(
            &KeySchema::default(),
            "ORDER#o-1",
            &env,
            &EventLimits::eventbridge("outbox.orders"),
            8,
            &ClaimCheck::new("payloads").with_threshold(1_024),
        )
        .unwrap();
        let offload = offload.expect("claim-checked");
        payloads.set("payloads", &offload.payload_ref.key, Some(offload.body));
        item
    }

    async fn publish(
        sink: &ClaimChecked<FakeSink, MemoryPayloads>,
        item: &OutboxItem,
    ) -> EntryOutcome {
        let mut outcomes = sink
            .publish_batch(&[item], 1, &SendCounter::default())
            .await;
        outcomes.remove(0)
    }

    #[tokio::test]
    async fn an_event_that_fits_is_published_whole_from_its_checked_object() {
        let payloads = MemoryPayloads::new();
        let item = claimed(5_000, &payloads);
        let whole = payloads
            .object("payloads", &item.payload_ref.as_ref().unwrap().key)
            .unwrap();
        let sink = ClaimChecked::new(FakeSink::new().keep_items(), payloads);
        // Batched at its whole size, not the stub's.
        assert!(sink.entry_size(&item) > 5_000);
        assert!(publish(&sink, &item).await.is_ok());
        let sent = sink.sink().kept();
        assert_eq!(sent.len(), 1);
        assert_eq!(sent[0].envelope.as_bytes(), whole.as_slice());
        assert_eq!(sent[0].payload_ref, None);
    }

    #[tokio::test]
    async fn an_event_too_large_for_the_sink_goes_as_its_claim_check() {
        let payloads = MemoryPayloads::new();
        let item = claimed(5_000, &payloads);
        let sink = ClaimChecked::new(FakeSink::new().with_max_bytes(2_048).keep_items(), payloads);
        assert!(sink.entry_size(&item) < 2_048);
        assert!(publish(&sink, &item).await.is_ok());
        let sent = sink.sink().kept();
        assert_eq!(sent[0].envelope, item.envelope, "the stub");
        assert_eq!(sent[0].payload_ref, item.payload_ref);
    }

    #[tokio::test]
    async fn a_missing_or_altered_object_is_poison_and_nothing_is_sent() {
        let payloads = MemoryPayloads::new();
        let item = claimed(5_000, &payloads);
        let key = item.payload_ref.as_ref().unwrap().key.clone();
        let sink = ClaimChecked::new(FakeSink::new().keep_items(), payloads);
        sink.payloads
            .set("payloads", &key, Some(b"{\"tampered\":true}".to_vec()));
        let failure = publish(&sink, &item).await.unwrap_err();
        assert_eq!(
            (failure.kind, failure.code.as_str()),
            (FailureKind::Poison, PAYLOAD_MISMATCH)
        );
        sink.payloads.set("payloads", &key, None);
        let failure = publish(&sink, &item).await.unwrap_err();
        assert_eq!(
            (failure.kind, failure.code.as_str()),
            (FailureKind::Poison, PAYLOAD_MISSING)
        );
        assert!(sink.sink().kept().is_empty());
    }

    #[tokio::test]
    async fn the_other_entries_of_the_batch_go_on_in_order() {
        let payloads = MemoryPayloads::new();
        let (a, b) = (claimed(3_000, &payloads), claimed(3_000, &payloads));
        payloads.set("payloads", &b.payload_ref.as_ref().unwrap().key, None);
        let plain = OutboxItem {
            payload_ref: None,
            envelope: "{}".into(),
            ..a.clone()
        };
        let sink = ClaimChecked::new(FakeSink::new().keep_items(), payloads);
        let outcomes = sink
            .publish_batch(&[&a, &b, &plain], 1, &SendCounter::default())
            .await;
        assert!(outcomes[0].is_ok());
        assert_eq!(outcomes[1].as_ref().unwrap_err().code, PAYLOAD_MISSING);
        assert!(outcomes[2].is_ok());
        assert_eq!(sink.sink().kept().len(), 2);
    }
}
