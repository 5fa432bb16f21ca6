use super::*;
use serde_json::json;

/// A variable lookup over `pairs` (the first of a name wins).
fn lookup(pairs: &[(&str, &str)]) -> impl Fn(&str) -> Option<String> {
    let pairs: Vec<(String, String)> = pairs
        .iter()
        .map(|(k, v)| ((*k).to_owned(), (*v).to_owned()))
        .collect();
    move |k: &str| pairs.iter().find(|(n, _)| n == k).map(|(_, v)| v.clone())
}

#[test]
fn redriven_sort_keys_sort_before_every_event_and_among_themselves_by_age() {
    let (old, new) = (
        Ulid::from_parts(1, 0),
        Ulid::from_parts(2_000_000_000_000, 5),
    );
    let (from, to) = redriven_range();
    for id in [old, new] {
        let sk = redriven_sk(id);
        assert!(sk < Ulid::from_parts(0, 1).to_string());
        assert!(from <= sk && sk <= to && is_redriven_sk(&sk));
        assert_eq!(event_id_from_pending_sk(&sk), Some(id));
        assert_eq!(event_id_from_pending_sk(&id.to_string()), Some(id));
    }
    assert!(redriven_sk(old) < redriven_sk(new));
    assert!(!is_redriven_sk(&new.to_string()));
}

#[test]
fn the_key_schema_defaults_to_the_design_card_and_validates_each_setting() {
    let defaults = KeySchema::from_lookup(lookup(&[])).unwrap();
    assert_eq!(defaults, KeySchema::default());
    assert!(KeySchema::default().is_default());
    let custom = KeySchema::from_lookup(lookup(&[
        ("PARTITION_KEY", "pk"),
        ("SORT_KEY", "sk"),
        ("OUTBOX_PREFIX", "evt#"),
        ("PENDING_INDEX", "outbox-pending"),
        ("PENDING_INDEX_PARTITION_KEY", "opk"),
    ]))
    .unwrap();
    let id = Ulid::from_parts(1, 2);
    assert_eq!(custom.outbox_sk(id), format!("evt#{id}"));
    assert_eq!(custom.event_id_from_sk(&custom.outbox_sk(id)), Some(id));
    assert_eq!(custom.pending_pk(3), "evt#3");
    assert_eq!(custom.absent(), "attribute_not_exists(#outboxPk)");
    assert_eq!(custom.absent_name(), ("#outboxPk", "pk"));
    for (pairs, named) in [
        (&[("PARTITION_KEY", "eventId")][..], "PARTITION_KEY"),
        (&[("SORT_KEY", "PK")][..], "SORT_KEY"),
        (&[("PENDING_INDEX", "a b")][..], "PENDING_INDEX"),
        (&[("DEAD_LETTER_INDEX", "GSI1")][..], "DEAD_LETTER_INDEX"),
        (&[("OUTBOX_PREFIX", "a!")][..], "OUTBOX_PREFIX"),
        (&[("TTL_ATTRIBUTE", "GSI2SK")][..], "TTL_ATTRIBUTE"),
    ] {
        let e = KeySchema::from_lookup(lookup(pairs)).unwrap_err();
        assert!(e.to_string().contains(named), "{e}");
    }
}

#[test]
fn items_are_renamed_to_the_table_and_back() {
    let schema = KeySchema {
        partition_key: "pk".into(),
        sort_key: "sk".into(),
        pending_partition_key: "opk".into(),
        ..KeySchema::default()
    };
    let item = HashMap::from([
        (PK.to_owned(), AttributeValue::S("a".into())),
        (SK.to_owned(), AttributeValue::S("b".into())),
        (PENDING_PK.to_owned(), AttributeValue::S("c".into())),
        (PENDING_SK.to_owned(), AttributeValue::S("d".into())),
        (attr::EVENT_ID.to_owned(), AttributeValue::S("e".into())),
    ]);
    let table = schema.to_table(item.clone());
    let mut names: Vec<&str> = table.keys().map(String::as_str).collect();
    names.sort_unstable();
    assert_eq!(names, ["GSI1SK", "eventId", "opk", "pk", "sk"]);
    assert_eq!(schema.item_key(&table), Some(ItemKey::new("a", "b")));
    assert_eq!(schema.from_table(table), item);
}

