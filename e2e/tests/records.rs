//! Stored records on the cluster, against a real PostgreSQL (Debian's, from
//! `e2e/postgres/up`, a fresh database per test): saves and lookups driven
//! with kubectl as people drive them, the lookup's records as a script and
//! an agent (a stand-in OpenAI-compatible server) receive them, one version
//! per attempt across controller SIGKILLs mid-save, namespaces apart, the
//! candidate bound, admission's refusals, and finished Runs archived then
//! deleted by retention.

use std::sync::{Arc, Mutex};
use std::time::Duration;

use axum::Json;
use axum::extract::State;
use axum::routing::post;
use coxswain_e2e::{Setup, wait_for};
use coxswain_test_support::postgres::FreshDatabase;
use serde_json::{Value, json};

const BOUND: Duration = Duration::from_secs(120);

/// The flow of these tests: fetch a ticket, save it, then look up the
/// tickets of its component (newest first) for a script and an agent.
const TICKETS: &str = r#"apiVersion: coxswain.dev/v1alpha1
kind: Flow
metadata: {name: tickets}
spec:
  steps:
    - key: fetch
      input: {id: $input.id, component: $input.component}
      script:
        source: |
          set -e
          id=$(sed 's/^{"data":"\(.*\)"}$/\1/' "$INPUTS/id")
          component=$(sed 's/^{"data":"\(.*\)"}$/\1/' "$INPUTS/component")
          printf '{"id": "%s", "component": "%s", "priority": 3}' "$id" "$component"
    - key: remember
      save: {collection: tickets, key: $steps.fetch.output.id}
    - key: triage
      lookup:
        - name: similar
          collection: tickets
          where: '$record.value.component == $steps.fetch.output.component and $record.value.priority >= 2'
          orderBy: $record.savedAt
          descending: true
          limit: 20
      script:
        source: cat "$INPUTS/similar"
    - key: advise
      lookup:
        - {name: similar, collection: tickets, where: '$record.value.component == $steps.fetch.output.component'}
      agent: {prompt: "Suggest a fix from the similar tickets.", give: [fetch]}
"#;

/// What the stand-in model server was asked: each request's body.
type Asked = Arc<Mutex<Vec<Value>>>;

/// An OpenAI-compatible Chat Completions stand-in on 127.0.0.1 that
/// answers "ok" and keeps every request; its base URL.
async fn model_server() -> (String, Asked) {
    async fn complete(State(asked): State<Asked>, Json(body): Json<Value>) -> Json<Value> {
        asked.lock().unwrap_or_else(|e| e.into_inner()).push(body);
        Json(json!({
            "id": "chatcmpl-1", "object": "chat.completion", "created": 0, "model": "small",
            "choices": [{"index": 0, "finish_reason": "stop",
                         "message": {"role": "assistant", "content": "restart the db"}}],
            "usage": {"prompt_tokens": 10, "completion_tokens": 3, "total_tokens": 13}
        }))
    }
    let asked = Asked::default();
    let app = axum::Router::new()
        .route("/v1/chat/completions", post(complete))
        .with_state(asked.clone());
    let addr = coxswain_e2e::serve_on_loopback(app).await;
    (format!("http://{addr}/v1"), asked)
}

async fn wait_run(s: &Setup, run: &str) -> Value {
    s.kubectl
        .wait_run(s.ns(), run, &["Succeeded", "Failed", "Cancelled"], BOUND)
        .await
        .unwrap_or_else(|e| panic!("{e}\n{}", s.logs()))
}

fn start(s: &Setup, flow: &str, input: &Value) -> String {
    s.kubectl
        .create_run(s.ns(), flow, input)
        .unwrap_or_else(|e| panic!("{e}"))
}

fn keys(records: &Value) -> Vec<&str> {
    records
        .as_array()
        .map(|a| a.iter().filter_map(|r| r["key"].as_str()).collect())
        .unwrap_or_default()
}

