//! [`SweepStore`] on DynamoDB: the shard count, the pending index page by
//! page, shard statistics, older-event checks, dead-letter pages, and the
//! adoption of items without a home region.

#[allow(clippy::wildcard_imports)]
use super::*;

impl SweepStore for DynamoStore {
    fn configured_shards(&self) -> u16 {
        self.shards
    }

    async fn shard_count(&self, deadline: &Deadline) -> Result<u16, StoreError> {
        deadline
            .bound(record_shard_count(
                &self.client,
                &self.table,
                &self.keys,
                self.shards,
            ))
            .await
            .unwrap_or_else(|| Err(StoreError::new("record_shard_count", "DeadlineReached")))
    }

    async fn pending_page(
        &self,
        query: &PendingQuery,
        cursor: Option<Cursor>,
        deadline: &Deadline,
    ) -> Result<Page, StoreError> {
        let (condition, bounds) = match &query.created {
            Created::Before(id) => (
                "#pk = :pk AND #sk < :before",
                vec![(":before", id.to_string())],
            ),
            Created::Between(from, to) => (
                "#pk = :pk AND #sk BETWEEN :from AND :to",
                vec![(":from", from.to_string()), (":to", to.to_string())],
            ),
            Created::Redriven => {
                let (from, to) = keys::redriven_range();
                (
                    "#pk = :pk AND #sk BETWEEN :from AND :to",
                    vec![(":from", from), (":to", to)],
                )
            }
            Created::Any => ("#pk = :pk", vec![]),
        };
        let mut request = self
            .client
            .query()
            .table_name(&self.table)
            .index_name(self.keys.pending_index.as_str())
            .key_condition_expression(condition)
            .expression_attribute_names("#pk", self.keys.pending_partition_key.as_str())
            .expression_attribute_values(":pk", s(self.keys.pending_pk(query.shard)))
            .scan_index_forward(true)
            .limit(query.limit)
            .set_exclusive_start_key(cursor.map(start_key));
        if !bounds.is_empty() {
            request =
                request.expression_attribute_names("#sk", self.keys.pending_sort_key.as_str());
        }
        for (name, value) in bounds {
            request = request.expression_attribute_values(name, s(value));
        }
        let out = self
            .call("pending_page", deadline, request.send())
            .await
            .map_err(|e| e.into_store("pending_page"))?;
        let mut page = Page {
            scanned: out.scanned_count().max(0) as usize,
            next: out.last_evaluated_key().map(cursor_of),
            ..Page::default()
        };
        for item in out.items.unwrap_or_default() {
            let key = self.keys.item_key(&item);
            match OutboxItem::from_attributes(self.keys.from_table(item)) {
                Ok(decoded) => page.items.push(PendingItem::Item(decoded)),
                Err(e) => match key {
                    Some(key) => page.items.push(PendingItem::Undecodable {
                        event_id: self.keys.event_id_from_sk(&key.sk),
                        key,
                        reason: e.to_string(),
                    }),
                    None => tracing::error!("an index item has no primary key"),
                },
            }
        }
        Ok(page)
    }

    async fn shard_stats(
        &self,
        shard: u16,
        count_limit: i32,
        deadline: &Deadline,
    ) -> Result<ShardStats, StoreError> {
        // The index's first item is the oldest, unless it is a redriven one
        // (`!<ulid>` sorts first whatever its age): then the oldest is the
        // older of it and the first item after the redriven range.
        let (first, mut scanned) = self.first_pending(shard, None, deadline).await?;
        let mut queries = 3;
        let mut oldest = first.as_deref().and_then(keys::event_id_from_pending_sk);
        if first.as_deref().is_some_and(keys::is_redriven_sk) {
            let after = keys::redriven_range().1;
            let (next, more) = self.first_pending(shard, Some(&after), deadline).await?;
            scanned += more;
            queries += 1;
            let stranded = next.as_deref().and_then(keys::event_id_from_pending_sk);
            oldest = match (oldest, stranded) {
                (Some(a), Some(b)) => Some(a.min(b)),
                (a, b) => a.or(b),
            };
        }
        let (pending, pending_capped, pending_scanned) = self
            .count(
                self.keys.pending_index.as_str(),
                self.keys.pending_partition_key.as_str(),
                self.keys.pending_pk(shard),
                count_limit,
                deadline,
            )
            .await?;
        let (dead_letters, dead_letters_capped, dead_scanned) = self
            .count(
                self.keys.dead_letter_index.as_str(),
                self.keys.dead_letter_partition_key.as_str(),
                self.keys.dead_pk(shard),
                count_limit,
                deadline,
            )
            .await?;
        Ok(ShardStats {
            oldest,
            pending,
            pending_capped,
            dead_letters,
            dead_letters_capped,
            scanned: scanned + pending_scanned + dead_scanned,
            queries,
        })
    }

    async fn older_pending(&self, key: &ItemKey, deadline: &Deadline) -> Result<bool, StoreError> {
        let older = self.older_outbox(key, deadline, "older_pending").await?;
        Ok(older.iter().any(|(_, pending)| *pending))
    }

    async fn dead_letter_page(
        &self,
        shard: u16,
        limit: i32,
        cursor: Option<Cursor>,
        deadline: &Deadline,
    ) -> Result<DeadLetterPage, StoreError> {
        let out = self
            .call(
                "dead_letter_page",
                deadline,
                self.client
                    .query()
                    .table_name(&self.table)
                    .index_name(self.keys.dead_letter_index.as_str())
                    .key_condition_expression("#pk = :pk")
                    .expression_attribute_names("#pk", self.keys.dead_letter_partition_key.as_str())
                    .expression_attribute_values(":pk", s(self.keys.dead_pk(shard)))
                    .scan_index_forward(true)
                    .limit(limit)
                    .set_exclusive_start_key(cursor.map(start_key))
                    .send(),
            )
            .await
            .map_err(|e| e.into_store("dead_letter_page"))?;
        Ok(DeadLetterPage {
            next: out.last_evaluated_key().map(cursor_of),
            items: out
                .items()
                .iter()
                .map(|item| dead_letter_record(&self.keys, item, shard))
                .collect(),
        })
    }

    async fn adopt_unregioned(&self, shard: u16, deadline: &Deadline) -> Result<usize, StoreError> {
        if self.keys.home_region.is_none() {
            return Ok(0);
        }
        let moved = self.adopt(None, shard, false, false, deadline).await?;
        Ok(moved
            .iter()
            .filter(|a| a.outcome == AdoptOutcome::Adopted)
            .count())
    }
}
