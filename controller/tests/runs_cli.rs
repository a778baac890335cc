//! `coxswain runs list/get` and `coxswain graph --archived` with the real
//! binary, over archives: the local records file `coxswain run` archives
//! into, and a PostgreSQL archive (a real server, `e2e/postgres/up` or
//! `COXSWAIN_POSTGRES_URL`, a fresh database per test, dropped after:
//! `coxswain_test_support::postgres::FreshDatabase`).
//! Every command runs with `HOME`, `XDG_DATA_HOME` and `KUBECONFIG` pointed
//! into a temporary folder: no user data and no cluster is read.

use std::path::Path;
use std::process::Output;

use coxswain_records::{ArchivedRun, PgSettings, Store};
use coxswain_test_support::postgres::FreshDatabase;
use serde_json::{Value, json};

mod common;

use common::{Place, exits, says, stderr, stdout};

/// The temporary folder of one test.
fn place() -> Place {
    Place::new("coxswain-runs-cli-")
}

impl Place {
    /// `coxswain run FLOW --records FILE --input INPUT -q`, exiting `code`.
    fn run(&self, flow: &str, input: &Value, code: i32) {
        let o = self.run_flow(flow, input, &["--quiet"]);
        assert_eq!(o.status.code(), Some(code), "{}", stderr(&o));
    }

    /// `coxswain runs ARGS --records FILE`.
    fn runs(&self, args: &[&str]) -> Output {
        self.with_records("runs", args)
    }
}

fn json_of(o: &Output) -> Value {
    exits(o, 0);
    serde_json::from_slice(&o.stdout)
        .unwrap_or_else(|e| panic!("stdout is JSON ({e}): {}\n{}", stdout(o), stderr(o)))
}

fn flow(name: &str, script: &str) -> String {
    format!(
        r#"apiVersion: coxswain.dev/v1alpha1
kind: Flow
metadata: {{name: {name}}}
spec:
  steps:
    - key: first
      script:
        source: |
          echo '{{"n": 1}}'
    - key: second
      script:
        source: |
          {script}
"#
    )
}

/// Two flows run locally: `good` twice (succeeds), `bad` once (fails).
fn three_local_runs(place: &Place) -> (String, String) {
    let good = place.file("good.yaml", &flow("good", "echo done"));
    let bad = place.file("bad.yaml", &flow("bad", "echo broken >&2; exit 3"));
    place.run(&good, &json!({"n": 1}), 0);
    place.run(&bad, &json!({}), 1);
    place.run(&good, &json!({"n": 2}), 0);
    (good, bad)
}

/// Checks that a command exited `code`, not finding a run that lives in
/// another namespace than the database's default (`why` names the case).
fn not_in_default_namespace(o: &Output, code: i32, why: &str) {
    assert_eq!(
        o.status.code(),
        Some(code),
        "{why}: {}{}",
        stdout(o),
        stderr(o)
    );
    says(stderr(o), "namespace default of the database");
}

/// The `(NAME, FLOW, PHASE, SOURCE)` columns of a `runs list` table.
fn table(o: &Output) -> Vec<[String; 4]> {
    exits(o, 0);
    let text = stdout(o);
    let mut lines = text.lines();
    let header: Vec<&str> = lines
        .next()
        .unwrap_or_default()
        .split_whitespace()
        .collect();
    let expected = "NAMESPACE NAME FLOW PHASE STARTED FINISHED SOURCE";
    assert_eq!(header.join(" "), expected, "{text}");
    lines
        .map(|l| {
            let c: Vec<&str> = l.split_whitespace().collect();
            assert_eq!(c.len(), 7, "seven columns: {l}");
            [c[1], c[2], c[3], c[6]].map(String::from)
        })
        .collect()
}

