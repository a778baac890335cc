//! Waiting on a reflector's store, which several tasks of the controller do
//! at once (readiness, the snapshot sweeper, a sharded replica's queue).

use std::time::Duration;

use kube::runtime::reflector::Store;

/// Waits until `store` has listed everything; `false` when it never will
/// (its writer is gone). kube-runtime 5's `Store::wait_until_ready` wakes
/// only the task that polled it last (its `DelayedInit` keeps one waker),
/// so each waiter asks again every second until it says so: no waiter can
/// take another's wake-up away for good.
pub async fn wait_until_ready<K>(store: &Store<K>) -> bool
where
    K: kube::Resource + Clone + 'static,
    K::DynamicType: Eq + std::hash::Hash + Clone,
{
    loop {
        match tokio::time::timeout(Duration::from_secs(1), store.wait_until_ready()).await {
            Ok(Ok(())) => return true,
            Ok(Err(_)) => return false,
            Err(_) => continue,
        }
    }
}
