//! [`ItemTable`]: the two DynamoDB calls a writer makes, one consistent
//! `GetItem` and one `TransactWriteItems`, as a port. The SDK client is its
//! adapter; `MemoryTable` (feature `testing`) is an in-memory one for
//! unit tests of the logic around them (the writer's orders, the inbox's
//! projector). DynamoDB Local remains the test of the adapter itself.
//!
//! The port speaks the SDK's types and errors, so the cancellation reasons
//! and the error codes are classified in one place
//! ([`OutboxTransaction::send`](crate::transaction::OutboxTransaction::send))
//! whichever adapter answered.

use std::collections::HashMap;
use std::future::Future;

use aws_sdk_dynamodb::operation::get_item::GetItemError;
use aws_sdk_dynamodb::operation::transact_write_items::TransactWriteItemsError;
use aws_sdk_dynamodb::types::{AttributeValue, TransactWriteItem};
use aws_smithy_runtime_api::client::orchestrator::HttpResponse;
use aws_smithy_runtime_api::client::result::SdkError;

#[cfg(feature = "testing")]
mod expression;
#[cfg(feature = "testing")]
mod memory;
#[cfg(all(test, feature = "testing"))]
mod tests;

#[cfg(feature = "testing")]
pub use memory::MemoryTable;

/// An item: attribute name to value.
pub type Item = HashMap<String, AttributeValue>;

/// A failed `GetItem`, as the SDK reports it.
pub type ReadError = SdkError<GetItemError, HttpResponse>;

/// A failed `TransactWriteItems`, as the SDK reports it.
pub type TransactError = SdkError<TransactWriteItemsError, HttpResponse>;

/// What a writer needs of DynamoDB.
pub trait ItemTable: Send + Sync {
    /// Reads one item, strongly consistent; `None` when it does not exist.
    fn get_item(
        &self,
        table: &str,
        key: Item,
    ) -> impl Future<Output = Result<Option<Item>, ReadError>> + Send;

    /// Writes `items` in one `TransactWriteItems`, all or nothing, with the
    /// client request token `token` when given.
    fn transact_write(
        &self,
        items: Vec<TransactWriteItem>,
        token: Option<String>,
    ) -> impl Future<Output = Result<(), TransactError>> + Send;
}

/// A shared table (an `Arc<Client>` a service holds) is a table too.
impl<T: ItemTable + ?Sized> ItemTable for std::sync::Arc<T> {
    fn get_item(
        &self,
        table: &str,
        key: Item,
    ) -> impl Future<Output = Result<Option<Item>, ReadError>> + Send {
        (**self).get_item(table, key)
    }

    fn transact_write(
        &self,
        items: Vec<TransactWriteItem>,
        token: Option<String>,
    ) -> impl Future<Output = Result<(), TransactError>> + Send {
        (**self).transact_write(items, token)
    }
}

impl ItemTable for aws_sdk_dynamodb::Client {
    async fn get_item(&self, table: &str, key: Item) -> Result<Option<Item>, ReadError> {
        let out = self
            .get_item()
            .table_name(table)
            .set_key(Some(key))
            .consistent_read(true)
            .send()
            .await?;
        Ok(out.item)
    }

    async fn transact_write(
        &self,
        items: Vec<TransactWriteItem>,
        token: Option<String>,
    ) -> Result<(), TransactError> {
        self.transact_write_items()
            .set_transact_items(Some(items))
            .set_client_request_token(token)
            .send()
            .await
            .map(|_| ())
    }
}