#[tokio::test]
async fn a_save_is_seen_by_the_next_run_as_a_script_and_an_agent_receive_it() {
    let db = FreshDatabase::new("e2e_records");
    let (model, asked) = model_server().await;
    let flags = [
        "--records-database",
        db.url.as_str(),
        "--agent-url",
        model.as_str(),
        "--agent-model",
        "small",
    ];
    let s = Setup::new(&flags).await;
    s.apply(TICKETS);
    let first = start(&s, "tickets", &json!({"id": "t1", "component": "db"}));
    let r = wait_run(&s, &first).await;
    assert_eq!(r["status"]["phase"], "Succeeded", "{r:#}\n{}", s.logs());
    assert_eq!(
        r["status"]["steps"]["remember"]["output"],
        json!({"collection": "tickets", "key": "t1", "version": 1, "created": true})
    );
    // Started back to back: the second run's lookup reads the first's save
    // (and its own, made just before).
    let second = start(&s, "tickets", &json!({"id": "t2", "component": "db"}));
    let r = wait_run(&s, &second).await;
    let status = &r["status"];
    assert_eq!(status["phase"], "Succeeded", "{r:#}\n{}", s.logs());
    let seen = &status["steps"]["triage"]["output"];
    assert_eq!(keys(seen), ["t2", "t1"], "newest first: {seen:#}");
    assert_eq!(
        seen[1]["value"],
        json!({"id": "t1", "component": "db", "priority": 3})
    );
    assert_eq!(seen[1]["run"], first.as_str());
    assert_eq!(seen[1]["step"], "remember");
    // The attempt keeps what it saw.
    assert_eq!(
        status["steps"]["triage"]["attempts"][0]["lookups"]["similar"], *seen,
        "{status:#}"
    );
    // The agent was given the same records as an input of its own.
    let bodies = asked.lock().unwrap_or_else(|e| e.into_inner()).clone();
    let prompt = bodies
        .last()
        .map(|b| b["messages"].to_string())
        .unwrap_or_default();
    assert!(
        prompt.contains("similar") && prompt.contains("t1") && prompt.contains("t2"),
        "{prompt}"
    );
    // A third save of an existing key makes version 2.
    let again = start(&s, "tickets", &json!({"id": "t1", "component": "db"}));
    let r = wait_run(&s, &again).await;
    assert_eq!(
        r["status"]["steps"]["remember"]["output"],
        json!({"collection": "tickets", "key": "t1", "version": 2, "created": false})
    );

    // Another namespace, the same database and collection: nothing of
    // the first namespace's records.
    let other = Setup::new(&flags).await;
    other.apply(TICKETS);
    let theirs = start(&other, "tickets", &json!({"id": "x9", "component": "db"}));
    let r = wait_run(&other, &theirs).await;
    assert_eq!(r["status"]["phase"], "Succeeded", "{r:#}\n{}", other.logs());
    assert_eq!(keys(&r["status"]["steps"]["triage"]["output"]), ["x9"]);
    let namespaces =
        db.query("SELECT string_agg(DISTINCT namespace, ',' ORDER BY namespace) FROM records");
    let mut expected = [s.ns(), other.ns()];
    expected.sort();
    assert_eq!(namespaces, expected.join(","));
}

/// One save per part; `maxConcurrency` keeps the run long enough for the
/// kills to land among its saves.
const MANY: &str = r#"apiVersion: coxswain.dev/v1alpha1
kind: Flow
metadata: {name: many}
spec:
  steps:
    - key: keep
      parallel:
        items: $input.keys
        maxConcurrency: 4
        step:
          save: {collection: many, key: $item, value: {key: $item}}
"#;

