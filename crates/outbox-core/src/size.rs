//! Size arithmetic, done the way the services do it, so that limits are
//! enforced before a call rather than discovered from its error.

use std::collections::HashMap;

use aws_sdk_dynamodb::types::AttributeValue;

/// Largest DynamoDB item (400 KB).
pub const MAX_ITEM_BYTES: usize = 400 * 1024;
/// Largest `TransactWriteItems` request payload (4 MB).
pub const MAX_TRANSACTION_BYTES: usize = 4 * 1024 * 1024;
/// Largest `TransactWriteItems` action count.
pub const MAX_TRANSACTION_ACTIONS: usize = 100;
/// Largest EventBridge `PutEvents` request (and entry): 256 KB.
pub const MAX_EVENTBRIDGE_BYTES: usize = 256 * 1024;
/// Largest number of entries in one `PutEvents` call.
pub const MAX_EVENTBRIDGE_ENTRIES: usize = 10;
/// Largest SNS message, attributes included, and largest `PublishBatch` payload.
pub const MAX_SNS_BYTES: usize = 256 * 1024;
/// Largest number of entries in one SNS `PublishBatch` call.
pub const MAX_SNS_ENTRIES: usize = 10;

/// Size of one `PutEvents` entry as EventBridge counts it ("Calculating
/// PutEvents event entry size"): the UTF-8 bytes of `Source`, `DetailType`,
/// `Detail` and each `Resources` entry, plus 14 bytes when `Time` is set.
/// We set neither `Resources` nor `Time`.
pub fn eventbridge_entry_size(source: &str, detail_type: &str, detail: &str) -> usize {
    source.len() + detail_type.len() + detail.len()
}

/// Size of one SNS message: the body plus each attribute's name, data type
/// and value.
pub fn sns_message_size(body: &str, attributes: &[(&str, &str)]) -> usize {
    body.len()
        + attributes
            .iter()
            .map(|(name, value)| name.len() + "String".len() + value.len())
            .sum::<usize>()
}

/// Size of a DynamoDB item following the documented rules: attribute names
/// plus values (strings and binaries by length, numbers by significant digits,
/// one byte for booleans and nulls, three bytes of overhead for lists and maps
/// plus one per element).
pub fn item_size(item: &HashMap<String, AttributeValue>) -> usize {
    item.iter().map(|(k, v)| k.len() + value_size(v)).sum()
}

fn value_size(value: &AttributeValue) -> usize {
    match value {
        AttributeValue::S(s) => s.len(),
        AttributeValue::N(n) => number_size(n),
        AttributeValue::B(b) => b.as_ref().len(),
        AttributeValue::Bool(_) | AttributeValue::Null(_) => 1,
        AttributeValue::Ss(v) => v.iter().map(String::len).sum(),
        AttributeValue::Ns(v) => v.iter().map(|n| number_size(n)).sum(),
        AttributeValue::Bs(v) => v.iter().map(|b| b.as_ref().len()).sum(),
        AttributeValue::L(v) => 3 + v.iter().map(|e| 1 + value_size(e)).sum::<usize>(),
        AttributeValue::M(m) => {
            3 + m
                .iter()
                .map(|(k, e)| 1 + k.len() + value_size(e))
                .sum::<usize>()
        }
        // Unknown future variants: count generously rather than under-count.
        _ => 64,
    }
}

fn number_size(n: &str) -> usize {
    let digits = n
        .chars()
        .take_while(|c| *c != 'e' && *c != 'E')
        .filter(char::is_ascii_digit)
        .count();
    digits.div_ceil(2) + 1
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn item_size_counts_names_and_values() {
        let item = HashMap::from([
            ("PK".to_owned(), AttributeValue::S("ORDER#1".into())),
            ("n".to_owned(), AttributeValue::N("12345".into())),
            ("b".to_owned(), AttributeValue::Bool(true)),
        ]);
        assert_eq!(item_size(&item), 2 + 7 + 1 + 4 + 1 + 1);
    }

    #[test]
    fn eventbridge_size_counts_utf8_bytes() {
        assert_eq!(
            eventbridge_entry_size("src", "Type", "{\"a\":\"é\"}"),
            3 + 4 + 10
        );
    }
}