#[test]
fn runs_list_shows_local_runs_newest_first_with_their_phases() {
    let place = place();
    three_local_runs(&place);

    let o = place.runs(&["list"]);
    let rows = table(&o);
    let flows: Vec<(&str, &str, &str)> = rows
        .iter()
        .map(|r| (r[1].as_str(), r[2].as_str(), r[3].as_str()))
        .collect();
    assert_eq!(
        flows,
        [
            ("good", "Succeeded", "archive"),
            ("bad", "Failed", "archive"),
            ("good", "Succeeded", "archive"),
        ],
        "newest first: {}",
        stdout(&o)
    );
    assert!(
        stdout(&o).lines().skip(1).all(|l| l.starts_with("local ")),
        "local runs are in namespace local: {}",
        stdout(&o)
    );
    assert!(
        stderr(&o).contains("no kubeconfig"),
        "the cluster is skipped with a note: {}",
        stderr(&o)
    );

    // Filters.
    let rows = table(&place.runs(&["list", "--flow", "good"]));
    assert_eq!(rows.len(), 2);
    assert!(rows.iter().all(|r| r[1] == "good"));
    let rows = table(&place.runs(&["list", "--phase", "Failed"]));
    assert_eq!(rows.len(), 1);
    assert_eq!(
        (rows[0][1].as_str(), rows[0][2].as_str()),
        ("bad", "Failed")
    );
    let o = place.runs(&["list", "--phase", "failed", "--flow", "good"]);
    assert!(table(&o).is_empty(), "{}", stdout(&o));
    says(stderr(&o), "no runs found");
    let rows = table(&place.runs(&["list", "--limit", "1"]));
    assert_eq!(rows.len(), 1);
    // Another namespace has none; every namespace has them all.
    assert!(table(&place.runs(&["list", "-n", "team-a"])).is_empty());
    assert_eq!(table(&place.runs(&["list", "-A"])).len(), 3);

    // JSON: one object per run, with its times.
    let all = json_of(&place.runs(&["list", "-o", "json"]));
    let all = all.as_array().expect("an array");
    assert_eq!(all.len(), 3);
    for run in all {
        for field in [
            "namespace",
            "name",
            "uid",
            "flow",
            "phase",
            "started",
            "finished",
        ] {
            assert!(
                run[field].as_str().is_some_and(|s| !s.is_empty()),
                "{field}: {run}"
            );
        }
        assert_eq!(run["source"], "archive");
    }
    let finished: Vec<&str> = all
        .iter()
        .map(|r| r["finished"].as_str().unwrap())
        .collect();
    let mut sorted = finished.clone();
    sorted.sort_unstable_by(|a, b| b.cmp(a));
    assert_eq!(finished, sorted, "newest first");
}

#[test]
fn runs_get_prints_the_archived_run_with_its_steps() {
    let place = place();
    three_local_runs(&place);
    let listed = json_of(&place.runs(&["list", "--phase", "Failed", "-o", "json"]));
    let name = listed[0]["name"].as_str().expect("a name").to_string();

    let o = place.runs(&["get", &name, "-o", "json"]);
    let run = json_of(&o);
    assert_eq!(run["kind"], "Run");
    assert_eq!(run["apiVersion"], "coxswain.dev/v1alpha1");
    assert_eq!(run["metadata"]["name"], name.as_str());
    assert_eq!(run["metadata"]["uid"], listed[0]["uid"]);
    assert_eq!(run["spec"]["flowRef"]["name"], "bad");
    let status = &run["status"];
    assert_eq!(status["phase"], "Failed");
    assert_eq!(status["steps"]["first"]["status"], "completed");
    assert_eq!(status["steps"]["first"]["output"], json!({"n": 1}));
    assert_eq!(status["steps"]["second"]["status"], "failed");
    assert!(
        status["steps"]["second"]["error"].to_string().contains('3'),
        "the exit code: {}",
        status["steps"]["second"]
    );
    says(stderr(&o), "from the archive");

    // YAML, the same object.
    let o = place.runs(&["get", &name, "-o", "yaml"]);
    exits(&o, 0);
    let yaml: Value = serde_yaml::from_slice(&o.stdout).expect("stdout is YAML");
    assert_eq!(yaml, run);

    // Missing: exit 1 naming where it looked.
    let o = place.runs(&["get", "no-such-run"]);
    exits(&o, 1);
    says(stderr(&o), "no run `no-such-run`");
    says(stderr(&o), "namespace local");
    assert_eq!(stdout(&o), "");
}

#[test]
fn the_cluster_asked_for_and_missing_is_an_error_and_bad_options_exit_2() {
    let place = place();
    three_local_runs(&place);
    let o = place.runs(&["list", "--cluster"]);
    exits(&o, 1);
    says(stderr(&o), "the cluster");
    assert_eq!(stdout(&o), "", "no partial list");
    // --no-cluster: quietly the archive.
    let o = place.runs(&["list", "--no-cluster"]);
    assert_eq!(table(&o).len(), 3);
    assert_eq!(stderr(&o), "");

    for bad in [
        &["list", "--phase", "done"][..],
        &["list", "--since", "yesterday"],
        &["list", "-A", "-n", "x"],
        &["list", "--limit", "0"],
    ] {
        let o = place.runs(bad);
        assert_eq!(o.status.code(), Some(2), "{bad:?}: {}", stderr(&o));
    }
    let o = place.runs(&["list", "--phase", "done"]);
    assert!(
        stderr(&o).contains("Succeeded"),
        "names the phases: {}",
        stderr(&o)
    );
}