#[test]
fn a_default_named_key_the_table_does_not_use_is_not_read_as_that_key() {
    // A writer left on the defaults beside a stack that names the pending
    // index's keys otherwise: its `GSI1PK` is not the stack's pending key.
    let schema = KeySchema {
        pending_partition_key: "opk".into(),
        pending_sort_key: "osk".into(),
        ..KeySchema::default()
    };
    let mut item = HashMap::from([
        (PENDING_PK.to_owned(), AttributeValue::S("OUTBOX#1".into())),
        (PENDING_SK.to_owned(), AttributeValue::S("x".into())),
    ]);
    schema.rename_from_table(&mut item);
    assert!(item.is_empty(), "{item:?}");
    // Two names swapped between roles are both read, each as its role.
    let swapped = KeySchema {
        pending_partition_key: DEAD_PK.into(),
        dead_letter_partition_key: PENDING_PK.into(),
        ..KeySchema::default()
    };
    let mut item = HashMap::from([
        (PENDING_PK.to_owned(), AttributeValue::S("dead".into())),
        (DEAD_PK.to_owned(), AttributeValue::S("pending".into())),
    ]);
    swapped.rename_from_table(&mut item);
    assert_eq!(item[PENDING_PK], AttributeValue::S("pending".into()));
    assert_eq!(item[DEAD_PK], AttributeValue::S("dead".into()));
}

#[test]
fn the_pending_keys_a_stack_sweeps() {
    let regional = KeySchema::default().with_home_region(Some("eu-west-1".into()));
    let plain = KeySchema::default();
    for (schema, key, region, shard) in [
        // This region's keys, a shard in range.
        (&regional, "OUTBOX#eu-west-1#3", Some("eu-west-1"), Some(3)),
        (&plain, "OUTBOX#3", None, Some(3)),
        // The keys without a region, for an item without one (adopted).
        (&regional, "OUTBOX#3", None, Some(3)),
        // Not swept: another region, a region on the item but not on the
        // key, a shard out of range, another prefix, not a number.
        (&regional, "OUTBOX#us-east-1#3", None, None),
        (&regional, "OUTBOX#3", Some("eu-west-1"), None),
        (&plain, "OUTBOX#eu-west-1#3", None, None),
        (&plain, "OUTBOX#8", None, None),
        (&plain, "evt#3", None, None),
        (&plain, "OUTBOX#+3", None, None),
        (&plain, "OUTBOX#", None, None),
    ] {
        let (got, keys) = (schema.pending_shard(key, region, 8), &schema.home_region);
        assert_eq!(got, shard, "{key}, item of {region:?}, keys of {keys:?}");
    }

    let env = crate::EventEnvelope::new("OrderCreated", "Order", "o-1", 1, json!({})).unwrap();
    let limits = crate::size::EventLimits::eventbridge("outbox.orders");
    let mut item = crate::OutboxItem::in_table(&regional, "ORDER#o-1", &env, &limits, 8).unwrap();
    let sweepable = |item: &crate::OutboxItem| regional.sweepable(item, 8);
    assert!(sweepable(&item));
    item.pending_sk = Some(redriven_sk(item.event_id));
    assert!(sweepable(&item), "handed to the scheduled sweep");
    item.pending_sk = Some("01ARZ3NDEKTSV4RRFFQ69G5FAV".into());
    assert!(!sweepable(&item), "another event's id");
    item.pending_sk = Some(item.event_id.to_string());
    item.pending_pk = None;
    assert!(!sweepable(&item), "no pending key");
    item.pending_pk = Some(plain.pending_pk(1));
    assert!(!sweepable(&item), "the item's region, the key without one");
}

#[test]
fn keys_follow_the_design_card() {
    let id = Ulid::from_string("01J9ZQ7Y8X4M2N3P5Q6R7S8T9V").unwrap();
    assert_eq!(outbox_sk(id), "OUTBOX#01J9ZQ7Y8X4M2N3P5Q6R7S8T9V");
    let schema = KeySchema::default();
    assert_eq!(schema.event_id_from_sk(&outbox_sk(id)), Some(id));
    assert_eq!(schema.event_id_from_sk("META"), None);
    assert_eq!(schema.event_id_from_sk("OUTBOX#not-a-ulid"), None);
    assert!(is_outbox_sk("OUTBOX#x") && !is_outbox_sk("META"));
}

#[test]
fn shard_is_stable_and_in_range() {
    assert_eq!(shard_of("any", 1), 0);
    let mut seen = [0u32; 8];
    for _ in 0..8_000 {
        let s = shard_of(&Ulid::new().to_string(), 8);
        assert!(s < 8);
        seen[s as usize] += 1;
    }
    // Every shard gets a fair share (uniform would be 1,000 each).
    assert!(seen.iter().all(|n| *n > 700), "{seen:?}");
}

#[test]
fn shard_of_a_known_id_never_changes() {
    // Pinned values (FNV-1a 64, computed independently): changing the
    // hash would move every pending item to another shard.
    let id = "01ARZ3NDEKTSV4RRFFQ69G5FAV";
    assert_eq!(shard_of(id, 8), 0);
    assert_eq!(shard_of(id, 7), 2);
    assert_eq!(shard_of(id, 1000), 560);
    assert_eq!(shard_of("order-42", 8), 4);
}

