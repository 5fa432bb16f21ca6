//! [`MemoryTable`]: an in-memory [`ItemTable`] for unit tests.

use std::collections::{BTreeMap, HashMap, HashSet};
use std::sync::{Mutex, MutexGuard};

use aws_sdk_dynamodb::error::ErrorMetadata;
use aws_sdk_dynamodb::operation::transact_write_items::TransactWriteItemsError;
use aws_sdk_dynamodb::types::error::TransactionCanceledException;
use aws_sdk_dynamodb::types::{
    AttributeValue, CancellationReason, ReturnValuesOnConditionCheckFailure, TransactWriteItem,
};
use aws_smithy_runtime_api::client::orchestrator::HttpResponse;
use aws_smithy_runtime_api::client::result::SdkError;
use aws_smithy_runtime_api::http::StatusCode;
use aws_smithy_types::body::SdkBody;

use super::expression::{self, Scope};
use super::{Item, ItemTable, ReadError, TransactError};
use crate::keys::{ItemKey, KeySchema};

/// An in-memory table with DynamoDB's transaction semantics for what the
/// writers here send: every condition is checked against the items as
/// they were before the call, then all actions apply or none does; a
/// failed condition cancels the call with one reason per action in
/// order (`ConditionalCheckFailed`, with the item when `ALL_OLD` asked for
/// it, or `None`); a client request token seen before answers success
/// without writing again. Expressions outside the evaluated subset
/// (`expression.rs`) cancel the call with a `ValidationException`.
///
/// Items are keyed by the [`KeySchema`]'s attribute names, in any table.
/// A failure can be queued for the next transaction
/// ([`MemoryTable::cancel_next`]), and the calls are counted.
///
/// It is a test double, not DynamoDB. Not modelled: the refusals of
/// malformed requests DynamoDB makes (unused placeholders, reserved words,
/// a `SET` of a key attribute, an empty transaction, a reused token with
/// other contents), ordering of binary and boolean values, sets compared
/// regardless of order, and numbers beyond an `f64`'s precision. An
/// unsupported update is found only once every condition has held.
/// DynamoDB Local stays the test of the real client.
#[derive(Debug)]
pub struct MemoryTable {
    schema: KeySchema,
    state: Mutex<State>,
}

#[derive(Debug, Default)]
struct State {
    items: BTreeMap<(String, String, String), Item>,
    tokens: HashSet<String>,
    fail_next: Vec<String>,
    reads: usize,
    transactions: usize,
}

impl MemoryTable {
    /// An empty table whose items are keyed by `schema`'s names.
    pub fn new(schema: KeySchema) -> Self {
        Self {
            schema,
            state: Mutex::new(State::default()),
        }
    }

    fn state(&self) -> MutexGuard<'_, State> {
        self.state.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// The item at `key` in `table`.
    pub fn item(&self, table: &str, key: &ItemKey) -> Option<Item> {
        let id = (table.to_owned(), key.pk.clone(), key.sk.clone());
        self.state().items.get(&id).cloned()
    }

    /// Every item of `table`, in key order.
    pub fn items(&self, table: &str) -> Vec<Item> {
        self.state()
            .items
            .iter()
            .filter(|((t, _, _), _)| t == table)
            .map(|(_, item)| item.clone())
            .collect()
    }

    /// Stores `item` as it is, without a condition (a test's set-up).
    pub fn put(&self, table: &str, item: Item) {
        if let Some(key) = self.schema.item_key(&item) {
            self.state()
                .items
                .insert((table.to_owned(), key.pk, key.sk), item);
        }
    }

    /// Cancels the next transaction with `code` as the first action's
    /// reason (`TransactionConflict`, `ThrottlingError`, …), writing
    /// nothing. Queued codes are used one a call.
    pub fn cancel_next(&self, code: &str) {
        self.state().fail_next.push(code.to_owned());
    }

    /// `GetItem` calls so far.
    pub fn reads(&self) -> usize {
        self.state().reads
    }

    /// `TransactWriteItems` calls so far.
    pub fn transactions(&self) -> usize {
        self.state().transactions
    }

    fn id(&self, table: &str, key: &Item) -> Result<(String, String, String), String> {
        let key = self
            .schema
            .item_key(key)
            .ok_or_else(|| format!("an action in {table} has no key of the table's schema"))?;
        Ok((table.to_owned(), key.pk, key.sk))
    }
}

/// One action, read out of its SDK type.
struct Action<'a> {
    id: (String, String, String),
    condition: Option<&'a str>,
    names: &'a HashMap<String, String>,
    values: &'a HashMap<String, AttributeValue>,
    all_old: bool,
    write: Write<'a>,
}

