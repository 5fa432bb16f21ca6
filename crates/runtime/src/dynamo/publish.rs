//! [`PublishStore`] on DynamoDB: deletes after publishing, dead letters,
//! failed attempts, claims, the strict guard's reads and holds, the
//! redelivery check, the recorded settings.

#[allow(clippy::wildcard_imports)]
use super::*;

impl PublishStore for DynamoStore {
    async fn delete_published(&self, keys: &[ItemKey], deadline: &Deadline) -> Vec<ItemKey> {
        let mut failed = Vec::new();
        for chunk in keys.chunks(MAX_BATCH_WRITE) {
            // A lone key: `DeleteItem`, the single-item call (a batch of one
            // costs the same write unit and answers slower). At a trickle,
            // one record an invocation, every delete is one of these.
            if let [key] = chunk {
                if !self.delete_one(key, deadline).await {
                    failed.push(key.clone());
                }
                continue;
            }
            let mut requests: Vec<WriteRequest> = chunk
                .iter()
                .filter_map(|key| {
                    DeleteRequest::builder()
                        .set_key(Some(self.keys.key(key)))
                        .build()
                        .ok()
                        .map(|d| WriteRequest::builder().delete_request(d).build())
                })
                .collect();
            let mut attempt = 1;
            loop {
                let result = deadline
                    .bound(
                        self.client
                            .batch_write_item()
                            .request_items(&self.table, requests.clone())
                            .send(),
                    )
                    .await;
                // What is left to do: the unprocessed items, or all of them.
                requests = match result {
                    Some(Ok(out)) => out
                        .unprocessed_items()
                        .and_then(|u| u.get(&self.table))
                        .cloned()
                        .unwrap_or_default(),
                    // The SDK retried the whole call already: give up on it.
                    Some(Err(e)) => {
                        tracing::warn!(code = %error_code(&e), "BatchWriteItem failed");
                        break;
                    }
                    None => {
                        tracing::warn!("BatchWriteItem cut by the deadline");
                        break;
                    }
                };
                if requests.is_empty() || !self.retry.wait(attempt, deadline).await {
                    break;
                }
                attempt += 1;
            }
            failed.extend(
                requests
                    .iter()
                    .filter_map(|r| r.delete_request())
                    .filter_map(|d| self.keys.item_key(d.key())),
            );
        }
        failed
    }

    async fn dead_letter(
        &self,
        letter: DeadLetter<'_>,
        deadline: &Deadline,
    ) -> Result<Marked, StoreError> {
        let key = letter.key;
        let shard = keys::shard_of(letter.aggregate_id.unwrap_or(&key.pk), self.shards);
        let sort = self
            .keys
            .event_id_from_sk(&key.sk)
            .map(|id| id.to_string())
            .unwrap_or_else(|| key.sk.clone());
        let now = now_utc_millis()
            .format(&time::format_description::well_known::Rfc3339)
            .unwrap_or_default();
        let mut update = format!(
            "SET {} = :now, {} = :reason, #dpk = :dpk, #dsk = :dsk",
            attr::DEAD_LETTERED_AT,
            attr::DEAD_LETTER_REASON,
        );
        let mut values = HashMap::from([
            (":now".to_owned(), s(now)),
            (":reason".to_owned(), s(sanitize(letter.reason))),
            (":dpk".to_owned(), s(self.keys.dead_pk(shard))),
            (":dsk".to_owned(), s(sort)),
        ]);
        if let Some(attempts) = letter.attempts {
            update.push_str(&format!(", {} = :attempts", attr::ATTEMPTS));
            values.insert(":attempts".to_owned(), n(attempts));
        }
        update.push_str(&format!(
            " REMOVE #ppk, #psk, {}, {}, {}",
            attr::NEXT_ATTEMPT_AT,
            attr::CLAIM_TOKEN,
            attr::CLAIMED_UNTIL
        ));
        let condition = format!(
            "attribute_exists(#pk) AND attribute_not_exists({}) AND {}",
            attr::DEAD_LETTERED_AT,
            unclaimed_but(letter.claim, &mut values)
        );
        let names = [
            ("#pk", self.keys.partition_key.as_str()),
            ("#ppk", self.keys.pending_partition_key.as_str()),
            ("#psk", self.keys.pending_sort_key.as_str()),
            ("#dpk", self.keys.dead_letter_partition_key.as_str()),
            ("#dsk", self.keys.dead_letter_sort_key.as_str()),
        ];
        self.conditional_update(
            key,
            (&update, &condition),
            &names,
            values,
            OnFail::Judge,
            "dead_letter",
            deadline,
        )
        .await
    }