#[tokio::test]
async fn ten_sigkills_mid_save_leave_one_version_per_attempt() {
    let db = FreshDatabase::new("e2e_kills");
    let mut s = Setup::new(&["--records-database", db.url.as_str()]).await;
    s.apply(MANY);
    let keys: Vec<String> = (0..60).map(|i| format!("k{i:02}")).collect();
    let run = start(&s, "many", &json!({"keys": keys}));
    let mut kills = 0;
    while kills < 10 {
        tokio::time::sleep(Duration::from_millis(150 + 40 * kills)).await;
        let saved: usize = db
            .query("SELECT count(*) FROM records WHERE collection = 'many'")
            .parse()
            .unwrap_or(0);
        if saved >= keys.len() {
            break;
        }
        s.controllers[0].restart().expect("restart");
        kills += 1;
    }
    let r = wait_run(&s, &run).await;
    assert_eq!(r["status"]["phase"], "Succeeded", "{r:#}\n{}", s.logs());
    assert!(
        kills >= 3,
        "only {kills} kills landed before the saves were done"
    );
    let versions = db.query(
        "SELECT count(*), min(version), max(version) FROM records WHERE collection = 'many'",
    );
    assert_eq!(versions, "60|1|1", "every key saved once ({kills} kills)");
    let attempts =
        db.query("SELECT count(*), count(DISTINCT key) FROM saves WHERE collection = 'many'");
    let parts = &r["status"]["steps"]["keep"]["parts"];
    let tried: usize = parts
        .as_array()
        .map(|p| {
            p.iter()
                .map(|p| p["attempts"].as_array().map_or(0, Vec::len))
                .sum()
        })
        .unwrap_or(0);
    assert_eq!(attempts, format!("{tried}|60"), "one save per attempt");
}

#[tokio::test]
async fn a_lookup_past_the_candidate_bound_fails_saying_so() {
    let db = FreshDatabase::new("e2e_bound");
    let s = Setup::new(&[
        "--records-database",
        db.url.as_str(),
        "--records-max-candidates",
        "3",
    ])
    .await;
    s.apply(MANY);
    let keys: Vec<String> = (0..5).map(|i| format!("k{i}")).collect();
    let run = start(&s, "many", &json!({"keys": keys}));
    assert_eq!(wait_run(&s, &run).await["status"]["phase"], "Succeeded");
    // A list of more than 1000 items is searched in memory, record by record.
    s.apply(
        r#"apiVersion: coxswain.dev/v1alpha1
kind: Flow
metadata: {name: wide}
spec:
  steps:
    - key: look
      lookup: [{name: found, collection: many, where: 'contains($input.many, $record.key)'}]
      script: {source: cat "$INPUTS/found"}
"#,
    );
    let many: Vec<String> = (0..1001).map(|i| format!("k{}", i % 7)).collect();
    let run = start(&s, "wide", &json!({"many": many}));
    let r = wait_run(&s, &run).await;
    let error = &r["status"]["steps"]["look"]["error"];
    assert_eq!(r["status"]["phase"], "Failed", "{r:#}");
    let message = error["message"].as_str().unwrap_or_default();
    for part in [
        "lookup `found`",
        "more than 3 records",
        "records.maxCandidates",
        "1000 items",
    ] {
        assert!(message.contains(part), "{part:?} not in {message}");
    }
}

#[tokio::test]
async fn finished_runs_are_archived_and_deleted_by_retention() {
    let db = FreshDatabase::new("e2e_archive");
    let s = Setup::new(&["--records-database", db.url.as_str()]).await;
    s.apply(&MANY.replace("spec:\n", "spec:\n  retention: {finishedRuns: 2s}\n"));
    let run = start(&s, "many", &json!({"keys": ["a", "b"]}));
    let r = wait_run(&s, &run).await;
    assert_eq!(r["status"]["phase"], "Succeeded");
    let uid = r["metadata"]["uid"]
        .as_str()
        .unwrap_or_default()
        .to_string();
    s.wait_deleted("the run to be deleted by retention", "run", &run, BOUND)
        .await;
    let archived = db.query(&format!(
        "SELECT name || '|' || phase || '|' || (run -> 'status' -> 'steps' -> 'keep' ->> 'status') FROM runs WHERE uid = '{uid}'"
    ));
    assert_eq!(archived, format!("{run}|Succeeded|completed"));
    // Its Jobs, ConfigMaps and Approvals went with it; a flow without
    // retention keeps its finished runs (archived all the same).
    s.apply(MANY);
    let kept = start(&s, "many", &json!({"keys": ["c"]}));
    assert_eq!(wait_run(&s, &kept).await["status"]["phase"], "Succeeded");
    wait_for("the kept run to be archived", BOUND, || async {
        let n = db.query(&format!("SELECT count(*) FROM runs WHERE name = '{kept}'"));
        Ok((n == "1").then_some(()))
    })
    .await
    .unwrap_or_else(|e| panic!("{e}\n{}", s.logs()));
    tokio::time::sleep(Duration::from_secs(3)).await;
    assert_eq!(s.get("run", &kept)["status"]["phase"], "Succeeded");
}

