//! The three roles of the store port, in memory.

#[allow(clippy::wildcard_imports)]
use super::*;

impl PublishStore for MemoryStore {
    async fn delete_published(&self, keys: &[ItemKey], _: &Deadline) -> Vec<ItemKey> {
        if self.fail_cleanup.load(Ordering::SeqCst) {
            return keys.to_vec();
        }
        let mut items = lock(&self.items);
        for key in keys {
            items.remove(key);
        }
        self.record(|log| log.deleted.extend_from_slice(keys));
        Vec::new()
    }

    async fn dead_letter(
        &self,
        letter: DeadLetter<'_>,
        _: &Deadline,
    ) -> Result<Marked, StoreError> {
        if self.fail_dead_letters.load(Ordering::SeqCst) {
            return Err(StoreError::new("dead_letter", "ThrottlingException"));
        }
        self.record(|log| log.dead_lettered.push(letter.key.clone()));
        let mut items = lock(&self.items);
        let Some(item) = items.get_mut(letter.key) else {
            return Ok(Marked::Gone);
        };
        if item.dead_lettered_at.is_some() || !unclaimed_but(item, letter.claim) {
            return Ok(judge_refusal(Some(item)));
        }
        let shard = keys::shard_of(letter.aggregate_id.unwrap_or(&letter.key.pk), self.shards);
        item.dead_lettered_at = Some(
            now_utc_millis()
                .format(&time::format_description::well_known::Rfc3339)
                .unwrap_or_default(),
        );
        item.dead_letter_reason = Some(sanitize(letter.reason));
        item.dead_pk = Some(keys::dead_pk(shard));
        item.dead_sk = Some(item.event_id.to_string());
        if let Some(attempts) = letter.attempts {
            item.attempts = attempts;
        }
        item.pending_pk = None;
        item.pending_sk = None;
        item.next_attempt_at = None;
        item.claim_token = None;
        item.claimed_until = None;
        Ok(Marked::Updated)
    }

    async fn record_failure(
        &self,
        key: &ItemKey,
        attempts: u32,
        next_attempt_at: i64,
        error: &str,
        claim: Option<&str>,
        _: &Deadline,
    ) -> Result<Marked, StoreError> {
        if self.fail_cleanup.load(Ordering::SeqCst) {
            return Err(StoreError::new("record_failure", "InternalServerError"));
        }
        self.record(|log| log.failures.push((key.clone(), attempts)));
        Ok(self.hand_to_schedule(key, claim, |item| {
            item.attempts = attempts;
            item.next_attempt_at = Some(next_attempt_at);
            item.last_error = Some(sanitize(error));
            item.held_behind = None;
            item.held_since = None;
        }))
    }

    async fn make_sweepable(
        &self,
        key: &ItemKey,
        seen: Option<&str>,
        pending_pk: &str,
        pending_sk: &str,
        _: &Deadline,
    ) -> Result<Marked, StoreError> {
        if self.fail_cleanup.load(Ordering::SeqCst) {
            return Err(StoreError::new("make_sweepable", "InternalServerError"));
        }
        match lock(&self.items).get_mut(key) {
            Some(item) if item.dead_lettered_at.is_none() && item.pending_pk.as_deref() == seen => {
                item.pending_pk = Some(pending_pk.to_owned());
                item.pending_sk = Some(pending_sk.to_owned());
                Ok(Marked::Updated)
            }
            Some(item) if item.dead_lettered_at.is_none() && item.pending_pk.is_some() => {
                Ok(Marked::Claimed)
            }
            _ => Ok(Marked::Gone),
        }
    }

    async fn publishable(
        &self,
        keys: &[ItemKey],
        _: &Deadline,
    ) -> Result<std::collections::HashSet<ItemKey>, StoreError> {
        let items = lock(&self.items);
        Ok(keys
            .iter()
            .filter(|key| {
                items
                    .get(*key)
                    .is_some_and(|item| item.dead_lettered_at.is_none())
            })
            .cloned()
            .collect())
    }

    async fn claim_pending(
        &self,
        key: &ItemKey,
        claim: &Claim,
        _: &Deadline,
    ) -> Result<ClaimOutcome, StoreError> {
        let mut items = lock(&self.items);
        match items.get_mut(key) {
            Some(item) if item.pending_pk.is_none() => Ok(ClaimOutcome::Gone),
            Some(item) if unclaimed(item) || item.claim_token.as_deref() == Some(&claim.token) => {
                item.claim_token = Some(claim.token.clone());
                item.claimed_until = Some(claim.until);
                Ok(ClaimOutcome::Claimed)
            }
            Some(_) => Ok(ClaimOutcome::ClaimedElsewhere),
            None => Ok(ClaimOutcome::Gone),
        }
    }

