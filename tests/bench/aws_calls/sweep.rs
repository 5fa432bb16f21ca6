//! The sweep's cost versus the table's size (unrelated items beside 10
//! stranded ones).

use std::time::Duration;

use outbox_engine::{SweepSettings, Sweeper};
use testkit::{far_deadline, Stack};

pub(super) async fn sweep_cost(sizes: &[usize]) {
    println!("## Sweep cost versus table size (10 stranded items, 8 shards)\n");
    println!("| unrelated items | items read | Query calls | all DynamoDB calls | PutEvents | republished |");
    println!("|---|---|---|---|---|---|");
    for &size in sizes {
        let stack = Stack::with_bus().await;
        stack.fill_unrelated("CUSTOMER", size).await;
        for _ in 0..10 {
            stack.put_event_aged(Duration::from_secs(2 * 86_400)).await;
        }
        let (sink, events_calls) = stack.eventbridge_sink();
        let sweeper = Sweeper::new(sink, stack.store(), SweepSettings::from(&stack.config(&[])));
        stack.calls.reset();
        let report = sweeper
            .sweep(time::OffsetDateTime::now_utc(), &far_deadline())
            .await;
        println!(
            "| {size} | {} | {} | {} | {} | {} |",
            report.items_read,
            stack.calls.count("Query"),
            stack.calls.calls().len(),
            events_calls.count("PutEvents"),
            report.republished
        );
    }
    println!();
}