    async fn record_failure(
        &self,
        key: &ItemKey,
        attempts: u32,
        next_attempt_at: i64,
        error: &str,
        claim: Option<&str>,
        deadline: &Deadline,
    ) -> Result<Marked, StoreError> {
        self.hand_to_schedule(
            key,
            &[
                (attr::ATTEMPTS, n(attempts)),
                (attr::LAST_ERROR, s(sanitize(error))),
                (attr::NEXT_ATTEMPT_AT, n(next_attempt_at)),
            ],
            Handover {
                claim,
                held: false,
                unhold: true,
            },
            "record_failure",
            deadline,
        )
        .await
    }

    async fn make_sweepable(
        &self,
        key: &ItemKey,
        seen: Option<&str>,
        pending_pk: &str,
        pending_sk: &str,
        deadline: &Deadline,
    ) -> Result<Marked, StoreError> {
        // Conditional on the keys being still as the record showed them (a
        // redelivered image may be stale: a hold or an adoption may have
        // written keys since) and, with a home region, on the item being
        // still this region's (`adopt-region` may have moved it).
        let mut condition = format!(
            "attribute_exists(#pk) AND attribute_not_exists(#dla) AND {}",
            if seen.is_some() {
                "#ppk = :seen"
            } else {
                "attribute_not_exists(#ppk)"
            }
        );
        let mut names = vec![
            ("#pk", self.keys.partition_key.as_str()),
            ("#ppk", self.keys.pending_partition_key.as_str()),
            ("#psk", self.keys.pending_sort_key.as_str()),
            ("#dla", attr::DEAD_LETTERED_AT),
            ("#repaired", attr::KEYS_REPAIRED_AT),
        ];
        let mut values = HashMap::from([
            (":ppk".to_owned(), s(pending_pk)),
            (":psk".to_owned(), s(pending_sk)),
            (":now".to_owned(), n(now_utc_millis().unix_timestamp())),
        ]);
        if let Some(seen) = seen {
            values.insert(":seen".to_owned(), s(seen));
        }
        if let Some(home) = &self.keys.home_region {
            condition.push_str(" AND (attribute_not_exists(#home) OR #home = :home)");
            names.push(("#home", attr::HOME_REGION));
            values.insert(":home".to_owned(), s(home.clone()));
        }
        self.conditional_update(
            key,
            ("SET #ppk = :ppk, #psk = :psk, #repaired = :now", &condition),
            &names,
            values,
            OnFail::Repair,
            "make_sweepable",
            deadline,
        )
        .await
    }

    async fn publishable(
        &self,
        keys: &[ItemKey],
        deadline: &Deadline,
    ) -> Result<HashSet<ItemKey>, StoreError> {
        let mut publishable = HashSet::with_capacity(keys.len());
        for chunk in keys.chunks(MAX_BATCH_GET) {
            let mut wanted: Vec<HashMap<String, AttributeValue>> =
                chunk.iter().map(|key| self.keys.key(key)).collect();
            let mut attempt = 1;
            while !wanted.is_empty() {
                let request = KeysAndAttributes::builder()
                    .set_keys(Some(wanted.clone()))
                    .consistent_read(true)
                    .projection_expression("#pk, #sk, #home, #dead")
                    .expression_attribute_names("#pk", self.keys.partition_key.as_str())
                    .expression_attribute_names("#sk", self.keys.sort_key.as_str())
                    .expression_attribute_names("#home", attr::HOME_REGION)
                    .expression_attribute_names("#dead", attr::DEAD_LETTERED_AT)
                    .build()
                    .map_err(|e| StoreError::new("publishable", e.to_string()))?;
                let out = self
                    .call(
                        "publishable",
                        deadline,
                        self.client
                            .batch_get_item()
                            .request_items(&self.table, request)
                            .send(),
                    )
                    .await
                    .map_err(|e| e.into_store("publishable"))?;
                for item in out
                    .responses()
                    .and_then(|r| r.get(&self.table))
                    .into_iter()
                    .flatten()
                {
                    if let Some(key) = self.keys.item_key(item) {
                        if self.ours_to_publish(item) {
                            publishable.insert(key);
                        }
                    }
                }
                wanted = out
                    .unprocessed_keys()
                    .and_then(|u| u.get(&self.table))
                    .map(|k| k.keys().to_vec())
                    .unwrap_or_default();
                if !wanted.is_empty() && !self.retry.wait(attempt, deadline).await {
                    // Not read in time: publishable (a duplicate, never a loss).
                    publishable.extend(wanted.iter().filter_map(|k| self.keys.item_key(k)));
                    break;
                }
                attempt += 1;
            }
        }
        Ok(publishable)
    }