#[tokio::test]
async fn the_archive_forgets_runs_past_its_own_retention() {
    let db = FreshDatabase::new("e2e_archive_retention");
    let s = Setup::new(&[
        "--records-database",
        db.url.as_str(),
        "--archive-retention",
        "8s",
    ])
    .await;
    s.apply(MANY);
    let run = start(&s, "many", &json!({"keys": ["a"]}));
    assert_eq!(wait_run(&s, &run).await["status"]["phase"], "Succeeded");
    let uid = s.get("run", &run)["metadata"]["uid"]
        .as_str()
        .unwrap_or_default()
        .to_string();
    // The run is archived when it ends, and forgotten 8 s after; the Run
    // itself stays in the cluster (no finishedRuns retention).
    wait_for("the run to be archived", BOUND, || async {
        let n = db.query(&format!("SELECT count(*) FROM runs WHERE uid = '{uid}'"));
        Ok((n == "1").then_some(()))
    })
    .await
    .unwrap_or_else(|e| panic!("{e}\n{}", s.logs()));
    // Rows another Coxswain archived (the schema is there now): one that
    // ended long ago, one that ends tomorrow (a clock ahead of this one)
    // and must stay.
    db.query(
        "INSERT INTO runs (uid, namespace, name, flow, phase, created, finished, run, offloaded) VALUES \
         ('old', 'team-a', 'old', 'many', 'Succeeded', now() - interval '2 days', now() - interval '1 day', '{}', '{}'), \
         ('ahead', 'team-a', 'ahead', 'many', 'Succeeded', now(), now() + interval '1 day', '{}', '{}')",
    );
    wait_for("the run's archived row to go", BOUND, || async {
        let left = db.query(&format!(
            "SELECT count(*) FROM runs WHERE uid IN ('{uid}', 'old')"
        ));
        Ok((left == "0").then_some(()))
    })
    .await
    .unwrap_or_else(|e| panic!("{e}\n{}", s.logs()));
    assert_eq!(db.query("SELECT string_agg(uid, ',') FROM runs"), "ahead");
    assert_eq!(s.get("run", &run)["status"]["phase"], "Succeeded");
    assert!(
        s.logs()
            .contains("deleted archived runs past the archive's retention"),
        "{}",
        s.logs()
    );
}

#[tokio::test]
async fn admission_refuses_records_without_a_database() {
    let rbac = coxswain_e2e::rbac::member_role(&["mallory"]);
    let without = Setup::serving_admission(&rbac, true, &[]).await;
    let refused = without
        .kubectl
        .apply(without.ns(), TICKETS)
        .expect_err("a flow that saves, with no database");
    for part in [
        "step remember: save",
        "records.database",
        "step triage: lookup[0]",
    ] {
        assert!(refused.contains(part), "{part:?} not in {refused}");
    }
}

#[tokio::test]
async fn admission_refuses_a_bad_where_naming_its_place() {
    let rbac = coxswain_e2e::rbac::member_role(&["mallory"]);
    let db = FreshDatabase::new("e2e_admission");
    let with =
        Setup::serving_admission(&rbac, false, &["--records-database", db.url.as_str()]).await;
    with.apply(TICKETS);
    let bad = TICKETS.replace(
        "'$record.value.component == $steps.fetch.output.component and",
        "'$record.value.component == $steps.fetch.output.component AND",
    );
    let refused = with
        .kubectl
        .apply(with.ns(), &bad)
        .expect_err("a capital AND");
    assert!(refused.contains("lookup[0].where"), "{refused}");
    assert!(refused.contains("lowercase"), "{refused}");
    assert!(refused.contains("(character 58)"), "{refused}");
}

