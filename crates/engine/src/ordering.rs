//! [`Ordering`], the order the relay keeps per aggregate, and
//! [`DEFAULT_SEND_CONCURRENCY`], how many sink calls it has in flight.

/// Sink calls in flight at once unless `SEND_CONCURRENCY` says otherwise
/// (the templates' `SendConcurrency`): a batch of 100 events (10 calls)
/// goes out in two waves.
pub const DEFAULT_SEND_CONCURRENCY: usize = 5;

/// Order per aggregate (`ORDERING`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum Ordering {
    /// No event of an aggregate is published while an older event of that
    /// aggregate is still in the table (pending, backing off, held or
    /// dead-lettered), whichever path publishes it: one consistent read of
    /// the aggregate's item collection guards it. The default for an SNS
    /// FIFO topic.
    Strict,
    /// Order as the stream and the sweeper give it: per item (partition and
    /// sort key) at a `ParallelizationFactor` above 1, none across the
    /// OnFailure path; consumers order by `aggregateVersion`. The default
    /// for EventBridge (whose consumers get no order from the bus anyway)
    /// and standard SNS topics.
    #[default]
    Relaxed,
}

impl Ordering {
    /// The name the environment and the template use.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Strict => "strict",
            Self::Relaxed => "relaxed",
        }
    }
}