    async fn claim_pending(
        &self,
        key: &ItemKey,
        claim: &Claim,
        deadline: &Deadline,
    ) -> Result<ClaimOutcome, StoreError> {
        let now = now_utc_millis().unix_timestamp();
        // Its own claim counts as free: an SDK retry of a claim that was
        // applied (its answer lost) must not find the run's own claim and
        // leave the event to nobody.
        let mut condition = format!(
            "attribute_exists(#ppk) AND (attribute_not_exists({until}) OR {until} < :now OR {token} = :token)",
            until = attr::CLAIMED_UNTIL,
            token = attr::CLAIM_TOKEN
        );
        let mut values = HashMap::from([
            (":token".to_owned(), s(claim.token.clone())),
            (":until".to_owned(), n(claim.until)),
            (":now".to_owned(), n(now)),
        ]);
        // Global tables: only the event's home region publishes it.
        if let Some(home) = &self.keys.home_region {
            condition.push_str(&format!(
                " AND (attribute_not_exists({home_attr}) OR {home_attr} = :home)",
                home_attr = attr::HOME_REGION
            ));
            values.insert(":home".to_owned(), s(home.clone()));
        }
        let result = self
            .call(
                "claim_pending",
                deadline,
                self.client
                    .update_item()
                    .table_name(&self.table)
                    .set_key(Some(self.keys.key(key)))
                    .update_expression(format!(
                        "SET {} = :token, {} = :until",
                        attr::CLAIM_TOKEN,
                        attr::CLAIMED_UNTIL
                    ))
                    .condition_expression(condition)
                    .expression_attribute_names("#ppk", self.keys.pending_partition_key.as_str())
                    .set_expression_attribute_values(Some(values))
                    // The item that failed the condition tells a live claim
                    // of another run (the window is not settled) from an
                    // item no longer pending (nothing left to do).
                    .return_values_on_condition_check_failure(
                        ReturnValuesOnConditionCheckFailure::AllOld,
                    )
                    .send(),
            )
            .await;
        match result {
            Ok(_) => Ok(ClaimOutcome::Claimed),
            Err(Failed::Service(UpdateItemError::ConditionalCheckFailedException(failed), _)) => {
                Ok(failed
                    .item()
                    .map_or(ClaimOutcome::Gone, |old| self.claim_refused(old, now)))
            }
            Err(other) => Err(other.into_store("claim_pending")),
        }
    }

    async fn collection_below(
        &self,
        key: &ItemKey,
        limit: i32,
        deadline: &Deadline,
    ) -> Result<CollectionRead, StoreError> {
        let out = self
            .call(
                "collection_below",
                deadline,
                self.collection_range(&key.pk, &self.keys.outbox_prefix, &key.sk)
                    .projection_expression("#sk, #home, #dead")
                    .expression_attribute_names("#home", attr::HOME_REGION)
                    .expression_attribute_names("#dead", attr::DEAD_LETTERED_AT)
                    .scan_index_forward(false)
                    .limit(limit.max(1))
                    .send(),
            )
            .await
            .map_err(|e| e.into_store("collection_below"))?;
        let mut read = CollectionRead {
            top: key.sk.clone(),
            complete: out.last_evaluated_key().is_none(),
            ..CollectionRead::default()
        };
        for item in out.items() {
            let Some(sk) = item
                .get(self.keys.sort_key.as_str())
                .and_then(|v| v.as_s().ok())
            else {
                continue;
            };
            if !self.ours_to_publish(item) {
                read.not_ours.push(sk.clone());
            }
            read.keys.push(sk.clone());
        }
        Ok(read)
    }

    async fn hold(
        &self,
        key: &ItemKey,
        behind: &str,
        claim: Option<&str>,
        deadline: &Deadline,
    ) -> Result<Marked, StoreError> {
        self.hand_to_schedule(
            key,
            &[(attr::HELD_BEHIND, s(behind))],
            Handover {
                claim,
                held: true,
                unhold: false,
            },
            "hold",
            deadline,
        )
        .await
    }

    async fn newer_pending(
        &self,
        key: &ItemKey,
        deadline: &Deadline,
    ) -> Result<Vec<PendingItem>, StoreError> {
        let items = self
            .query_all(
                "newer_pending",
                deadline,
                self.collection_range(&key.pk, &key.sk, &self.keys.outbox_sk_end())
                    .filter_expression("attribute_exists(#ppk)")
                    .expression_attribute_names("#ppk", self.keys.pending_partition_key.as_str()),
            )
            .await?;
        let mut newer = Vec::new();
        for item in items {
            let Some(item_key) = self.keys.item_key(&item) else {
                continue;
            };
            if item_key.sk == key.sk {
                continue;
            }
            // Global tables: another region's events are its own to
            // release.
            let region = item.get(attr::HOME_REGION).and_then(|v| v.as_s().ok());
            if !self.keys.publishes_region(region.map(String::as_str)) {
                continue;
            }
            newer.push(
                match OutboxItem::from_attributes(self.keys.from_table(item)) {
                    Ok(decoded) => PendingItem::Item(decoded),
                    Err(e) => PendingItem::Undecodable {
                        event_id: self.keys.event_id_from_sk(&item_key.sk),
                        key: item_key,
                        reason: e.to_string(),
                    },
                },
            );
        }
        Ok(newer)
    }