#[tokio::test]
async fn an_approval_shows_what_its_lookup_found() {
    let db = FreshDatabase::new("e2e_review");
    let s = Setup::new(&["--records-database", db.url.as_str()]).await;
    s.apply(
        r#"apiVersion: coxswain.dev/v1alpha1
kind: Flow
metadata: {name: review}
spec:
  steps:
    - key: draft
      input: {topic: $input.topic}
      script: {source: cat "$INPUTS/topic"}
    - key: remember
      save: {collection: drafts, key: $input.id}
    - key: review
      lookup:
        - {name: earlier, collection: drafts, where: '$record.value == $steps.draft.output', orderBy: $record.key}
      approval: {decisions: [approve], show: [draft]}
"#,
    );
    let run = start(&s, "review", &json!({"id": "d1", "topic": "db"}));
    let name = s.kubectl.approval_name(s.ns(), &run, "review", 1);
    let asked = wait_for("the Approval to be asked", BOUND, || async {
        let out = s
            .kubectl
            .run(&[
                "get",
                "approval",
                &name,
                "-n",
                s.ns(),
                "--ignore-not-found",
                "-o",
                "json",
            ])
            .map_err(coxswain_e2e::Error::Start)?;
        Ok((!out.trim().is_empty())
            .then(|| serde_json::from_str::<Value>(&out).unwrap_or_default()))
    })
    .await
    .unwrap_or_else(|e| panic!("{e}\n{}", s.logs()));
    let shown = &asked["spec"]["show"];
    assert_eq!(keys(&shown["earlier"]), ["d1"], "{asked:#}");
    assert_eq!(shown["draft"], json!("db"), "{asked:#}");
    let run = s.get("run", &run);
    assert_eq!(
        run["status"]["steps"]["review"]["attempts"][0]["lookups"]["earlier"],
        shown["earlier"]
    );
}

#[tokio::test]
async fn a_database_that_fails_keeps_the_attempt_waiting_and_its_record_says_so() {
    let db = FreshDatabase::new("e2e_outage");
    let s = Setup::new(&["--records-database", db.url.as_str()]).await;
    s.apply(
        r#"apiVersion: coxswain.dev/v1alpha1
kind: Flow
metadata: {name: look}
spec:
  steps:
    - key: look
      lookup: [{name: found, collection: tickets}]
      script: {source: cat "$INPUTS/found"}
"#,
    );
    // Every statement on the records fails now, as with a database gone.
    db.query("ALTER TABLE records RENAME TO records_away");
    let run = start(&s, "look", &json!({}));
    let waiting = wait_for("the attempt's status to say it waits", BOUND, || async {
        let r = s
            .kubectl
            .run(&["get", "run", &run, "-n", s.ns(), "-o", "json"])
            .map_err(|e| e.to_string())
            .unwrap_or_default();
        let r: Value = serde_json::from_str(&r).unwrap_or_default();
        let note = r["status"]["steps"]["look"]["attempts"][0]["waiting"].clone();
        Ok(note
            .as_str()
            .map(|n| (n.to_string(), r["status"]["phase"].clone())))
    })
    .await
    .unwrap_or_else(|e| panic!("{e}\n{}", s.logs()));
    let (note, phase) = waiting;
    assert_eq!(phase, "Running");
    assert!(
        note.starts_with("waiting for the records database, which did not answer (lookup `found`")
            && note.contains("every 5 s"),
        "{note}"
    );
    db.query("ALTER TABLE records_away RENAME TO records");
    let r = wait_run(&s, &run).await;
    assert_eq!(r["status"]["phase"], "Succeeded", "{r:#}");
    let attempt = &r["status"]["steps"]["look"]["attempts"][0];
    assert!(attempt["waiting"].is_null(), "cleared: {attempt}");
    assert_eq!(attempt["lookups"]["found"], json!([]));
}
