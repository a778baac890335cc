//! `coxswain runs` against a real cluster and a real PostgreSQL archive
//! (`e2e/postgres/up`, a fresh database): a controller archives every Run
//! that ends and deletes those past their retention; `coxswain runs list`
//! shows a Run both live and archived once (the live one), and a deleted
//! Run from the archive; `coxswain runs get` prints either.

use std::process::{Command, Output};
use std::time::Duration;

use coxswain_e2e::{Setup, coxswain_bin, wait_for};
use coxswain_test_support::postgres::FreshDatabase;
use serde_json::{Value, json};

const BOUND: Duration = Duration::from_secs(120);

fn flow(name: &str, retention: &str) -> String {
    format!(
        r#"apiVersion: coxswain.dev/v1alpha1
kind: Flow
metadata: {{name: {name}}}
spec:
{retention}  steps:
    - key: hello
      script:
        source: |
          echo '{{"hi": "{name}"}}'
"#
    )
}

/// `coxswain runs ARGS` with no local records file and no settings from
/// the environment.
fn runs(home: &std::path::Path, args: &[&str]) -> Output {
    Command::new(coxswain_bin().expect("the coxswain binary"))
        .arg("runs")
        .args(args)
        .env_remove("COXSWAIN_RECORDS")
        .env_remove("COXSWAIN_RECORDS_DATABASE")
        .env_remove("KUBECONFIG")
        .env("HOME", home)
        .env("XDG_DATA_HOME", home.join("data"))
        .output()
        .expect("coxswain runs")
}

fn text(bytes: &[u8]) -> String {
    String::from_utf8_lossy(bytes).into_owned()
}

fn json_of(o: &Output) -> Value {
    assert_eq!(o.status.code(), Some(0), "{}", text(&o.stderr));
    serde_json::from_slice(&o.stdout)
        .unwrap_or_else(|e| panic!("stdout is JSON ({e}): {}", text(&o.stdout)))
}

#[tokio::test]
async fn runs_shows_a_live_run_once_and_a_deleted_one_from_the_archive() {
    let db = FreshDatabase::new("e2e_runs_cli");
    let s = Setup::new(&["--records-database", db.url.as_str()]).await;
    s.apply(&flow("kept", ""));
    s.apply(&flow("brief", "  retention: {finishedRuns: 2s}\n"));
    let kept = s
        .kubectl
        .create_run(s.ns(), "kept", &json!({}))
        .unwrap_or_else(|e| panic!("{e}"));
    let brief = s
        .kubectl
        .create_run(s.ns(), "brief", &json!({}))
        .unwrap_or_else(|e| panic!("{e}"));
    let live = s
        .kubectl
        .wait_run(s.ns(), &kept, &["Succeeded", "Failed", "Cancelled"], BOUND)
        .await
        .unwrap_or_else(|e| panic!("{e}\n{}", s.logs()));
    assert_eq!(live["status"]["phase"], "Succeeded", "{}", s.logs());
    let kept_uid = live["metadata"]["uid"].as_str().unwrap().to_string();

    let home = tempfile::tempdir().expect("temp dir");
    let kubeconfig = s.kubectl.kubeconfig().display().to_string();
    let ns = s.ns().to_string();
    let url = db.url.clone();
    let both = [
        "--kubeconfig",
        kubeconfig.as_str(),
        "-n",
        ns.as_str(),
        "--database",
        url.as_str(),
    ];

    // The archive alone (the cluster not read) gets both once they ended.
    wait_for("both runs in the archive", BOUND, || async {
        let mut args = vec!["list", "--no-cluster", "-n", &ns, "--database", &url];
        args.extend(["-o", "json"]);
        let o = runs(home.path(), &args);
        let rows = json_of(&o);
        let names: Vec<&str> = rows
            .as_array()
            .into_iter()
            .flatten()
            .filter_map(|r| r["name"].as_str())
            .collect();
        Ok((names.contains(&kept.as_str()) && names.contains(&brief.as_str())).then_some(()))
    })
    .await
    .unwrap_or_else(|e| panic!("{e}\n{}", s.logs()));
    s.wait_deleted("the brief run deleted by retention", "run", &brief, BOUND)
        .await;

    // Cluster and archive together: the kept run once, from the cluster
    // (it is archived too); the deleted one from the archive.
    let mut args = vec!["list", "-o", "json"];
    args.extend(both);
    let rows = json_of(&runs(home.path(), &args));
    let rows = rows.as_array().expect("an array");
    assert_eq!(rows.len(), 2, "{rows:?}");
    let row = |name: &str| {
        rows.iter()
            .find(|r| r["name"] == name)
            .unwrap_or_else(|| panic!("{name} listed: {rows:?}"))
    };
    assert_eq!(row(&kept)["source"], "cluster");
    assert_eq!(row(&kept)["uid"], kept_uid.as_str());
    assert_eq!(row(&kept)["flow"], "kept");
    assert_eq!(row(&brief)["source"], "archive");
    assert_eq!(row(&brief)["phase"], "Succeeded");
    assert_eq!(row(&brief)["flow"], "brief");
    // The table says the same.
    let mut args = vec!["list"];
    args.extend(both);
    let o = runs(home.path(), &args);
    assert_eq!(o.status.code(), Some(0), "{}", text(&o.stderr));
    let table = text(&o.stdout);
    assert!(table.starts_with("NAMESPACE"), "{table}");
    let line = |name: &str| {
        table
            .lines()
            .find(|l| l.split_whitespace().nth(1) == Some(name))
            .unwrap_or_else(|| panic!("{name} in {table}"))
            .to_string()
    };
    assert!(line(&kept).trim_end().ends_with("cluster"), "{table}");
    assert!(line(&brief).trim_end().ends_with("archive"), "{table}");
    let mut args = vec!["list", "--flow", "brief"];
    args.extend(both);
    let o = runs(home.path(), &args);
    assert_eq!(text(&o.stdout).lines().count(), 2, "{}", text(&o.stdout));

    // get: the deleted run from the archive, whole.
    let mut args = vec!["get", brief.as_str(), "-o", "json"];
    args.extend(both);
    let o = runs(home.path(), &args);
    let archived = json_of(&o);
    assert_eq!(archived["metadata"]["name"], brief.as_str());
    assert_eq!(archived["status"]["phase"], "Succeeded");
    assert_eq!(
        archived["status"]["steps"]["hello"]["output"],
        json!({"hi": "brief"})
    );
    assert!(
        text(&o.stderr).contains("from the archive"),
        "{}",
        text(&o.stderr)
    );
    // The kept run: the live object (not a note of the archive).
    let mut args = vec!["get", kept.as_str(), "-o", "yaml"];
    args.extend(both);
    let o = runs(home.path(), &args);
    assert_eq!(o.status.code(), Some(0), "{}", text(&o.stderr));
    let got: Value = serde_yaml::from_slice(&o.stdout).expect("YAML");
    assert_eq!(got["metadata"]["uid"], kept_uid.as_str());
    assert_eq!(got["kind"], "Run");
    assert_eq!(
        got["status"]["steps"]["hello"]["output"],
        json!({"hi": "kept"})
    );
    assert!(
        !text(&o.stderr).contains("from the archive"),
        "the live object: {}",
        text(&o.stderr)
    );
    // Nowhere: exit 1 naming both places.
    let mut args = vec!["get", "no-such-run"];
    args.extend(both);
    let o = runs(home.path(), &args);
    assert_eq!(o.status.code(), Some(1), "{}", text(&o.stderr));
    let message = text(&o.stderr);
    assert!(message.contains("of the cluster"), "{message}");
    assert!(message.contains("of the database"), "{message}");
}
