//! Leader election on a `coordination.k8s.io` Lease, so that of several
//! replicas exactly one reconciles and the others wait to take over.
//!
//! [`Leadership::acquire`] returns once this replica holds the Lease; a task
//! then renews it, and [`Leadership::lost`] resolves if it is lost (another
//! replica took it, or renewals failed until the Lease ran out): the
//! controller must then stop reconciling and exit, to be restarted as a
//! standby. [`Leadership::release`] frees the Lease on a graceful shutdown so
//! a standby takes over at once: a waiting replica watches the Lease and
//! tries again the moment it is freed, instead of sleeping until it expires.

use std::{
    sync::Arc,
    time::{Duration, Instant},
};

use futures::{StreamExt, future::BoxFuture};
use k8s_openapi::api::coordination::v1::Lease;
use kube::{
    Api, Client,
    runtime::{WatchStreamExt, watcher},
};
use kube_lease_manager::{LeaseCreateMode, LeaseManager, LeaseManagerError, LeaseParams};
use tokio::{sync::watch, task::JoinHandle};

use super::{OpsError, OpsSettings, settings::MIN_LEASE_DURATION};

/// Wait after a failed attempt to take or renew the Lease, doubling up to
/// [`MAX_RETRY`].
const FIRST_RETRY: Duration = Duration::from_millis(500);
const MAX_RETRY: Duration = Duration::from_secs(10);

/// This replica holds the Lease. Dropping it stops renewing without freeing
/// the Lease (as a crash would); [`Leadership::release`] frees it.
pub struct Leadership {
    lease: LeaseRef,
    manager: Arc<LeaseManager>,
    keeper: JoinHandle<()>,
    lost: watch::Receiver<Option<String>>,
}

/// The Lease and who this replica is in it.
#[derive(Clone, Debug)]
struct LeaseRef {
    namespace: String,
    name: String,
    identity: String,
    params: LeaseParams,
    /// Renewal starts this long before the Lease ends.
    grace: Duration,
}

impl LeaseRef {
    fn from_settings(client: &Client, settings: &OpsSettings) -> Result<LeaseRef, OpsError> {
        let seconds = settings.lease_duration.as_secs();
        if seconds < MIN_LEASE_DURATION.as_secs() {
            return Err(OpsError::LeaseDuration {
                given: seconds,
                min: MIN_LEASE_DURATION.as_secs(),
            });
        }
        // A third of the duration: with 15 s, renew every 10 s and keep 5 s
        // for a slow API server or clocks apart. 1 <= grace < seconds holds
        // for seconds >= 3, as LeaseParams::new requires.
        let grace = seconds / 3;
        let identity = settings.identity();
        Ok(LeaseRef {
            namespace: settings.lease_namespace(client.default_namespace()),
            name: settings.lease_name.clone(),
            params: LeaseParams::new(identity.clone(), seconds, grace),
            identity,
            grace: Duration::from_secs(grace),
        })
    }

    fn error(&self, action: &'static str, source: LeaseManagerError) -> OpsError {
        OpsError::Lease {
            namespace: self.namespace.clone(),
            name: self.name.clone(),
            action,
            source: Box::new(source),
        }
    }

    async fn manager(&self, client: &Client) -> Result<LeaseManager, OpsError> {
        LeaseManager::new(
            client.clone(),
            &self.name,
            &self.namespace,
            self.params.clone(),
            LeaseCreateMode::AutoCreate,
        )
        .await
        .map_err(|e| self.error("reading or creating the lease", e))
    }
}

impl Leadership {
    /// Waits until this replica holds the Lease `settings` name (creating it
    /// if missing), then keeps renewing it in a task. Fails at once when the
    /// Lease cannot be read or written for a reason retrying will not mend
    /// (such as missing RBAC); other failures are logged and retried.
    pub async fn acquire(client: Client, settings: &OpsSettings) -> Result<Leadership, OpsError> {
        let lease = LeaseRef::from_settings(&client, settings)?;
        tracing::info!(
            lease = %format!("{}/{}", lease.namespace, lease.name),
            identity = %lease.identity,
            "waiting to lead"
        );
        let manager = Arc::new(wait_until_held(&client, &lease).await?);
        tracing::info!(
            lease = %format!("{}/{}", lease.namespace, lease.name),
            identity = %lease.identity,
            "leading"
        );
        let (tx, lost) = watch::channel(None);
        let keeper = tokio::spawn(keep(manager.clone(), lease.grace, tx));
        Ok(Leadership {
            lease,
            manager,
            keeper,
            lost,
        })
    }

