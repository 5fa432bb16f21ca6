//! The publisher's calls per 1,000 events (every service, counted on the
//! wire by the fault proxy), against the naive design.

use crate::common::{count, publisher_rig, write_bench_json};

/// The publisher binary under the local Lambda runtime, fed by the mapping
/// emulator with the template's settings, every call it makes (cold start
/// included: the bus check and the settings writes) counted on the wire by
/// the proxy, whatever the service. The stream reads are the mapping's
/// (Lambda's, free), not the function's.
pub(super) async fn publisher_calls(n: usize) {
    let (stack, proxy, function) = publisher_rig("relaxed").await;
    stack.create_orders(n).await;
    let mut pump = stack.pump(&function, None);
    pump.run_until_idle().await.expect("pump");
    let calls = proxy.action_counts();
    let put_events = count(&calls, "events:PutEvents");
    let batch_write = count(&calls, "dynamodb:BatchWriteItem");
    // A lone key left over from the batches of 25 goes in a DeleteItem.
    let delete_item = count(&calls, "dynamodb:DeleteItem");
    let total: usize = calls.values().sum();
    let other = total - put_events - batch_write - delete_item;
    let cold_starts = function
        .cold_starts
        .load(std::sync::atomic::Ordering::SeqCst);
    let per_1000 = |x: usize| x as f64 * 1000.0 / n as f64;
    println!(
        "## Publisher, {n} events, mapping BatchSize {}, {} invocations, {cold_starts} cold start\n",
        pump.mapping().batch_size,
        pump.stats.invocations,
    );
    println!(
        "| call (every service, as the proxy saw it) | count | per 1,000 events | naive design (1 PutEvents + 1 DeleteItem per event) |"
    );
    println!("|---|---|---|---|");
    for (action, c) in &calls {
        let naive = match action.as_str() {
            "events:PutEvents" | "dynamodb:DeleteItem" => "1,000",
            _ => "–",
        };
        println!("| `{action}` | {c} | {:.1} | {naive} |", per_1000(*c));
    }
    if delete_item == 0 {
        println!("| `dynamodb:DeleteItem` | 0 | 0 | 1,000 |");
    }
    println!(
        "| **total** | {total} | **{:.1}** | **2,000** |",
        per_1000(total)
    );
    println!(
        "| function invocations | {} | {:.0} | – |\n",
        pump.stats.invocations,
        per_1000(pump.stats.invocations)
    );
    write_bench_json(
        "publisher-calls.json",
        serde_json::json!({
            "source": "cargo bench --bench aws_calls (the publisher binary under the local Lambda runtime, through the mapping emulator, every call counted by the proxy)",
            "events": n,
            "batch_size": pump.mapping().batch_size,
            "arrival": "all events committed before the mapping reads: full batches",
            "put_events": put_events,
            "batch_write_item": batch_write,
            "delete_item": delete_item,
            "other_calls": other,
            "cold_starts": cold_starts,
            "calls": calls,
            "invocations": pump.stats.invocations,
        }),
    );
}
