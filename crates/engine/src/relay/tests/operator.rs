//! Operator mode (`redrive --now`): a claimed dead letter that is published
//! is deleted; one whose publish fails stays a dead letter, its claim
//! released with the failure as its reason, so the next `--now` can take it.

use super::*;

#[tokio::test]
async fn a_claimed_dead_letter_is_deleted_once_published_and_kept_when_not() {
    use crate::Claim;
    let store = MemoryStore::quiet(1);
    let all = items_of(2, 2);
    for item in &all {
        store.insert(item.clone());
        assert_eq!(dead_letter(&store, item).await, Marked::Updated);
    }
    let letters = store.dead_letter_page(0, 10, None, &far()).await.unwrap();
    let sink = FakeSink::new().fail("E1", FailureKind::Transient, 100);
    let relay = relay(&sink, &store, Ordering::Strict, 1);
    for letter in &letters.items {
        let claim = Claim::new(Duration::from_secs(300));
        let item = store
            .claim_dead_letter(letter, &claim, &far())
            .await
            .unwrap()
            .expect("a free dead letter");
        let published = item.event_type == "E0";
        let report = relay
            .run_claimed(&[Entry::Item(item)], &claim, &far())
            .await;
        if published {
            assert_eq!(report.outcomes, vec![Published]);
        } else {
            assert!(matches!(report.outcomes[..], [Failed(_)]));
        }
    }
    let left = store.items();
    assert_eq!(left.len(), 1, "the published one is deleted");
    assert_eq!(left[0].event_type, "E1");
    let kept = store.dead_letter_page(0, 10, None, &far()).await.unwrap();
    assert_eq!(kept.items.len(), 1, "the other stays a dead letter");
    assert!(
        kept.items[0].reason.contains("redrive --now"),
        "{}",
        kept.items[0].reason
    );
    let again = Claim::new(Duration::from_secs(300));
    let reclaimed = store
        .claim_dead_letter(&kept.items[0], &again, &far())
        .await;
    assert!(reclaimed.unwrap().is_some(), "its claim was released");
}