fn archived(
    namespace: &str,
    name: &str,
    uid: &str,
    flow: &str,
    phase: &str,
    finished: &str,
) -> ArchivedRun {
    ArchivedRun {
        namespace: namespace.into(),
        name: name.into(),
        uid: uid.into(),
        flow: flow.into(),
        phase: phase.into(),
        created: "2020-01-01T00:00:00Z".into(),
        finished: Some(finished.into()),
        flow_digest: None,
        run: json!({
            "apiVersion": "coxswain.dev/v1alpha1",
            "kind": "Run",
            "metadata": {"name": name, "namespace": namespace, "uid": uid},
            "spec": {"flowRef": {"name": flow}},
            "status": {"phase": phase, "finishedAt": finished,
                       "steps": {"first": {"status": "completed", "output": {"from": name}}}},
        }),
        offloaded: json!({}),
    }
}

fn block_on<F: std::future::Future>(f: F) -> F::Output {
    tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .expect("runtime")
        .block_on(f)
}

#[test]
fn since_keeps_what_ended_after_it_and_one_uid_is_shown_once() {
    let place = place();
    three_local_runs(&place);
    // An old run archived straight into the same file, and the same uid
    // archived twice (the second copy replaces the first).
    block_on(async {
        let store = Store::open_sqlite(Path::new(&place.records()))
            .await
            .unwrap();
        store
            .archive(&archived(
                "local",
                "old",
                "u-old",
                "good",
                "Succeeded",
                "2020-01-01T00:05:00Z",
            ))
            .await
            .unwrap();
        for phase in ["Failed", "Cancelled"] {
            store
                .archive(&archived(
                    "local",
                    "twice",
                    "u-twice",
                    "good",
                    phase,
                    "2020-01-02T00:00:00Z",
                ))
                .await
                .unwrap();
        }
    });
    let all = table(&place.runs(&["list"]));
    let names: Vec<&str> = all.iter().map(|r| r[0].as_str()).collect();
    assert_eq!(all.len(), 5, "{all:?}");
    assert_eq!(&names[3..], ["twice", "old"], "oldest last: {all:?}");
    assert_eq!(all[3][2], "Cancelled");

    let recent = table(&place.runs(&["list", "--since", "1h"]));
    assert_eq!(recent.len(), 3, "{recent:?}");
    assert!(recent.iter().all(|r| r[0].starts_with("local-")));
    let since_2020 = table(&place.runs(&["list", "--since", "2020-01-01T12:00:00+00:00"]));
    assert_eq!(since_2020.len(), 4, "{since_2020:?}");
    assert!(!since_2020.iter().any(|r| r[0] == "old"));
}

#[test]
fn graph_draws_an_archived_run_from_the_records_file() {
    let place = place();
    let (good, bad) = three_local_runs(&place);
    let listed = json_of(&place.runs(&["list", "--flow", "bad", "-o", "json"]));
    let name = listed[0]["name"].as_str().unwrap().to_string();
    let records = place.records();

    let o = place.coxswain(&["graph", &bad, "--archived", &name, "--records", &records]);
    exits(&o, 0);
    let diagram = stdout(&o);
    assert!(
        diagram.contains("first<br/>script · completed"),
        "{diagram}"
    );
    assert!(diagram.contains("second<br/>script · failed"), "{diagram}");
    assert_eq!(stderr(&o), "", "same flow, same digest: no warning");

    // The same run drawn over another file's flow: a warning naming both.
    let o = place.coxswain(&["graph", &good, "--archived", &name, "--records", &records]);
    exits(&o, 0);
    says(stderr(&o), "is a run of flow `bad`, not of `good`");

    let o = place.coxswain(&["graph", &bad, "--archived", "nope", "--records", &records]);
    exits(&o, 2);
    says(stderr(&o), "no archived run `nope`");

    let o = place.coxswain(&["graph", &bad, "--archived", &name, "--record", "x.json"]);
    assert_eq!(o.status.code(), Some(2), "--archived or --record, not both");
}

