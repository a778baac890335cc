//! Polling helpers: the cluster converges asynchronously, so tests wait for a
//! state with a generous bound instead of asserting on timing.

use std::{future::Future, time::Duration};

use k8s_openapi::api::batch::v1::Job;
use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition;
use kube::Api;

use crate::{Error, Result};

/// Polls `check` every 250 ms until it returns `Some`, failing after
/// `timeout` with a message naming `what`.
pub async fn wait_for<T, F, Fut>(what: &str, timeout: Duration, mut check: F) -> Result<T>
where
    F: FnMut() -> Fut,
    Fut: Future<Output = Result<Option<T>>>,
{
    let deadline = tokio::time::Instant::now() + timeout;
    loop {
        if let Some(v) = check().await? {
            return Ok(v);
        }
        if tokio::time::Instant::now() >= deadline {
            return Err(Error::Timeout(timeout, what.to_string()));
        }
        tokio::time::sleep(Duration::from_millis(250)).await;
    }
}

/// Waits until the Job has condition `kind` (e.g. `Complete`, `Failed`) with
/// status True and returns the Job; returns early with the Job if it reached
/// the *other* terminal condition, so tests fail fast with its status.
pub async fn wait_for_job_condition(
    jobs: &Api<Job>,
    name: &str,
    kind: &str,
    timeout: Duration,
) -> Result<Job> {
    wait_for(&format!("job {name} condition {kind}"), timeout, || async {
        let job = jobs.get(name).await?;
        let terminal = job
            .status
            .as_ref()
            .and_then(|s| s.conditions.as_ref())
            .map(|cs| {
                cs.iter().any(|c| {
                    c.status == "True"
                        && (c.type_ == "Complete" || c.type_ == "Failed" || c.type_ == kind)
                })
            })
            .unwrap_or(false);
        Ok(terminal.then_some(job))
    })
    .await
}

/// Waits until the CustomResourceDefinition `name` is established: its
/// kind can be served from then on.
pub async fn wait_crd_established(
    crds: &Api<CustomResourceDefinition>,
    name: &str,
    timeout: Duration,
) -> Result<()> {
    wait_for(&format!("{name} established"), timeout, || async {
        let c = crds.get(name).await?;
        let ok = c.status.and_then(|s| s.conditions).is_some_and(|cs| {
            cs.iter()
                .any(|c| c.type_ == "Established" && c.status == "True")
        });
        Ok(ok.then_some(()))
    })
    .await
}

/// Creates `object` through `api`, retrying while the API server's
/// discovery does not know its kind yet (404, as just after its CRD is
/// established); fails after `timeout`, or at once on any other error.
pub async fn create_when_discovered<K>(api: &Api<K>, object: &K, timeout: Duration) -> Result<K>
where
    K: kube::Resource
        + Clone
        + k8s_openapi::serde::de::DeserializeOwned
        + k8s_openapi::serde::Serialize
        + std::fmt::Debug,
{
    wait_for("the object is created", timeout, || async {
        match api.create(&kube::api::PostParams::default(), object).await {
            Ok(o) => Ok(Some(o)),
            Err(kube::Error::Api(e)) if e.code == 404 => Ok(None),
            Err(e) => Err(e.into()),
        }
    })
    .await
}
