//! Engine integration tests: determinism, merge order, joins, concurrency limits, cancellation,
//! retries, timeouts, backpressure, RNG streams, recorded time and UUIDs, and typed errors. One binary, one module per topic.

mod backpressure;
mod cancellation;
mod concurrency;
mod determinism;
mod errors;
mod joins;
mod merge_order;
mod recorded;
mod retries;
mod rng;
mod timeouts;

use graph_runtime::node::BoxFuture;
use graph_runtime::{Ctx, NodeResult, Route};
use graph_tests::{Trace, TraceDelta};

/// The boxed future type a hand-written node over [`Trace`] returns.
pub(crate) type Fut<'a> = BoxFuture<'a, NodeResult<Trace, Route>>;

/// A node that appends its own name and follows its declared edges.
pub(crate) fn logs(
    name: &'static str,
) -> impl for<'b> Fn(&'b Trace, &'b mut Ctx) -> Fut<'b> + Send + Sync + 'static {
    move |_s, _ctx| Box::pin(async move { Ok((TraceDelta::default().log(name), Route::Declared)) })
}
