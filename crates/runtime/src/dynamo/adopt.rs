//! Adoption: a lost region's items handed over to this store's home region
//! (`outboxctl adopt-region`, docs/multi-region.md).

use super::*;

impl DynamoStore {
    /// Hands the items of `shard` under `from`'s keys (another region's,
    /// or with `None` the keys without a region) over to this store's home
    /// region: each pending item's pending-index partition key becomes
    /// this region's, and with `due_now` its sort key the redriven `!<ulid>`
    /// (the next scheduled sweep publishes it whatever its age); each dead
    /// letter's dead-letter-index partition key becomes this region's (it
    /// stays dead-lettered). `homeRegion` becomes this region. Each write is
    /// conditional on the item still holding `from`'s key, so that an item
    /// published and deleted meanwhile is never resurrected and a second
    /// run finds nothing to do. `dry_run` reads and writes nothing.
    ///
    /// An error when this store has no home region.
    pub async fn adopt(
        &self,
        from: Option<&str>,
        shard: u16,
        due_now: bool,
        dry_run: bool,
        deadline: &Deadline,
    ) -> Result<Vec<Adoption>, StoreError> {
        let Some(home) = self.keys.home_region.clone() else {
            return Err(StoreError::new("adopt", "NoHomeRegion"));
        };
        let source = self.keys.clone().with_home_region(from.map(str::to_owned));
        let mut adoptions = Vec::new();
        for index in [AdoptedFrom::Pending, AdoptedFrom::DeadLetter] {
            let (index_name, pk_name, old, new) = match index {
                AdoptedFrom::Pending => (
                    self.keys.pending_index.as_str(),
                    self.keys.pending_partition_key.as_str(),
                    source.pending_pk(shard),
                    self.keys.pending_pk(shard),
                ),
                AdoptedFrom::DeadLetter => (
                    self.keys.dead_letter_index.as_str(),
                    self.keys.dead_letter_partition_key.as_str(),
                    source.dead_pk(shard),
                    self.keys.dead_pk(shard),
                ),
            };
            // Page by page (the SDK's paginator), each page's items moved
            // before the next is read.
            let mut pages = self
                .client
                .query()
                .table_name(&self.table)
                .index_name(index_name)
                .key_condition_expression("#pk = :pk")
                .expression_attribute_names("#pk", pk_name)
                .expression_attribute_values(":pk", s(old.clone()))
                .into_paginator()
                .send();
            while let Some(out) = self
                .call("adopt", deadline, async { pages.next().await.transpose() })
                .await
                .map_err(|e| e.into_store("adopt"))?
            {
                for item in out.items() {
                    let text = |name: &str| match item.get(name) {
                        Some(AttributeValue::S(v)) => Some(v.clone()),
                        _ => None,
                    };
                    let (Some(pk), Some(sk)) =
                        (text(&self.keys.partition_key), text(&self.keys.sort_key))
                    else {
                        continue;
                    };
                    let key = ItemKey::new(pk, sk);
                    let event_id = text(attr::EVENT_ID);
                    let outcome = if dry_run {
                        AdoptOutcome::WouldAdopt
                    } else {
                        let mut update = "SET #pk = :new, #home = :home".to_owned();
                        let mut values = HashMap::from([
                            (":new".to_owned(), s(new.clone())),
                            (":old".to_owned(), s(old.clone())),
                            (":home".to_owned(), s(home.clone())),
                        ]);
                        let mut names = vec![("#pk", pk_name), ("#home", attr::HOME_REGION)];
                        let redriven = event_id
                            .as_deref()
                            .and_then(|id| Ulid::from_string(id).ok())
                            .map(keys::redriven_sk);
                        if let (AdoptedFrom::Pending, true, Some(redriven)) =
                            (index, due_now, redriven)
                        {
                            update.push_str(", #psk = :psk");
                            names.push(("#psk", self.keys.pending_sort_key.as_str()));
                            values.insert(":psk".to_owned(), s(redriven));
                        }
                        match self
                            .conditional_update(
                                &key,
                                (&update, "#pk = :old"),
                                &names,
                                values,
                                OnFail::Gone,
                                "adopt",
                                deadline,
                            )
                            .await?
                        {
                            Marked::Updated => AdoptOutcome::Adopted,
                            Marked::Gone | Marked::Claimed | Marked::Refused => AdoptOutcome::Gone,
                        }
                    };
                    adoptions.push(Adoption {
                        key,
                        event_id,
                        index,
                        outcome,
                    });
                }
            }
        }
        Ok(adoptions)
    }
}
