//! Failover: two `coxswain controller` replicas with leader election on a
//! short Lease; the leader is SIGKILLed mid-run (Jobs, calls and loops in
//! flight) and the standby takes the Lease within its duration plus a
//! bound, then finishes every run right, with no duplicate Job, no status
//! going backwards and no call made more than twice (the checks of
//! `crash.rs`, in `survival/`).

mod survival;

use std::time::{Duration, Instant};

use coxswain_e2e::{ControllerProcess, wait_for};
use k8s_openapi::api::coordination::v1::Lease;
use kube::Api;
use survival::{Scene, env_number};

/// The Lease's duration: a killed leader is replaced after about this long.
const LEASE: Duration = Duration::from_secs(5);

/// What the standby may take beyond the Lease's duration to lead (its
/// retry interval, a loaded machine); a bound, not a measurement.
const TAKEOVER_SLACK: Duration = Duration::from_secs(30);

async fn holder(leases: &Api<Lease>) -> Option<String> {
    leases
        .get_opt("coxswain-controller")
        .await
        .ok()
        .flatten()
        .and_then(|l| l.spec)
        .and_then(|s| s.holder_identity)
}

/// Which of `replicas` the Lease names (identities end with `-<pid>`).
fn index_of(replicas: &[ControllerProcess], holder: &str) -> Option<usize> {
    replicas
        .iter()
        .position(|c| holder.ends_with(&format!("-{}", c.pid())))
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_standby_takes_over_a_killed_leader_and_finishes_every_run() {
    let count = env_number("FAILOVER_RUNS", 10) as i64;
    let mut scene = Scene::new().await;
    let lease = format!("{}s", LEASE.as_secs());
    let exe = survival::job_executable();
    let flags = [
        "--leader-election=true",
        "--lease-duration",
        &lease,
        "--job-executable",
        &exe,
    ];
    let mut replicas = Vec::new();
    for _ in 0..2 {
        replicas.push(
            ControllerProcess::for_namespace(scene.ns.name(), &flags)
                .await
                .expect("replica"),
        );
    }
    let logs = |replicas: &[ControllerProcess]| {
        replicas
            .iter()
            .map(|c| c.log_text())
            .collect::<Vec<_>>()
            .join("\n----\n")
    };
    let leases: Api<Lease> = scene.ns.api();
    let leader = wait_for("a leader", Duration::from_secs(60), || async {
        Ok(holder(&leases).await.and_then(|h| index_of(&replicas, &h)))
    })
    .await
    .unwrap_or_else(|e| panic!("{e}\n{}", logs(&replicas)));
    // Both are ready: the standby waiting, the leader with its caches
    // synced (several of its tasks wait on the Run store at once).
    wait_for("both replicas ready", TAKEOVER_SLACK, || async {
        let mut ready = true;
        for replica in &replicas {
            ready &= replica
                .served("/readyz")
                .await
                .is_some_and(|(code, _)| code == 200);
        }
        Ok(ready.then_some(()))
    })
    .await
    .unwrap_or_else(|e| panic!("{e}\n{}", logs(&replicas)));
    scene.start_runs(count);

    // Mid-run: calls have been made and Jobs are running or done; the
    // runs wait for their approvals until the standby leads.
    wait_for("calls under way", Duration::from_secs(300), || async {
        Ok((scene.calls.all().len() >= count as usize).then_some(()))
    })
    .await
    .unwrap_or_else(|e| panic!("{e}\n{}", logs(&replicas)));
    assert!(scene.unfinished() > 0);
    replicas[leader].kill();
    let killed = Instant::now();
    let standby = 1 - leader;
    eprintln!(
        "failover: killed the leader (pid {}) with {} calls made and {} runs unfinished",
        replicas[leader].pid(),
        scene.calls.all().len(),
        scene.unfinished()
    );
    let took = wait_for(
        "the standby to take the Lease",
        LEASE + TAKEOVER_SLACK,
        || async {
            let h = holder(&leases).await.unwrap_or_default();
            Ok((index_of(&replicas, &h) == Some(standby)).then(|| killed.elapsed()))
        },
    )
    .await
    .unwrap_or_else(|e| panic!("{e}\n{}", logs(&replicas)));
    eprintln!("failover: the standby leads {took:?} after the kill (Lease {LEASE:?})");

    scene.approve(usize::MAX);
    let approved = scene.wait_all_over(|| logs(&replicas)).await;
    let figures = scene.check().await;
    assert!(
        replicas[standby].log_text().contains("reconciling Runs"),
        "the standby never reconciled:\n{}",
        logs(&replicas)
    );
    eprintln!(
        "failover: {count} runs Succeeded; takeover {took:?} after the kill; \
         {approved} approvals; {figures:?}"
    );
}
