//! Shards: three `coxswain controller --sharded` replicas share the runs of
//! `crash.rs`'s flow (Jobs, in-controller http calls, a loop, a fan-out and
//! an approval) by bucket, while replicas are SIGKILLed and restarted at
//! random moments and one is paused (SIGSTOP) for longer than its Lease.
//!
//! Checked: the replicas split the 64 buckets among themselves; after each
//! kill the dead replica's buckets are held by live ones within the Lease's
//! duration plus a bound; a paused replica's buckets move while it sleeps,
//! and on waking it stops acting on them; and the checks of `crash.rs`
//! (every run Succeeded with the right outputs, one Job per attempt, no
//! status going backwards, no call made more than twice) hold throughout.
//!
//! `CRASH_SEED` replays the moments; `SHARD_RUNS` and `SHARD_KILLS` change
//! the sizes (12 and 4).

mod survival;

use std::time::{Duration, Instant};

use coxswain_e2e::shards::{bucket_map, pids, shares};
use coxswain_e2e::{ControllerProcess, Kubectl, TestNamespace, wait_for};
use coxswain_test_support::postgres::FreshDatabase;
use k8s_openapi::api::coordination::v1::Lease;
use kube::Api;
use survival::{Rng, Scene, env_number, job_executable, seed, since_start};

/// The Leases' duration: a dead replica's buckets move after about this.
const LEASE: Duration = Duration::from_secs(3);

/// What a take-over may need beyond the Lease's duration (a tick, a loaded
/// machine); a bound, not a measurement.
const TAKEOVER_SLACK: Duration = Duration::from_secs(20);

const REPLICAS: usize = 3;

fn logs(replicas: &[ControllerProcess]) -> String {
    replicas
        .iter()
        .map(|c| survival::tail(&c.log_text(), 80))
        .collect::<Vec<_>>()
        .join("\n----\n")
}

/// The `coxswain_buckets` gauge a replica serves on `/metrics`.
async fn buckets_gauge(replica: &ControllerProcess) -> Option<usize> {
    let (_, text) = replica.served("/metrics").await?;
    text.lines()
        .find_map(|l| l.strip_prefix("coxswain_buckets "))
        .and_then(|n| n.trim().parse().ok())
}

fn signal(pid: u32, signal: &str) {
    let status = std::process::Command::new("kill")
        .args([signal, &pid.to_string()])
        .status()
        .expect("kill runs");
    assert!(status.success(), "kill {signal} {pid}");
}

/// `count` replicas sharing the Runs of namespace `ns` on a short Lease,
/// with `extra` flags.
async fn start_replicas(ns: &str, count: usize, extra: &[&str]) -> Vec<ControllerProcess> {
    let lease = format!("{}s", LEASE.as_secs());
    let mut flags = vec![
        "--leader-election=true",
        "--sharded=true",
        "--lease-duration",
        &lease,
    ];
    flags.extend_from_slice(extra);
    let mut replicas = Vec::new();
    for _ in 0..count {
        replicas.push(
            ControllerProcess::for_namespace(ns, &flags)
                .await
                .expect("replica"),
        );
    }
    replicas
}