    async fn collection_below(
        &self,
        key: &ItemKey,
        limit: i32,
        _: &Deadline,
    ) -> Result<CollectionRead, StoreError> {
        let below: Vec<(String, bool)> = lock(&self.items)
            .values()
            .rev()
            .filter(|i| i.pk == key.pk && keys::is_outbox_sk(&i.sk) && i.sk <= key.sk)
            .map(|i| (i.sk.clone(), i.dead_lettered_at.is_some()))
            .collect();
        let limit = limit.max(1) as usize;
        Ok(CollectionRead {
            top: key.sk.clone(),
            // As DynamoDB: a read that stops at its limit says there may be
            // more.
            complete: below.len() < limit,
            not_ours: below
                .iter()
                .take(limit)
                .filter(|(_, dead)| *dead)
                .map(|(sk, _)| sk.clone())
                .collect(),
            keys: below.into_iter().take(limit).map(|(sk, _)| sk).collect(),
        })
    }

    async fn hold(
        &self,
        key: &ItemKey,
        behind: &str,
        claim: Option<&str>,
        _: &Deadline,
    ) -> Result<Marked, StoreError> {
        Ok(self.hand_to_schedule(key, claim, |item| {
            item.held_behind = Some(behind.to_owned());
            item.held_since
                .get_or_insert(now_utc_millis().unix_timestamp());
        }))
    }

    async fn newer_pending(
        &self,
        key: &ItemKey,
        _: &Deadline,
    ) -> Result<Vec<PendingItem>, StoreError> {
        Ok(lock(&self.items)
            .values()
            .filter(|i| {
                i.pk == key.pk
                    && keys::is_outbox_sk(&i.sk)
                    && i.sk > key.sk
                    && i.pending_pk.is_some()
            })
            .cloned()
            .map(PendingItem::Item)
            .collect())
    }

    async fn release_claim(
        &self,
        key: &ItemKey,
        claim: &Claim,
        error: Option<&str>,
        _: &Deadline,
    ) -> Result<Marked, StoreError> {
        let mut items = lock(&self.items);
        match items.get_mut(key) {
            Some(item) if item.claim_token.as_deref() == Some(claim.token.as_str()) => {
                item.claim_token = None;
                item.claimed_until = None;
                if let Some(error) = error {
                    item.dead_letter_reason = Some(sanitize(error));
                }
                Ok(Marked::Updated)
            }
            _ => Ok(Marked::Gone),
        }
    }

    async fn record_settings(
        &self,
        settings: &RecordedSettings,
        _: &Deadline,
    ) -> Result<(), StoreError> {
        let mut records = lock(&self.settings);
        let mut settings = settings.clone();
        if let Some(old) = records.iter().find(|r| r.key() == settings.key()) {
            // Kept, unless another CloudFormation stack held the name (as
            // the DynamoDB store does).
            let other_stack = matches!(
                (old.variable("STACK_ID"), settings.variable("STACK_ID")),
                (Some(a), Some(b)) if a != b
            );
            if !other_stack {
                settings.since = old.since.clone().or(settings.since);
            }
        }
        records.retain(|r| r.key() != settings.key());
        records.push(settings);
        Ok(())
    }

    async fn recorded_settings(&self, _: &Deadline) -> Result<Vec<RecordedSettings>, StoreError> {
        Ok(lock(&self.settings).clone())
    }
}

impl SweepStore for MemoryStore {
    fn configured_shards(&self) -> u16 {
        self.shards
    }

    async fn shard_count(&self, _: &Deadline) -> Result<u16, StoreError> {
        let before = self.recorded.fetch_max(self.shards, Ordering::SeqCst);
        Ok(before.max(self.shards))
    }

    async fn pending_page(
        &self,
        query: &PendingQuery,
        cursor: Option<Cursor>,
        _: &Deadline,
    ) -> Result<Page, StoreError> {
        let pk = keys::pending_pk(query.shard);
        let created = query.created.clone();
        let rows = self.partition(
            |item| {
                let sk = item.pending_sk.clone()?;
                let keep = item.pending_pk.as_deref() == Some(pk.as_str())
                    && match &created {
                        Created::Before(id) => sk < id.to_string(),
                        Created::Between(from, to) => {
                            sk >= from.to_string() && sk <= to.to_string()
                        }
                        Created::Redriven => keys::is_redriven_sk(&sk),
                        Created::Any => true,
                    };
                keep.then_some(sk)
            },
            &cursor,
        );
        let limit = query.limit.max(1) as usize;
        let next = (rows.len() > limit).then(|| cursor_after(&rows[limit - 1].0));
        let items: Vec<PendingItem> = rows
            .into_iter()
            .take(limit)
            .map(|(_, item)| PendingItem::Item(item))
            .collect();
        Ok(Page {
            scanned: items.len(),
            items,
            next,
        })
    }