    async fn release_claim(
        &self,
        key: &ItemKey,
        claim: &Claim,
        error: Option<&str>,
        deadline: &Deadline,
    ) -> Result<Marked, StoreError> {
        let mut names = vec![
            ("#token", attr::CLAIM_TOKEN),
            ("#until", attr::CLAIMED_UNTIL),
        ];
        let mut values = HashMap::from([(":token".to_owned(), s(claim.token.clone()))]);
        let update = match error {
            Some(error) => {
                names.push(("#reason", attr::DEAD_LETTER_REASON));
                values.insert(":reason".to_owned(), s(sanitize(error)));
                "SET #reason = :reason REMOVE #token, #until"
            }
            None => "REMOVE #token, #until",
        };
        self.conditional_update(
            key,
            (update, "#token = :token"),
            &names,
            values,
            OnFail::Gone,
            "release_claim",
            deadline,
        )
        .await
    }

    async fn record_settings(
        &self,
        settings: &RecordedSettings,
        deadline: &Deadline,
    ) -> Result<(), StoreError> {
        // An UpdateItem, the write the functions' roles already grant for
        // their bookkeeping: the record's whole content is replaced.
        let variables = AttributeValue::M(
            settings
                .variables
                .iter()
                .map(|(k, v)| (k.clone(), s(v.clone())))
                .collect(),
        );
        // `recordedSince` is kept once set, unless another CloudFormation
        // stack (another STACK_ID) held the name: a stack deleted and made
        // again under its name starts anew. A record without a time (one
        // written by hand) sets none.
        let since = settings.since.clone().or_else(|| {
            settings.recorded_at().and_then(|at| {
                at.format(&time::format_description::well_known::Rfc3339)
                    .ok()
            })
        });
        let stack_id = settings.variable("STACK_ID").map(str::to_owned);
        let write = |keep_since: bool| {
            let mut update = "SET #variables = :variables, #by = :by".to_owned();
            let mut request = self
                .client
                .update_item()
                .table_name(&self.table)
                .set_key(Some(self.keys.key(&settings.key())))
                .expression_attribute_names("#variables", attr::VARIABLES)
                .expression_attribute_names("#by", attr::RECORDED_BY)
                .expression_attribute_values(":variables", variables.clone())
                .expression_attribute_values(":by", s(settings.by.clone()));
            if let Some(since) = &since {
                update.push_str(if keep_since {
                    ", #since = if_not_exists(#since, :since)"
                } else {
                    ", #since = :since"
                });
                request = request
                    .expression_attribute_names("#since", attr::RECORDED_SINCE)
                    .expression_attribute_values(":since", s(since.clone()));
            }
            if let (true, Some(id)) = (keep_since, &stack_id) {
                request = request
                    .condition_expression(
                        "attribute_not_exists(#variables.#sid) OR #variables.#sid = :sid",
                    )
                    .expression_attribute_names("#sid", "STACK_ID")
                    .expression_attribute_values(":sid", s(id.clone()));
            }
            request.update_expression(update).send()
        };
        match self.call("record_settings", deadline, write(true)).await {
            Ok(_) => Ok(()),
            Err(Failed::Service(UpdateItemError::ConditionalCheckFailedException(_), _)) => self
                .call("record_settings", deadline, write(false))
                .await
                .map(|_| ())
                .map_err(|e| e.into_store("record_settings")),
            Err(e) => Err(e.into_store("record_settings")),
        }
    }

    async fn recorded_settings(
        &self,
        deadline: &Deadline,
    ) -> Result<Vec<RecordedSettings>, StoreError> {
        let items = self
            .query_all(
                "recorded_settings",
                deadline,
                self.client
                    .query()
                    .table_name(&self.table)
                    .key_condition_expression("#pk = :pk AND begins_with(#sk, :prefix)")
                    .expression_attribute_names("#pk", self.keys.partition_key.as_str())
                    .expression_attribute_names("#sk", self.keys.sort_key.as_str())
                    .expression_attribute_values(":pk", s(keys::SETTINGS_PK))
                    .expression_attribute_values(":prefix", s(keys::STACK_SETTINGS_PREFIX))
                    .consistent_read(true),
            )
            .await?;
        let sort_key = self.keys.sort_key.as_str();
        Ok(items
            .iter()
            .filter_map(|item| RecordedSettings::from_item(item, sort_key))
            .collect())
    }
}