/// Waits until the replicas hold every bucket, each at least `least`;
/// their shares.
async fn wait_split(
    leases: &Api<Lease>,
    replicas: &[ControllerProcess],
    least: usize,
) -> Vec<usize> {
    wait_for(
        "the replicas to split the buckets",
        LEASE * 4 + TAKEOVER_SLACK,
        || async move {
            let map = bucket_map(leases).await;
            Ok(shares(&map, &pids(replicas)).filter(|s| s.iter().all(|n| *n >= least)))
        },
    )
    .await
    .unwrap_or_else(|e| panic!("{e}\n{}", logs(replicas)))
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sharded_replicas_killed_and_paused_finish_every_run_once() {
    let seed = seed();
    let count = env_number("SHARD_RUNS", 12) as i64;
    let kills = env_number("SHARD_KILLS", 4);
    eprintln!("shards: seed {seed} (rerun with CRASH_SEED={seed}), {count} runs, {kills} kills");
    let mut rng = Rng(seed);
    since_start();
    let mut scene = Scene::new().await;
    let exe = job_executable();
    let replicas_flags = ["--job-executable", exe.as_str()];
    let mut replicas = start_replicas(scene.ns.name(), REPLICAS, &replicas_flags).await;
    let leases: Api<Lease> = scene.ns.api();
    let split = wait_split(&leases, &replicas, 16).await;
    eprintln!("shards: the replicas hold {split:?} buckets");
    // Every replica is ready (its caches synced; several tasks wait on the
    // Run store), and its coxswain_buckets gauge says what the map gives it.
    wait_for("every replica ready", TAKEOVER_SLACK, || {
        let replicas = &replicas;
        async move {
            let mut ready = true;
            for replica in replicas {
                ready &= replica
                    .served("/readyz")
                    .await
                    .is_some_and(|(code, _)| code == 200);
            }
            Ok(ready.then_some(()))
        }
    })
    .await
    .unwrap_or_else(|e| panic!("{e}\n{}", logs(&replicas)));
    wait_for(
        "each replica's gauge to match the map",
        TAKEOVER_SLACK,
        || {
            let (leases, replicas) = (&leases, &replicas);
            async move {
                let counts = shares(&bucket_map(leases).await, &pids(replicas));
                let mut gauges = Vec::new();
                for replica in replicas {
                    gauges.push(buckets_gauge(replica).await);
                }
                Ok(
                    (counts.map(|c| c.into_iter().map(Some).collect::<Vec<_>>()) == Some(gauges))
                        .then_some(()),
                )
            }
        },
    )
    .await
    .unwrap_or_else(|e| panic!("{e}\n{}", logs(&replicas)));
    let started = Instant::now();
    scene.start_runs(count);

    let mut takeovers = Vec::new();
    let mut killed = 0;
    let mut paused = false;
    let first = rng
        .between(Duration::ZERO, Duration::from_millis(REPLICAS as u64))
        .as_millis() as usize;
    while killed < kills && scene.unfinished() > 0 {
        tokio::time::sleep(rng.between(Duration::from_millis(500), Duration::from_millis(3000)))
            .await;
        if scene.unfinished() == 0 {
            break;
        }
        // Every replica in turn, from a random one.
        let victim = (first + killed as usize) % REPLICAS;
        if !paused && killed == kills / 2 {
            paused = true;
            pause(&leases, &mut replicas, victim).await;
        }
        let moment = Instant::now();
        replicas[victim].restart().expect("replica restarted");
        killed += 1;
        eprintln!(
            "shards: kill {killed} of replica {victim} at {} ms",
            since_start()
        );
        scene.approve(count as usize * killed as usize / kills as usize);
        let took = wait_for(
            "the dead replica's buckets to move",
            LEASE + TAKEOVER_SLACK,
            || {
                let (leases, replicas) = (&leases, &replicas);
                async move {
                    let map = bucket_map(leases).await;
                    Ok(shares(&map, &pids(replicas)).map(|_| moment.elapsed()))
                }
            },
        )
        .await
        .unwrap_or_else(|e| panic!("{e}\n{}", logs(&replicas)));
        takeovers.push(took);
    }
    scene.approve(usize::MAX);
    let approved = scene.wait_all_over(|| logs(&replicas)).await;
    let figures = scene.check().await;
    assert!(
        killed >= kills,
        "the runs ended after {killed} kills, before the {kills} the test promises (seed {seed})"
    );
    for (i, replica) in replicas.iter().enumerate() {
        let log = replica.log_text();
        assert!(
            log.contains("acting on a new share of the buckets"),
            "replica {i} never acted on a bucket:\n{}",
            logs(&replicas)
        );
        assert!(
            !log.contains("panicked"),
            "replica {i} panicked:\n{}",
            logs(&replicas)
        );
    }
    eprintln!(
        "shards: seed {seed}: {count} runs Succeeded in {:?} over {REPLICAS} replicas with {killed} \
         SIGKILLs and a pause; buckets held by live replicas again {takeovers:?} after each kill \
         (Lease {LEASE:?}); {approved} approvals; {figures:?}",
        started.elapsed()
    );
}

/// Pauses replica `victim` (SIGSTOP) until the others hold every bucket it
/// held, then wakes it (SIGCONT) and checks that it says it stopped acting
/// on its buckets before it takes any back.
async fn pause(leases: &Api<Lease>, replicas: &mut [ControllerProcess], victim: usize) {
    let pid = replicas[victim].pid();
    let mine = format!("-{pid}");
    let before = bucket_map(leases).await;
    let held = before.iter().filter(|h| h.ends_with(&mine)).count();
    signal(pid, "-STOP");
    let moment = Instant::now();
    let moved = wait_for(
        "a paused replica's buckets to move",
        LEASE * 2 + TAKEOVER_SLACK,
        || async {
            let map = bucket_map(leases).await;
            Ok(
                (map.len() == 64 && !map.iter().any(|h| h.ends_with(&mine) || h.is_empty()))
                    .then(|| moment.elapsed()),
            )
        },
    )
    .await;
    signal(pid, "-CONT");
    let moved = moved.unwrap_or_else(|e| panic!("{e}\n{}", logs(replicas)));
    eprintln!("shards: replica {victim} paused; its {held} buckets moved after {moved:?}");
    let log = &replicas[victim];
    wait_for(
        "the woken replica to stop acting",
        LEASE * 2 + TAKEOVER_SLACK,
        || async {
            let text = log.log_text();
            Ok(text.contains("stops acting on every bucket").then_some(()))
        },
    )
    .await
    .unwrap_or_else(|e| panic!("{e}\n{}", logs(replicas)));
}

/// A flow of three conditions whose finished runs are archived and deleted
/// five seconds after they end.
const QUICK: &str = r#"apiVersion: coxswain.dev/v1alpha1
kind: Flow
metadata: {name: quick}
spec:
  retention: {finishedRuns: 5s}
  steps:
    - key: a
      condition: {when: "true"}
    - key: b
      condition: {when: "true"}
    - key: c
      condition: {when: "true"}
"#;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_replica_runs_runs_but_only_the_leader_archives_and_deletes_them() {
    const RUNS: usize = 12;
    let db = FreshDatabase::new("e2e_shard_archive");
    let kubectl = Kubectl::new().await.expect("kubectl");
    kubectl.install_crds().await.expect("CRDs");
    let ns = TestNamespace::new().await.expect("namespace");
    kubectl
        .apply(ns.name(), QUICK)
        .unwrap_or_else(|e| panic!("{e}"));
    let flags = [
        "--records-database",
        db.url.as_str(),
        "--log-level",
        "coxswain_k8s=debug,info",
    ];
    let mut replicas = start_replicas(ns.name(), 2, &flags).await;
    let leases: Api<Lease> = ns.api();
    wait_split(&leases, &replicas, 1).await;
    let (mut names, mut uids) = (Vec::new(), Vec::new());
    for n in 0..RUNS {
        let name = kubectl
            .create_run(ns.name(), "quick", &serde_json::json!({"n": n}))
            .unwrap_or_else(|e| panic!("{e}"));
        // Its uid (whose bucket it is), read before its retention is up.
        let run = kubectl.json(&["get", "run", &name, "-n", ns.name(), "-o", "json"]);
        uids.push(
            run["metadata"]["uid"]
                .as_str()
                .unwrap_or_default()
                .to_string(),
        );
        names.push(name);
    }
    wait_for(
        "every run archived and deleted",
        Duration::from_secs(120),
        || async {
            let left = kubectl.json(&["get", "runs", "-n", ns.name(), "-o", "json"]);
            Ok(left["items"]
                .as_array()
                .is_some_and(|a| a.is_empty())
                .then_some(()))
        },
    )
    .await
    .unwrap_or_else(|e| panic!("{e}\n{}", logs(&replicas)));
    let archived = db.query(&format!(
        "SELECT count(*) FROM runs WHERE phase = 'Succeeded' AND name IN ({})",
        names
            .iter()
            .map(|n| format!("'{n}'"))
            .collect::<Vec<_>>()
            .join(",")
    ));
    assert_eq!(archived, RUNS.to_string(), "{}", logs(&replicas));
    let leader = leases
        .get("coxswain-controller")
        .await
        .ok()
        .and_then(|l| l.spec)
        .and_then(|s| s.holder_identity)
        .unwrap_or_default();
    let leads = |c: &ControllerProcess| leader.ends_with(&format!("-{}", c.pid()));
    assert_eq!(replicas.iter().filter(|c| leads(c)).count(), 1, "{leader}");
    for replica in &replicas {
        let log = replica.log_text();
        // The run's lines saying `what` (the archive's are at debug).
        let said = |what: &str| {
            names
                .iter()
                .filter(|n| {
                    log.lines()
                        .any(|l| l.contains(what) && l.trim_end().ends_with(&format!("run={n}")))
                })
                .count()
        };
        let expected = if leads(replica) { RUNS } else { 0 };
        assert_eq!(
            (said("archive: archived"), said("deleted by retention")),
            (expected, expected),
            "the leader archives and deletes every run, the other none:\n{}",
            logs(&replicas)
        );
    }
    // Both replicas ran runs: each reports its own Events, as the holder
    // of the run's bucket.
    let events = kubectl.json(&["get", "events.events.k8s.io", "-n", ns.name(), "-o", "json"]);
    let mut reporters = std::collections::BTreeSet::new();
    for event in events["items"].as_array().into_iter().flatten() {
        if uids.iter().any(|u| event["regarding"]["uid"] == *u) {
            reporters.insert(
                event["reportingInstance"]
                    .as_str()
                    .unwrap_or_default()
                    .to_string(),
            );
        }
    }
    for (i, replica) in replicas.iter().enumerate() {
        let mine = format!("-{}", replica.pid());
        assert!(
            reporters.iter().any(|r| r.ends_with(&mine)),
            "replica {i} ran none of the runs: reporters {reporters:?}\n{}",
            logs(&replicas)
        );
    }
    // A replica stopped gracefully (SIGTERM) frees its buckets and
    // deletes its member Lease before it exits: the other takes them at
    // its next tick instead of a Lease duration later.
    let gone = &mut replicas[1];
    let mine = format!("-{}", gone.pid());
    signal(gone.pid(), "-TERM");
    let deadline = Instant::now() + Duration::from_secs(60);
    while !gone.exited() {
        assert!(
            Instant::now() < deadline,
            "the stopped replica did not exit"
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    let map = bucket_map(&leases).await;
    assert!(
        !map.iter().any(|h| h.ends_with(&mine)),
        "a replica stopped gracefully still holds buckets: {map:?}"
    );
    let members = leases
        .list(&kube::api::ListParams::default().labels("coxswain.dev/role=shard-member"))
        .await
        .expect("leases");
    assert!(
        !members.items.iter().any(|l| l
            .spec
            .as_ref()
            .and_then(|s| s.holder_identity.as_deref())
            .is_some_and(|h| h.ends_with(&mine))),
        "its member Lease is still there"
    );
    let took = wait_for("the other replica to take every bucket", LEASE, || {
        let (leases, first) = (&leases, replicas[0].pid());
        async move {
            let map = bucket_map(leases).await;
            Ok(map
                .iter()
                .all(|h| h.ends_with(&format!("-{first}")))
                .then_some(()))
        }
    })
    .await;
    took.unwrap_or_else(|e| panic!("{e}\n{}", logs(&replicas)));
}
