//! [`OperatorStore`] on DynamoDB: the operator's dead-letter commands, a
//! parked aggregate made due, the recorded shard count and settings.

#[allow(clippy::wildcard_imports)]
use super::*;

impl OperatorStore for DynamoStore {
    async fn recorded_shards(&self, deadline: &Deadline) -> Result<u16, StoreError> {
        Ok(self
            .settings_item("recorded_shards", deadline)
            .await?
            .as_ref()
            .and_then(|i| i.get(attr::SHARDS_HIGH_WATER))
            .and_then(|v| v.as_n().ok())
            .and_then(|n| n.parse().ok())
            .unwrap_or(self.shards)
            .max(1))
    }

    async fn find_dead_letter(
        &self,
        shard: u16,
        event_id: Ulid,
        deadline: &Deadline,
    ) -> Result<Option<DeadLetterRecord>, StoreError> {
        let out = self
            .call(
                "find_dead_letter",
                deadline,
                self.client
                    .query()
                    .table_name(&self.table)
                    .index_name(self.keys.dead_letter_index.as_str())
                    .key_condition_expression("#pk = :pk AND #sk = :sk")
                    .expression_attribute_names("#pk", self.keys.dead_letter_partition_key.as_str())
                    .expression_attribute_names("#sk", self.keys.dead_letter_sort_key.as_str())
                    .expression_attribute_values(":pk", s(self.keys.dead_pk(shard)))
                    .expression_attribute_values(":sk", s(event_id.to_string()))
                    .send(),
            )
            .await
            .map_err(|e| e.into_store("find_dead_letter"))?;
        Ok(out
            .items()
            .first()
            .map(|item| dead_letter_record(&self.keys, item, shard)))
    }

    async fn redrive(
        &self,
        letter: &DeadLetterRecord,
        deadline: &Deadline,
    ) -> Result<Marked, StoreError> {
        let redriven_sk = Ulid::from_string(&letter.event_id)
            .map(keys::redriven_sk)
            .map_err(|_| StoreError::new("redrive", "NotAnEventId"))?;
        self.conditional_update(
            &letter.key,
            (
                "SET #ppk = :ppk, #psk = :psk, #attempts = :zero REMOVE #dpk, #dsk, #dla, #reason, #next, #token, #until",
                "attribute_exists(#dla) AND #dsk = :id AND (attribute_not_exists(#until) OR #until < :now)",
            ),
            &[
                ("#ppk", self.keys.pending_partition_key.as_str()),
                ("#psk", self.keys.pending_sort_key.as_str()),
                ("#attempts", attr::ATTEMPTS),
                ("#dpk", self.keys.dead_letter_partition_key.as_str()),
                ("#dsk", self.keys.dead_letter_sort_key.as_str()),
                ("#dla", attr::DEAD_LETTERED_AT),
                ("#reason", attr::DEAD_LETTER_REASON),
                ("#next", attr::NEXT_ATTEMPT_AT),
                ("#token", attr::CLAIM_TOKEN),
                ("#until", attr::CLAIMED_UNTIL),
            ],
            HashMap::from([
                (":ppk".to_owned(), s(self.keys.pending_pk(letter.shard))),
                (":psk".to_owned(), s(redriven_sk)),
                (":id".to_owned(), s(letter.event_id.clone())),
                (":zero".to_owned(), n(0)),
                (":now".to_owned(), n(now_utc_millis().unix_timestamp())),
            ]),
            OnFail::Gone,
            "redrive",
            deadline,
        )
        .await
    }

    async fn claim_dead_letter(
        &self,
        letter: &DeadLetterRecord,
        claim: &Claim,
        deadline: &Deadline,
    ) -> Result<Option<OutboxItem>, StoreError> {
        let result = self
            .call(
                "claim_dead_letter",
                deadline,
                self.client
                    .update_item()
                    .table_name(&self.table)
                    .set_key(Some(self.keys.key(&letter.key)))
                    .update_expression("SET #token = :token, #until = :until")
                    .condition_expression(
                        "attribute_exists(#dla) AND #dsk = :id AND (attribute_not_exists(#until) OR #until < :now)",
                    )
                    .expression_attribute_names("#token", attr::CLAIM_TOKEN)
                    .expression_attribute_names("#until", attr::CLAIMED_UNTIL)
                    .expression_attribute_names("#dla", attr::DEAD_LETTERED_AT)
                    .expression_attribute_names("#dsk", self.keys.dead_letter_sort_key.as_str())
                    .expression_attribute_values(":token", s(claim.token.clone()))
                    .expression_attribute_values(":until", n(claim.until))
                    .expression_attribute_values(":id", s(letter.event_id.clone()))
                    .expression_attribute_values(":now", n(now_utc_millis().unix_timestamp()))
                    .return_values(aws_sdk_dynamodb::types::ReturnValue::AllNew)
                    .send(),
            )
            .await;
        match result {
            Ok(out) => {
                let item = out
                    .attributes
                    .ok_or_else(|| StoreError::new("claim_dead_letter", "NoItemReturned"))?;
                serde_dynamo::from_item(self.keys.from_table(item))
                    .map(Some)
                    .map_err(|_| StoreError::new("claim_dead_letter", "ItemDoesNotDecode"))
            }
            Err(Failed::Service(_, code)) if code == "ConditionalCheckFailedException" => Ok(None),
            Err(other) => Err(other.into_store("claim_dead_letter")),
        }
    }

    async fn discard(
        &self,
        letter: &DeadLetterRecord,
        deadline: &Deadline,
    ) -> Result<Marked, StoreError> {
        let result = self
            .call(
                "discard",
                deadline,
                self.client
                    .delete_item()
                    .table_name(&self.table)
                    .set_key(Some(self.keys.key(&letter.key)))
                    .condition_expression(
                        "attribute_exists(#dla) AND (attribute_not_exists(#until) OR #until < :now)",
                    )
                    .expression_attribute_names("#dla", attr::DEAD_LETTERED_AT)
                    .expression_attribute_names("#until", attr::CLAIMED_UNTIL)
                    .expression_attribute_values(":now", n(now_utc_millis().unix_timestamp()))
                    .send(),
            )
            .await;
        conditional(result, "discard")
    }

    async fn make_due(&self, key: &ItemKey, deadline: &Deadline) -> Result<Marked, StoreError> {
        self.hand_to_schedule(
            key,
            &[(attr::NEXT_ATTEMPT_AT, n(now_utc_millis().unix_timestamp()))],
            Handover {
                claim: None,
                held: false,
                unhold: false,
            },
            "make_due",
            deadline,
        )
        .await
    }
}