    /// This replica's identity in the Lease.
    pub fn identity(&self) -> &str {
        &self.lease.identity
    }

    /// Resolves when this replica no longer holds the Lease, with why. The
    /// controller must then stop reconciling at once and exit non-zero.
    pub fn lost(&self) -> BoxFuture<'static, OpsError> {
        let mut lost = self.lost.clone();
        let lease = self.lease.clone();
        Box::pin(async move {
            let reason = match lost.wait_for(Option::is_some).await {
                Ok(reason) => reason.clone().unwrap_or_default(),
                Err(_) => "the task renewing it stopped".to_string(),
            };
            OpsError::LeaseLost {
                namespace: lease.namespace,
                name: lease.name,
                reason,
            }
        })
    }

    /// Stops renewing and frees the Lease, so a standby replica takes over
    /// at once. Call on graceful shutdown, after reconciling stopped.
    pub async fn release(self) -> Result<(), OpsError> {
        self.keeper.abort();
        let manager = self.manager.clone();
        let lease = self.lease.clone();
        drop(self);
        manager
            .release()
            .await
            .map_err(|e| lease.error("releasing the lease", e))?;
        tracing::info!(
            lease = %format!("{}/{}", lease.namespace, lease.name),
            identity = %lease.identity,
            "released the lease"
        );
        Ok(())
    }
}

impl Drop for Leadership {
    fn drop(&mut self) {
        self.keeper.abort();
    }
}

/// Tries to take the Lease until it is held. While another replica holds
/// it, a watch on the Lease notices the moment it is freed, and a fresh
/// manager (which reads the Lease anew) tries again at once.
async fn wait_until_held(client: &Client, lease: &LeaseRef) -> Result<LeaseManager, OpsError> {
    let api: Api<Lease> = Api::namespaced(client.clone(), &lease.namespace);
    let mut retry = FIRST_RETRY;
    loop {
        let manager = match lease.manager(client).await {
            Ok(manager) => manager,
            Err(e) if is_permanent(&e) => return Err(e),
            Err(e) => {
                tracing::warn!(error = %e, "retrying in {retry:?}");
                tokio::time::sleep(retry).await;
                retry = (retry * 2).min(MAX_RETRY);
                continue;
            }
        };
        tokio::select! {
            biased;
            taken = manager.changed() => match taken {
                Ok(true) => return Ok(manager),
                Ok(false) => {}
                Err(e) => {
                    let e = lease.error("taking the lease", e);
                    if is_permanent(&e) {
                        return Err(e);
                    }
                    tracing::warn!(error = %e, "retrying in {retry:?}");
                    tokio::time::sleep(retry).await;
                    retry = (retry * 2).min(MAX_RETRY);
                }
            },
            () = freed(api.clone(), &lease.name, &lease.identity) => {
                tracing::debug!(lease = %lease.name, "the lease was freed; trying to take it");
                retry = FIRST_RETRY;
            }
        }
    }
}

/// Resolves when the Lease, seen held by another replica, has no holder.
/// Watch errors are retried with the watcher's backoff.
async fn freed(api: Api<Lease>, name: &str, identity: &str) {
    let config = watcher::Config::default().fields(&format!("metadata.name={name}"));
    let mut events = std::pin::pin!(watcher(api, config).default_backoff().applied_objects());
    let mut held_by_another = false;
    while let Some(event) = events.next().await {
        match event {
            Ok(lease) => match lease.spec.and_then(|spec| spec.holder_identity) {
                Some(holder) if holder != identity => held_by_another = true,
                None if held_by_another => return,
                _ => {}
            },
            Err(e) => tracing::debug!(error = %e, lease = %name, "watching the lease"),
        }
    }
    std::future::pending::<()>().await
}