// ---------------------------------------------------------------------------
// PostgreSQL

#[test]
fn runs_list_and_get_read_a_clusters_postgresql_archive() {
    let db = FreshDatabase::new("coxswain_runs_cli");
    block_on(async {
        let store = Store::connect_postgres(&db.url, PgSettings::default())
            .await
            .expect("connect");
        for run in [
            archived(
                "default",
                "a-1",
                "u-a1",
                "tickets",
                "Succeeded",
                "2026-05-01T10:00:00Z",
            ),
            archived(
                "default",
                "a-2",
                "u-a2",
                "tickets",
                "Failed",
                "2026-05-01T11:00:00Z",
            ),
            archived(
                "default",
                "b-1",
                "u-b1",
                "deploy",
                "Succeeded",
                "2026-05-01T09:00:00Z",
            ),
            archived(
                "team-a",
                "t-1",
                "u-t1",
                "tickets",
                "Succeeded",
                "2026-05-01T12:00:00Z",
            ),
        ] {
            store.archive(&run).await.expect("archive");
        }
    });
    let place = place();
    let url = db.url.clone();
    let runs = |args: &[&str]| {
        let mut all = vec!["runs"];
        all.extend_from_slice(args);
        all.extend(["--database", url.as_str()]);
        place.coxswain(&all)
    };

    // Without a kubeconfig, the database's namespace is `default`; the local
    // file is not read when a database is named.
    let rows = table(&runs(&["list"]));
    let names: Vec<&str> = rows.iter().map(|r| r[0].as_str()).collect();
    assert_eq!(names, ["a-2", "a-1", "b-1"], "{rows:?}");
    assert!(rows.iter().all(|r| r[3] == "archive"));
    let rows = table(&runs(&["list", "--flow", "tickets", "--phase", "Failed"]));
    assert_eq!(rows.len(), 1);
    assert_eq!(rows[0][0], "a-2");
    let rows = table(&runs(&["list", "-n", "team-a"]));
    assert_eq!(rows.len(), 1);
    assert_eq!(rows[0][0], "t-1");
    let rows = table(&runs(&["list", "-A", "--since", "2026-05-01T10:00:00Z"]));
    let names: Vec<&str> = rows.iter().map(|r| r[0].as_str()).collect();
    assert_eq!(names, ["t-1", "a-2", "a-1"], "{rows:?}");

    let run = json_of(&runs(&["get", "a-2", "-o", "json"]));
    assert_eq!(run["metadata"]["uid"], "u-a2");
    assert_eq!(run["status"]["phase"], "Failed");
    assert_eq!(
        run["status"]["steps"]["first"]["output"],
        json!({"from": "a-2"})
    );
    let o = runs(&["get", "t-1"]);
    not_in_default_namespace(&o, 1, "another namespace");
    let run = json_of(&runs(&["get", "t-1", "-n", "team-a"]));
    assert_eq!(run["metadata"]["uid"], "u-t1");

    // The database and a local file together: both archives, merged.
    three_local_runs(&place);
    let records = place.records();
    let rows = table(&runs(&["list", "-A", "--records", &records]));
    assert_eq!(rows.len(), 7, "{rows:?}");
    assert_eq!(
        rows.iter().filter(|r| r[0].starts_with("local-")).count(),
        3,
        "{rows:?}"
    );

    // graph --archived reads the database too.
    let tickets = place.file("tickets.yaml", &flow("tickets", "echo ok"));
    let graph = |run: &str, options: &[&str]| {
        let mut all = vec!["graph", &tickets, "--archived", run, "--database", &url];
        all.extend_from_slice(options);
        place.coxswain(&all)
    };
    let o = graph("a-1", &["--format", "dot"]);
    exits(&o, 0);
    assert!(stdout(&o).starts_with("digraph"), "{}", stdout(&o));
    says(stdout(&o), r#"label="first\nscript · completed""#);
    let o = graph("t-1", &[]);
    not_in_default_namespace(&o, 2, "in namespace team-a only");
    let o = graph("t-1", &["-n", "team-a"]);
    exits(&o, 0);

    // A database that cannot be reached is an error, not an empty list.
    let o = place.coxswain(&[
        "runs",
        "list",
        "--database",
        "postgres://coxswain@127.0.0.1:1/none",
    ]);
    exits(&o, 1);
    says(stderr(&o), "--database");
}
