use std::collections::HashSet;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Mutex;
use std::time::Duration;

use aws_lambda_events::event::streams::DynamoDbBatchItemFailure;

use super::*;

fn record(pk: &str, sk: &str, sequence: u64) -> EventRecord {
    let mut record = EventRecord::default();
    record.change.keys =
        serde_json::from_value(json!({"PK": {"S": pk}, "SK": {"S": sk}})).expect("keys");
    record.change.sequence_number = Some(format!("{sequence:021}"));
    record
}

fn sk(record: &EventRecord) -> String {
    serde_json::to_value(&record.change.keys).expect("keys")["SK"]["S"]
        .as_str()
        .unwrap_or_default()
        .to_owned()
}

#[test]
fn an_items_records_share_a_lane_and_items_spread_over_the_lanes() {
    let records: Vec<EventRecord> = (0..200)
        .map(|i| record("ORDER#a", &format!("OUTBOX#{i:04}"), i))
        .collect();
    assert!(records.iter().all(|r| lane_of(r, 1) == 0));
    for lanes in [2, 3, 10] {
        let mut counts = vec![0usize; lanes];
        for r in &records {
            let lane = lane_of(r, lanes);
            assert!(lane < lanes);
            // Another record of the same item: the same lane.
            assert_eq!(lane_of(&record("ORDER#a", &sk(r), 9_999), lanes), lane);
            counts[lane] += 1;
        }
        let fair = records.len() / lanes;
        assert!(
            counts.iter().all(|c| *c > fair / 2 && *c < fair * 2),
            "{lanes} lanes: {counts:?}"
        );
    }
    // The key map's order (a HashMap's) does not move an item.
    let mut swapped = EventRecord::default();
    swapped.change.keys =
        serde_json::from_value(json!({"SK": {"S": "OUTBOX#0007"}, "PK": {"S": "ORDER#a"}}))
            .expect("keys");
    assert_eq!(lane_of(&swapped, 2), lane_of(&records[7], 2));
    // The partition key counts too.
    let moved = (0..200)
        .any(|i| lane_of(&record("ORDER#b", &sk(&records[i]), 0), 2) != lane_of(&records[i], 2));
    assert!(moved);
}

/// Answers after a pause, reporting `failing` as failed whenever it is
/// in a batch; records each batch and the most invocations at once.
#[derive(Default)]
struct Fake {
    failing: String,
    running: AtomicUsize,
    most: AtomicUsize,
    batches: Mutex<Vec<Vec<EventRecord>>>,
}

impl Invoker for Fake {
    async fn invoke(&self, event: Event) -> Result<DynamoDbEventResponse, InvokeError> {
        let now = self.running.fetch_add(1, Ordering::SeqCst) + 1;
        self.most.fetch_max(now, Ordering::SeqCst);
        tokio::time::sleep(Duration::from_millis(20)).await;
        self.running.fetch_sub(1, Ordering::SeqCst);
        self.batches
            .lock()
            .expect("batches")
            .push(event.records.clone());
        let mut response = DynamoDbEventResponse::default();
        if let Some(failed) = event.records.iter().find(|r| sk(r) == self.failing) {
            let mut failure = DynamoDbBatchItemFailure::default();
            failure.item_identifier = failed.change.sequence_number.clone();
            response.batch_item_failures.push(failure);
        }
        Ok(response)
    }
}

/// Two lanes of one shard: invoked at once, each batching, retrying and
/// giving up on its own, each in stream order.
#[tokio::test]
async fn lanes_of_a_shard_run_at_once_and_fail_on_their_own() {
    let records: Vec<EventRecord> = (0..12)
        .map(|i| record("ORDER#a", &format!("OUTBOX#{i:04}"), i))
        .collect();
    let lane_records = |lane: usize| -> Vec<String> {
        records
            .iter()
            .filter(|r| lane_of(r, 2) == lane)
            .map(sk)
            .collect()
    };
    let (zero, one) = (lane_records(0), lane_records(1));
    assert!(!zero.is_empty() && !one.is_empty(), "{zero:?} {one:?}");
    // Lane 0's first record always fails.
    let failing = zero[0].clone();
    let sdk = aws_config::SdkConfig::builder()
        .behavior_version(aws_config::BehaviorVersion::latest())
        .region(aws_config::Region::new("us-east-1"))
        .build();
    let mapping = MappingSettings {
        function: "PublisherFunction".into(),
        starting_position: "TRIM_HORIZON".into(),
        batch_size: 3,
        batching_window_seconds: 0,
        maximum_retry_attempts: 2,
        maximum_record_age_seconds: -1,
        bisect_on_error: true,
        report_batch_item_failures: true,
        parallelization_factor: 2,
        patterns: Vec::new(),
    };
    let fake = Fake {
        failing: failing.clone(),
        ..Fake::default()
    };
    let cursor = StreamCursor::new(
        &sdk,
        "arn:aws:dynamodb:us-east-1:123456789012:table/t/stream/s",
    );
    let mut pump = Pump::new(cursor, mapping, fake, None).expect("pump");
    let mut shard = Shard::default();
    shard.lanes.resize_with(2, Lane::default);
    for r in &records {
        shard.lanes[lane_of(r, 2)].pending.push_back(r.clone());
    }
    pump.shards.insert("shard-1".into(), shard);
    pump.drain("shard-1").await.expect("drain");

    assert_eq!(pump.invoker().most.load(Ordering::SeqCst), 2, "two at once");
    let batches = pump.invoker().batches.lock().expect("batches").clone();
    let mut delivered: Vec<Vec<String>> = vec![Vec::new(), Vec::new()];
    for batch in &batches {
        let lane = lane_of(&batch[0], 2);
        assert!(
            batch.iter().all(|r| lane_of(r, 2) == lane),
            "one lane a batch"
        );
        assert!(batch.len() <= 3);
        for r in batch {
            if !delivered[lane].contains(&sk(r)) {
                delivered[lane].push(sk(r));
            }
        }
    }
    // Lane 1 never failed: each record once, in order, never held up
    // by lane 0's retries.
    let ones: Vec<String> = batches
        .iter()
        .filter(|b| lane_of(&b[0], 2) == 1)
        .flatten()
        .map(sk)
        .collect();
    assert_eq!(ones, one);
    // Lane 0: its first batch tried once and retried twice, then given
    // up (three records); the rest of the lane after it, in order.
    assert_eq!(delivered[0], zero);
    let tried: usize = batches
        .iter()
        .filter(|b| b.iter().any(|r| sk(r) == failing))
        .count();
    assert_eq!(tried, 3);
    assert_eq!(pump.stats.on_failure_messages, 1);
    assert_eq!(pump.stats.records_discarded, zero.len().min(3));
    assert_eq!(pump.stats.partial_failures, 3);
    assert_eq!(pump.stats.invocations, batches.len());
    let lanes_left: HashSet<usize> = pump.shards["shard-1"]
        .lanes
        .iter()
        .map(|l| l.pending.len())
        .collect();
    assert_eq!(lanes_left, HashSet::from([0]));
}
