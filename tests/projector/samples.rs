//! The sample events in `events/projector-*.json` do what
//! docs/consumer.md says.

use aws_lambda_events::event::sqs::SqsEvent;
use projector::project_batch;
use testkit::far_deadline;

use super::{model, projector, read_model};

/// `cargo lambda invoke projector --data-file events/projector-*.json`:
/// each sample does what docs/consumer.md says, on a fresh read model.
#[tokio::test]
async fn the_sample_events_do_what_the_docs_say() {
    for (sample, applied, duplicate, stale, failed) in [
        ("projector-batch.json", 3, 0, 0, 0),
        ("projector-duplicate.json", 1, 1, 0, 0),
        ("projector-out-of-order.json", 1, 0, 1, 0),
        ("projector-malformed.json", 1, 0, 0, 1),
    ] {
        let (sdk, table) = read_model().await;
        let event: SqsEvent = serde_json::from_str(&testkit::sample(sample)).unwrap();
        let (response, counts) =
            project_batch(&projector(&sdk, &table), &event, &far_deadline()).await;
        assert_eq!(
            (
                counts.applied,
                counts.duplicate,
                counts.stale,
                counts.failed
            ),
            (applied, duplicate, stale, failed),
            "{sample}"
        );
        assert_eq!(
            response.batch_item_failures.len(),
            failed as usize,
            "{sample}"
        );
        if sample == "projector-out-of-order.json" {
            let model = model(&sdk, &table).await;
            assert_eq!(model.summaries["sample-cust-3"], (1, 1, 4200));
        }
    }
}