enum Write<'a> {
    Put(&'a Item),
    Update(&'a str, Item),
    Delete,
    Check,
}

fn action<'a>(table: &MemoryTable, item: &'a TransactWriteItem) -> Result<Action<'a>, String> {
    static EMPTY_NAMES: std::sync::OnceLock<HashMap<String, String>> = std::sync::OnceLock::new();
    static EMPTY_VALUES: std::sync::OnceLock<HashMap<String, AttributeValue>> =
        std::sync::OnceLock::new();
    let names = |n: Option<&'a HashMap<String, String>>| {
        n.unwrap_or_else(|| EMPTY_NAMES.get_or_init(HashMap::new))
    };
    let values = |v: Option<&'a HashMap<String, AttributeValue>>| {
        v.unwrap_or_else(|| EMPTY_VALUES.get_or_init(HashMap::new))
    };
    let all_old = |r: Option<&ReturnValuesOnConditionCheckFailure>| {
        r == Some(&ReturnValuesOnConditionCheckFailure::AllOld)
    };
    if let Some(put) = item.put() {
        return Ok(Action {
            id: table.id(put.table_name(), put.item())?,
            condition: put.condition_expression(),
            names: names(put.expression_attribute_names()),
            values: values(put.expression_attribute_values()),
            all_old: all_old(put.return_values_on_condition_check_failure()),
            write: Write::Put(put.item()),
        });
    }
    if let Some(update) = item.update() {
        return Ok(Action {
            id: table.id(update.table_name(), update.key())?,
            condition: update.condition_expression(),
            names: names(update.expression_attribute_names()),
            values: values(update.expression_attribute_values()),
            all_old: all_old(update.return_values_on_condition_check_failure()),
            write: Write::Update(update.update_expression(), update.key().clone()),
        });
    }
    if let Some(delete) = item.delete() {
        return Ok(Action {
            id: table.id(delete.table_name(), delete.key())?,
            condition: delete.condition_expression(),
            names: names(delete.expression_attribute_names()),
            values: values(delete.expression_attribute_values()),
            all_old: all_old(delete.return_values_on_condition_check_failure()),
            write: Write::Delete,
        });
    }
    if let Some(check) = item.condition_check() {
        return Ok(Action {
            id: table.id(check.table_name(), check.key())?,
            condition: Some(check.condition_expression()),
            names: names(check.expression_attribute_names()),
            values: values(check.expression_attribute_values()),
            all_old: all_old(check.return_values_on_condition_check_failure()),
            write: Write::Check,
        });
    }
    Err("an action with no Put, Update, Delete or ConditionCheck".into())
}

fn raw() -> HttpResponse {
    HttpResponse::new(
        StatusCode::try_from(400).expect("400 is a status code"),
        SdkBody::empty(),
    )
}

fn invalid(message: String) -> TransactError {
    let meta = ErrorMetadata::builder()
        .code("ValidationException")
        .message(format!("MemoryTable: {message}"))
        .build();
    SdkError::service_error(TransactWriteItemsError::generic(meta), raw())
}

fn cancelled(reasons: Vec<CancellationReason>) -> TransactError {
    let codes: Vec<&str> = reasons.iter().map(|r| r.code().unwrap_or("None")).collect();
    let e = TransactionCanceledException::builder()
        .message(format!(
            "Transaction cancelled, please refer cancellation reasons for specific reasons [{}]",
            codes.join(", ")
        ))
        .set_cancellation_reasons(Some(reasons))
        .build();
    SdkError::service_error(
        TransactWriteItemsError::TransactionCanceledException(e),
        raw(),
    )
}

fn reason(code: &str) -> CancellationReason {
    CancellationReason::builder().code(code).build()
}

impl ItemTable for MemoryTable {
    async fn get_item(&self, table: &str, key: Item) -> Result<Option<Item>, ReadError> {
        let mut state = self.state();
        state.reads += 1;
        Ok(self
            .id(table, &key)
            .ok()
            .and_then(|id| state.items.get(&id).cloned()))
    }

    async fn transact_write(
        &self,
        items: Vec<TransactWriteItem>,
        token: Option<String>,
    ) -> Result<(), TransactError> {
        let mut state = self.state();
        state.transactions += 1;
        if !state.fail_next.is_empty() {
            let code = state.fail_next.remove(0);
            let mut reasons = vec![reason(&code)];
            reasons.resize_with(items.len().max(1), || reason("None"));
            return Err(cancelled(reasons));
        }
        if token.as_ref().is_some_and(|t| state.tokens.contains(t)) {
            return Ok(());
        }
        let actions = items
            .iter()
            .map(|item| action(self, item))
            .collect::<Result<Vec<_>, _>>()
            .map_err(invalid)?;
        let empty = Item::new();
        let mut reasons = Vec::with_capacity(actions.len());
        let mut failed = false;
        for action in &actions {
            let current = state.items.get(&action.id);
            let scope = Scope {
                names: action.names,
                values: action.values,
            };
            let holds = match action.condition {
                None => true,
                Some(c) => expression::condition(c, &scope, current.unwrap_or(&empty))
                    .map_err(|e| invalid(format!("{e} in `{c}`")))?,
            };
            if holds {
                reasons.push(reason("None"));
            } else {
                failed = true;
                let mut r = CancellationReason::builder().code("ConditionalCheckFailed");
                if action.all_old {
                    r = r.set_item(current.cloned());
                }
                reasons.push(r.build());
            }
        }
        if failed {
            return Err(cancelled(reasons));
        }
        let mut next = state.items.clone();
        for action in actions {
            let scope = Scope {
                names: action.names,
                values: action.values,
            };
            match action.write {
                Write::Put(item) => {
                    next.insert(action.id, item.clone());
                }
                Write::Update(update, key) => {
                    let mut item = next.get(&action.id).cloned().unwrap_or(key);
                    expression::update(update, &scope, &mut item)
                        .map_err(|e| invalid(format!("{e} in `{update}`")))?;
                    next.insert(action.id, item);
                }
                Write::Delete => {
                    next.remove(&action.id);
                }
                Write::Check => {}
            }
        }
        state.items = next;
        if let Some(token) = token {
            state.tokens.insert(token);
        }
        Ok(())
    }
}
