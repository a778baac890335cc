//! Leader election against a real API server: of two controllers sharing a
//! Lease, one leads and the other waits; a graceful release hands over at
//! once, a crash (no release) hands over once the Lease runs out, and a
//! leader whose Lease is taken learns that it lost it.

use std::time::Duration;

use coxswain_e2e::TestNamespace;
use coxswain_k8s::ops::{Leadership, OpsError, OpsSettings};
use futures::FutureExt;
use k8s_openapi::{
    api::coordination::v1::Lease, apimachinery::pkg::apis::meta::v1::MicroTime, jiff::Timestamp,
};
use kube::{
    Api,
    api::{Patch, PatchParams},
};
use serde_json::json;

/// Generous bound for anything the cluster or the lease manager must do.
const BOUND: Duration = Duration::from_secs(60);

/// The settings of a replica named `identity` whose Lease lives in `ns` and
/// holds for `duration` without renewal.
fn replica(ns: &TestNamespace, identity: &str, duration: Duration) -> OpsSettings {
    OpsSettings {
        lease_namespace: Some(ns.name().to_string()),
        lease_name: "coxswain-controller".into(),
        lease_duration: duration,
        identity: Some(identity.into()),
        ..OpsSettings::default()
    }
}

async fn holder(ns: &TestNamespace) -> Option<String> {
    let leases: Api<Lease> = ns.api();
    leases
        .get("coxswain-controller")
        .await
        .expect("the lease exists")
        .spec
        .and_then(|spec| spec.holder_identity)
}

async fn lead(ns: &TestNamespace, settings: &OpsSettings) -> Leadership {
    tokio::time::timeout(BOUND, Leadership::acquire(ns.client(), settings))
        .await
        .expect("leads within the bound")
        .expect("leads")
}

/// Starts a second replica waiting for the Lease and checks it waits while
/// `first` leads.
async fn standby(
    ns: &TestNamespace,
    settings: OpsSettings,
    first: &Leadership,
) -> tokio::task::JoinHandle<Result<Leadership, OpsError>> {
    let client = ns.client();
    let second = tokio::spawn(async move { Leadership::acquire(client, &settings).await });
    // Long enough for the second replica to read the Lease and try it; it
    // must still be waiting, and the first must still lead.
    tokio::time::sleep(Duration::from_secs(2)).await;
    assert!(
        !second.is_finished(),
        "a second replica leads beside the first"
    );
    assert_eq!(holder(ns).await.as_deref(), Some(first.identity()));
    assert!(
        first.lost().now_or_never().is_none(),
        "the first lost the lease"
    );
    second
}

#[tokio::test]
async fn a_released_lease_passes_to_the_standby_at_once() {
    let ns = TestNamespace::new().await.expect("namespace");
    // A Lease far longer than the bound: the standby can only lead within
    // the bound because the first replica freed it, not because it ran out.
    let long = Duration::from_secs(600);
    let first = lead(&ns, &replica(&ns, "replica-a", long)).await;
    assert_eq!(first.identity(), "replica-a");
    let second = standby(&ns, replica(&ns, "replica-b", long), &first).await;

    first.release().await.expect("released");
    let second = tokio::time::timeout(BOUND, second)
        .await
        .expect("the standby leads once the lease is freed, long before it would run out")
        .expect("the task ran")
        .expect("leads");
    assert_eq!(second.identity(), "replica-b");
    assert_eq!(holder(&ns).await.as_deref(), Some("replica-b"));
    second.release().await.expect("released");
    assert_eq!(holder(&ns).await, None, "a released lease has no holder");
}

#[tokio::test]
async fn a_crashed_leader_is_replaced_when_its_lease_runs_out() {
    let ns = TestNamespace::new().await.expect("namespace");
    let short = Duration::from_secs(6);
    let first = lead(&ns, &replica(&ns, "replica-a", short)).await;
    let second = standby(&ns, replica(&ns, "replica-b", short), &first).await;

    // Dropped without release: it stops renewing, as a killed process would.
    drop(first);
    let second = tokio::time::timeout(BOUND, second)
        .await
        .expect("the standby leads once the lease runs out")
        .expect("the task ran")
        .expect("leads");
    assert_eq!(holder(&ns).await.as_deref(), Some("replica-b"));
    second.release().await.expect("released");
}