/// Issue #28: the home region, from `HOME_REGION` (not from
/// `AWS_REGION`: the stacks set it explicitly); none with the rule
/// off; a clear error naming the variable.
#[test]
fn the_home_region_comes_from_the_environment_and_decides_who_publishes() {
    let schema = |vars: &[(&str, &str)]| KeySchema::from_lookup(lookup(vars));
    let region = |vars: &[(&str, &str)]| schema(vars).unwrap().home_region;
    assert_eq!(region(&[]), None);
    assert_eq!(region(&[("AWS_REGION", "eu-west-1")]), None);
    let lambda = schema(&[("HOME_REGION", "eu-west-1")]).unwrap();
    assert_eq!(lambda.home_region.as_deref(), Some("eu-west-1"));
    assert!(lambda.is_default(), "the region is not a name");
    let explicit = region(&[("AWS_REGION", "eu-west-1"), ("HOME_REGION", "us-east-2")]);
    assert_eq!(explicit.as_deref(), Some("us-east-2"));
    let off = region(&[("HOME_REGION", "eu-west-1"), ("HOME_REGION_RULE", "off")]);
    assert_eq!(off, None);
    for (vars, name) in [
        (&[("HOME_REGION_RULE", "yes")][..], "HOME_REGION_RULE"),
        (&[("HOME_REGION", "EU West")][..], "HOME_REGION"),
    ] {
        match schema(vars) {
            Err(crate::error::ConfigError::Invalid { name: got, .. }) => assert_eq!(got, name),
            other => panic!("{vars:?}: {other:?}"),
        }
    }

    assert!(lambda.publishes_region(Some("eu-west-1")));
    assert!(!lambda.publishes_region(Some("us-east-1")));
    assert!(
        lambda.publishes_region(None),
        "items written before the rule"
    );
    let anywhere = KeySchema::default();
    assert!(anywhere.publishes_region(Some("us-east-1")));

    // The region is part of both indexes' keys.
    assert_eq!(lambda.pending_pk(3), "OUTBOX#eu-west-1#3");
    assert_eq!(lambda.dead_pk(3), "DEAD#eu-west-1#3");
    let unregioned = lambda.clone().with_home_region(None);
    assert_eq!(unregioned.pending_pk(3), "OUTBOX#3");
    assert_eq!(anywhere.dead_pk(3), dead_pk(3));

    // The filter: one pattern without a region, two with one.
    assert_eq!(
        anywhere.stream_filter_patterns(),
        [anywhere.stream_filter_pattern()]
    );
    let region_of = |p: &String| {
        let pattern: serde_json::Value = serde_json::from_str(p).unwrap();
        pattern["dynamodb"]["NewImage"][attr::HOME_REGION].clone()
    };
    let patterns = lambda.stream_filter_patterns();
    let regions: Vec<_> = patterns.iter().map(region_of).collect();
    let absent = json!({"S": [{"exists": false}]});
    assert_eq!(regions, [json!({"S": ["eu-west-1"]}), absent]);
}

/// Each of `KeySchema::VARIABLES` sets its own name (the table of
/// `KeySchema`'s doc), and `variables()` gives each back under it.
#[test]
fn each_key_schema_variable_sets_its_own_name() {
    let given: Vec<(&'static str, String)> = KeySchema::VARIABLES
        .iter()
        .enumerate()
        .map(|(i, name)| (*name, format!("name-{i}")))
        .collect();
    let pairs: Vec<(&str, &str)> = given.iter().map(|(n, v)| (*n, v.as_str())).collect();
    let value = lookup(&pairs);
    let schema = KeySchema::from_lookup(&value).unwrap();
    for (field, name) in [
        (&schema.partition_key, "PARTITION_KEY"),
        (&schema.sort_key, "SORT_KEY"),
        (&schema.outbox_prefix, "OUTBOX_PREFIX"),
        (&schema.pending_index, "PENDING_INDEX"),
        (&schema.pending_partition_key, "PENDING_INDEX_PARTITION_KEY"),
        (&schema.pending_sort_key, "PENDING_INDEX_SORT_KEY"),
        (&schema.dead_letter_index, "DEAD_LETTER_INDEX"),
        (
            &schema.dead_letter_partition_key,
            "DEAD_LETTER_INDEX_PARTITION_KEY",
        ),
        (&schema.dead_letter_sort_key, "DEAD_LETTER_INDEX_SORT_KEY"),
        (&schema.ttl_attribute, "TTL_ATTRIBUTE"),
    ] {
        assert_eq!(Some(field.clone()), value(name), "{name}");
    }
    assert_eq!(schema.variables(), given);
}