/// Renews the Lease until it is lost, then says why on `lost`. Renewals
/// start `grace` before the Lease ends; when they keep failing for `grace`,
/// the Lease has run out and another replica may take it.
async fn keep(manager: Arc<LeaseManager>, grace: Duration, lost: watch::Sender<Option<String>>) {
    let mut failures = Failures::new(grace);
    loop {
        let call = Instant::now();
        let reason = match manager.changed().await {
            Ok(true) => continue,
            Ok(false) => "another replica holds it".to_string(),
            Err(e) => match failures.failed(call, Instant::now()) {
                Some(wait) => {
                    tracing::warn!(error = %e, "renewing the lease failed; retrying in {wait:?}");
                    tokio::time::sleep(wait).await;
                    continue;
                }
                None => format!("renewing it failed for {}s: {e}", grace.as_secs()),
            },
        };
        tracing::error!(%reason, "lost the lease");
        let _ = lost.send(Some(reason));
        return;
    }
}

/// Renewals failing in a row: since when, and how long to wait before the
/// next try.
#[derive(Debug)]
struct Failures {
    grace: Duration,
    since: Option<Instant>,
    retry: Duration,
}

impl Failures {
    fn new(grace: Duration) -> Self {
        Self {
            grace,
            since: None,
            retry: FIRST_RETRY,
        }
    }

    /// A call to the lease manager that started at `call` failed at `now`:
    /// how long to wait before trying again, or `None` when renewals have
    /// failed for `grace` (the Lease ran out).
    fn failed(&mut self, call: Instant, now: Instant) -> Option<Duration> {
        // A call that ran longer than `grace` renewed at least once before
        // failing: the failures start now, not when the call started (one
        // failed renewal after a long healthy spell must be retried, not
        // taken for a lost Lease).
        let renewed_first = now.duration_since(call) > self.grace;
        if renewed_first {
            self.since = None;
            self.retry = FIRST_RETRY;
        }
        let since = *self
            .since
            .get_or_insert(if renewed_first { now } else { call });
        let failing = now.duration_since(since);
        if failing >= self.grace {
            return None;
        }
        let wait = self.retry.min(self.grace - failing);
        self.retry = (self.retry * 2).min(MAX_RETRY);
        Some(wait)
    }
}

/// Whether retrying cannot help: the API server refused the request itself
/// (forbidden, not found namespace, invalid), not a conflict or an overload.
fn is_permanent(e: &OpsError) -> bool {
    let OpsError::Lease { source, .. } = e else {
        return false;
    };
    let LeaseManagerError::KubeError(kube::Error::Api(status)) = &**source else {
        return false;
    };
    (400..500).contains(&status.code) && !matches!(status.code, 408 | 409 | 429)
}

#[cfg(test)]
mod tests {
    use super::*;

    const GRACE: Duration = Duration::from_secs(5);

    #[test]
    fn one_failed_renewal_after_a_long_healthy_spell_is_retried() {
        let start = Instant::now();
        let mut failures = Failures::new(GRACE);
        // The manager renewed for a minute, then one renewal failed.
        let now = start + Duration::from_secs(60);
        assert_eq!(failures.failed(start, now), Some(FIRST_RETRY));
        // The retry fails at once too: still within the grace, wait longer.
        let again = now + FIRST_RETRY;
        assert_eq!(failures.failed(again, again), Some(FIRST_RETRY * 2));
    }

    #[test]
    fn renewals_failing_for_the_grace_lose_the_lease() {
        let start = Instant::now();
        let mut failures = Failures::new(GRACE);
        let mut now = start + Duration::from_secs(60);
        let mut call = start;
        let mut waits = Vec::new();
        while let Some(wait) = failures.failed(call, now) {
            waits.push(wait);
            assert!(waits.len() < 10, "never gives up: {waits:?}");
            call = now + wait;
            now = call;
        }
        // 0.5 + 1 + 2 s, then what is left of the 5 s.
        assert_eq!(waits.iter().sum::<Duration>(), GRACE, "{waits:?}");
        assert_eq!(now, start + Duration::from_secs(65));
    }

    #[test]
    fn a_success_in_between_starts_the_count_again() {
        let start = Instant::now();
        let mut failures = Failures::new(GRACE);
        let first = start + Duration::from_secs(60);
        assert!(failures.failed(start, first).is_some());
        // The retry renewed and held on for a minute before failing again.
        let later = first + Duration::from_secs(60);
        assert_eq!(failures.failed(first, later), Some(FIRST_RETRY));
    }
}