#[tokio::test]
async fn a_leader_whose_lease_is_taken_learns_it_lost() {
    let ns = TestNamespace::new().await.expect("namespace");
    let first = lead(&ns, &replica(&ns, "replica-a", Duration::from_secs(6))).await;
    let lost = first.lost();

    // Another party writes itself in as holder (as a replica that wrongly
    // judged the lease expired would).
    let leases: Api<Lease> = ns.api();
    let now = MicroTime(Timestamp::now());
    let taken =
        json!({"spec": {"holderIdentity": "intruder", "acquireTime": now, "renewTime": now}});
    leases
        .patch(
            "coxswain-controller",
            &PatchParams::default(),
            &Patch::Merge(&taken),
        )
        .await
        .expect("patched");

    let err = tokio::time::timeout(BOUND, lost)
        .await
        .expect("the leader notices at its next renewal");
    let message = err.to_string();
    assert!(
        matches!(err, OpsError::LeaseLost { .. }) && message.contains("another replica holds it"),
        "{message}"
    );
    assert!(message.contains(ns.name()), "{message}");
    drop(first);
    assert_eq!(holder(&ns).await.as_deref(), Some("intruder"));
}

#[tokio::test]
async fn missing_rights_fail_at_once_with_the_lease_named() {
    let ns = TestNamespace::new().await.expect("namespace");
    // A namespace that does not exist: creating the Lease is refused (404),
    // which retrying cannot mend.
    let settings = OpsSettings {
        lease_namespace: Some(format!("{}-missing", ns.name())),
        ..replica(&ns, "replica-a", Duration::from_secs(6))
    };
    let err = tokio::time::timeout(BOUND, Leadership::acquire(ns.client(), &settings))
        .await
        .expect("fails without waiting")
        .err()
        .expect("refused");
    let message = err.to_string();
    assert!(
        message.contains(&format!("{}-missing/coxswain-controller", ns.name())),
        "{message}"
    );
}

/// A TCP relay to the API server that can be cut, as a network partition
/// between one replica and the API server would be: the relay's address
/// and the switch that cuts it (open connections and new ones alike).
async fn relay_to_api_server() -> (std::net::SocketAddr, tokio::sync::watch::Sender<bool>) {
    use tokio::net::{TcpListener, TcpStream};
    coxswain_e2e::client().await.expect("cluster");
    let path = coxswain_e2e::kubeconfig().expect("kubeconfig");
    let config = kube::Config::from_custom_kubeconfig(
        kube::config::Kubeconfig::read_from(&path).expect("readable"),
        &kube::config::KubeConfigOptions::default(),
    )
    .await
    .expect("valid kubeconfig");
    let target = format!(
        "{}:{}",
        config.cluster_url.host().expect("a host"),
        config.cluster_url.port_u16().expect("a port")
    );
    let listener = TcpListener::bind("127.0.0.1:0").await.expect("bind");
    let relay = listener.local_addr().expect("bound");
    let (cut, cut_rx) = tokio::sync::watch::channel(false);
    tokio::spawn(async move {
        let mut stop = cut_rx.clone();
        loop {
            let (mut inbound, _) = tokio::select! {
                accepted = listener.accept() => accepted.expect("accept"),
                _ = stop.wait_for(|cut| *cut) => return,
            };
            let mut outbound = TcpStream::connect(&target).await.expect("the API server");
            let mut stop = cut_rx.clone();
            tokio::spawn(async move {
                tokio::select! {
                    _ = tokio::io::copy_bidirectional(&mut inbound, &mut outbound) => {}
                    _ = stop.wait_for(|cut| *cut) => {}
                }
            });
        }
    });
    (relay, cut)
}

#[tokio::test]
async fn a_leader_cut_off_from_the_api_server_learns_it_lost() {
    let ns = TestNamespace::new().await.expect("namespace");
    let (relay, cut) = relay_to_api_server().await;
    let path = coxswain_e2e::kubeconfig().expect("kubeconfig");
    let mut config = kube::Config::from_custom_kubeconfig(
        kube::config::Kubeconfig::read_from(&path).expect("readable"),
        &kube::config::KubeConfigOptions::default(),
    )
    .await
    .expect("valid kubeconfig");
    config.cluster_url = format!("https://{relay}").parse().expect("a URI");
    let client = kube::Client::try_from(config).expect("a client");
    let settings = replica(&ns, "replica-a", Duration::from_secs(6));
    let first = tokio::time::timeout(BOUND, Leadership::acquire(client, &settings))
        .await
        .expect("leads within the bound")
        .expect("leads");
    let lost = first.lost();

    cut.send_replace(true);
    let err = tokio::time::timeout(BOUND, lost)
        .await
        .expect("the leader gives up once its renewals failed until the lease ran out");
    let message = err.to_string();
    assert!(message.contains("renewing it failed"), "{message}");
    // Nobody renewed it: the lease still names the cut-off replica, whose
    // time is up, so a standby may take it.
    assert_eq!(holder(&ns).await.as_deref(), Some("replica-a"));
}
