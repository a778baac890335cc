//! Reading how sharded controllers split the buckets, as the tests and the
//! bench check it: the bucket map Lease the replicas write.

use k8s_openapi::api::coordination::v1::Lease;
use kube::{Api, ResourceExt};

use crate::ControllerProcess;

/// The bucket map of the replicas whose Leases are in `leases` (the
/// default Lease name): the holder's identity per bucket, `""` for none;
/// empty until it is written.
pub async fn bucket_map(leases: &Api<Lease>) -> Vec<String> {
    leases
        .get_opt("coxswain-controller-buckets")
        .await
        .ok()
        .flatten()
        .and_then(|l| {
            l.annotations()
                .get(coxswain_k8s::shards::MAP_ANNOTATION)
                .cloned()
        })
        .and_then(|text| serde_json::from_str(&text).ok())
        .unwrap_or_default()
}

/// How many buckets of `map` each of the processes `pids` holds
/// (identities end with `-<pid>`); `None` when a bucket is free or held by
/// a process not among them.
pub fn shares(map: &[String], pids: &[u32]) -> Option<Vec<usize>> {
    if map.len() != usize::from(coxswain_k8s::names::BUCKETS) {
        return None;
    }
    let mut counts = vec![0; pids.len()];
    for holder in map {
        let i = pids
            .iter()
            .position(|pid| holder.ends_with(&format!("-{pid}")))?;
        counts[i] += 1;
    }
    Some(counts)
}

/// The process ids of `replicas`, in order.
pub fn pids(replicas: &[ControllerProcess]) -> Vec<u32> {
    replicas.iter().map(ControllerProcess::pid).collect()
}