    async fn shard_stats(
        &self,
        shard: u16,
        count_limit: i32,
        _: &Deadline,
    ) -> Result<ShardStats, StoreError> {
        let limit = count_limit.max(0) as usize;
        let pending_pk = keys::pending_pk(shard);
        let pending = self.partition(
            |i| {
                (i.pending_pk.as_deref() == Some(pending_pk.as_str()))
                    .then(|| i.pending_sk.clone())
                    .flatten()
            },
            &None,
        );
        let dead_pk = keys::dead_pk(shard);
        let dead = self.partition(
            |i| {
                (i.dead_pk.as_deref() == Some(dead_pk.as_str()))
                    .then(|| i.dead_sk.clone())
                    .flatten()
            },
            &None,
        );
        Ok(ShardStats {
            oldest: pending
                .first()
                .and_then(|(sk, _)| Ulid::from_string(sk).ok()),
            pending: pending.len().min(limit),
            pending_capped: pending.len() >= limit,
            dead_letters: dead.len().min(limit),
            dead_letters_capped: dead.len() >= limit,
            scanned: pending.len().min(limit) + dead.len().min(limit) + 1,
            queries: 3,
        })
    }

    async fn older_pending(&self, key: &ItemKey, _: &Deadline) -> Result<bool, StoreError> {
        Ok(lock(&self.items).values().any(|i| {
            i.pk == key.pk && keys::is_outbox_sk(&i.sk) && i.sk < key.sk && i.pending_pk.is_some()
        }))
    }

    async fn dead_letter_page(
        &self,
        shard: u16,
        limit: i32,
        cursor: Option<Cursor>,
        _: &Deadline,
    ) -> Result<DeadLetterPage, StoreError> {
        let pk = keys::dead_pk(shard);
        let rows = self.partition(
            |i| {
                (i.dead_pk.as_deref() == Some(pk.as_str()))
                    .then(|| i.dead_sk.clone())
                    .flatten()
            },
            &cursor,
        );
        let limit = limit.max(1) as usize;
        let next = (rows.len() > limit).then(|| cursor_after(&rows[limit - 1].0));
        Ok(DeadLetterPage {
            items: rows
                .iter()
                .take(limit)
                .map(|(_, item)| record_of(item, shard))
                .collect(),
            next,
        })
    }
}

impl OperatorStore for MemoryStore {
    async fn recorded_shards(&self, _: &Deadline) -> Result<u16, StoreError> {
        let recorded = self.recorded.load(Ordering::SeqCst);
        Ok(if recorded == 0 { self.shards } else { recorded }.max(1))
    }

    async fn find_dead_letter(
        &self,
        shard: u16,
        event_id: Ulid,
        _: &Deadline,
    ) -> Result<Option<DeadLetterRecord>, StoreError> {
        let pk = keys::dead_pk(shard);
        let id = event_id.to_string();
        Ok(lock(&self.items)
            .values()
            .find(|i| {
                i.dead_pk.as_deref() == Some(pk.as_str()) && i.dead_sk.as_deref() == Some(&id)
            })
            .map(|i| record_of(i, shard)))
    }

    async fn redrive(&self, letter: &DeadLetterRecord, _: &Deadline) -> Result<Marked, StoreError> {
        let mut items = lock(&self.items);
        match items.get_mut(&letter.key) {
            Some(item) if is_free_dead_letter(item, letter) => {
                item.claim_token = None;
                item.claimed_until = None;
                item.pending_pk = Some(keys::pending_pk(letter.shard));
                item.pending_sk = Some(keys::redriven_sk(item.event_id));
                item.attempts = 0;
                item.dead_pk = None;
                item.dead_sk = None;
                item.dead_lettered_at = None;
                item.dead_letter_reason = None;
                item.next_attempt_at = None;
                Ok(Marked::Updated)
            }
            _ => Ok(Marked::Gone),
        }
    }

    async fn claim_dead_letter(
        &self,
        letter: &DeadLetterRecord,
        claim: &Claim,
        _: &Deadline,
    ) -> Result<Option<OutboxItem>, StoreError> {
        let mut items = lock(&self.items);
        match items.get_mut(&letter.key) {
            Some(item) if is_free_dead_letter(item, letter) => {
                item.claim_token = Some(claim.token.clone());
                item.claimed_until = Some(claim.until);
                Ok(Some(item.clone()))
            }
            _ => Ok(None),
        }
    }

    async fn discard(&self, letter: &DeadLetterRecord, _: &Deadline) -> Result<Marked, StoreError> {
        let mut items = lock(&self.items);
        if items
            .get(&letter.key)
            .is_some_and(|i| i.dead_lettered_at.is_some() && unclaimed(i))
        {
            items.remove(&letter.key);
            Ok(Marked::Updated)
        } else {
            Ok(Marked::Gone)
        }
    }

    async fn make_due(&self, key: &ItemKey, _: &Deadline) -> Result<Marked, StoreError> {
        Ok(self.hand_to_schedule(key, None, |item| {
            item.next_attempt_at = Some(now_utc_millis().unix_timestamp());
        }))
    }
}
