//! What only the PostgreSQL store has to prove: concurrent saves, migrations
//! raced by two controllers, a schema newer than this build, a connection
//! ended under the store, the candidate bound, and SQL's order and merge
//! agreeing with the Rust comparator and the evaluator on generated records
//! (the SQLite store answering the same).

mod support;

use std::cell::{Cell, RefCell};
use std::collections::BTreeSet;

use coxswain_records::order::OrderBy;
use coxswain_records::{LookupError, PgSettings, Record, Saving, Store, StoreError};
use proptest::prelude::*;
use proptest::test_runner::TestCaseError;
use serde_json::{Value, json};
use support::stores::{Ask, Backend, Fresh, expr};

fn saving(collection: &str, key: &str, value: Value, idem: &str) -> Saving {
    Saving {
        namespace: "team-a".into(),
        collection: collection.into(),
        key: key.into(),
        value,
        run: "r".into(),
        step: "s".into(),
        idempotency: idem.into(),
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn concurrent_saves_to_one_key_each_get_their_own_version() {
    let db = Fresh::new(Backend::Postgres).await;
    let store = db.open().await;
    let tasks: Vec<_> = (0..20)
        .map(|i| {
            let store = store.clone();
            tokio::spawn(async move {
                store
                    .save(&saving("c", "k", json!(i), &format!("run-{i}/save/0")))
                    .await
                    .unwrap()
            })
        })
        .collect();
    let mut versions = Vec::new();
    let mut created = 0;
    for t in tasks {
        let s = t.await.unwrap();
        versions.push(s.version);
        created += usize::from(s.created);
    }
    versions.sort_unstable();
    assert_eq!(versions, (1..=20).collect::<Vec<i64>>());
    assert_eq!(created, 1, "one save made the key");
    let r = &Ask::new("c").run(&store).await.unwrap()[0];
    assert_eq!(r.version, 20);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn concurrent_repeats_of_one_save_make_one_version() {
    let db = Fresh::new(Backend::Postgres).await;
    let store = db.open().await;
    store
        .save(&saving("c", "k", json!("before"), "earlier"))
        .await
        .unwrap();
    let tasks: Vec<_> = (0..10)
        .map(|i| {
            let store = store.clone();
            tokio::spawn(async move {
                store
                    .save(&saving("c", "k", json!(i), "uid/save/0"))
                    .await
                    .unwrap()
            })
        })
        .collect();
    let mut answers = BTreeSet::new();
    for t in tasks {
        let s = t.await.unwrap();
        answers.insert((s.version, s.created));
    }
    assert_eq!(
        answers,
        BTreeSet::from([(2, false)]),
        "all answer the one save"
    );
    let r = &Ask::new("c").run(&store).await.unwrap()[0];
    assert_eq!(r.version, 2);
    let saves: i64 = db
        .client()
        .await
        .query_one("SELECT count(*) FROM saves", &[])
        .await
        .unwrap()
        .get(0);
    assert_eq!(saves, 2);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn two_controllers_starting_together_both_migrate_without_a_race() {
    for _ in 0..3 {
        let db = Fresh::new(Backend::Postgres).await;
        let url = db.pg_url();
        let (a, b) = tokio::join!(
            Store::connect_postgres(&url, PgSettings::default()),
            Store::connect_postgres(&url, PgSettings::default())
        );
        a.expect("the first controller starts");
        b.expect("the second controller starts");
        let rows = db
            .client()
            .await
            .query("SELECT version FROM coxswain_schema", &[])
            .await
            .unwrap();
        let versions: Vec<i64> = rows.iter().map(|r| r.get(0)).collect();
        assert_eq!(versions, [1, 2], "migrated once");
    }
}

#[tokio::test]
async fn a_schema_newer_than_this_build_is_refused_on_both_backends() {
    let expected = "the records database is at schema version 3, this coxswain knows up to 2; upgrade coxswain";
    // PostgreSQL.
    let db = Fresh::new(Backend::Postgres).await;
    drop(db.open().await);
    db.client()
        .await
        .batch_execute("INSERT INTO coxswain_schema (version) VALUES (3)")
        .await
        .unwrap();
    let err = Store::connect_postgres(&db.pg_url(), PgSettings::default())
        .await
        .unwrap_err();
    assert!(
        matches!(err, StoreError::SchemaTooNew { found: 3, known: 2 }),
        "{err}"
    );
    assert_eq!(err.to_string(), expected);
    // SQLite.
    let db = Fresh::new(Backend::Sqlite).await;
    drop(db.open().await);
    rusqlite::Connection::open(db.sqlite_path())
        .unwrap()
        .execute("INSERT INTO coxswain_schema (version) VALUES (3)", [])
        .unwrap();
    let err = Store::open_sqlite(&db.sqlite_path()).await.unwrap_err();
    assert_eq!(err.to_string(), expected);
}

#[tokio::test]
async fn a_connection_ended_under_the_store_is_made_again_on_the_next_call() {
    let db = Fresh::new(Backend::Postgres).await;
    let store = db.open().await;
    store.save(&saving("c", "k", json!(1), "1")).await.unwrap();
    let admin = support::stores::admin().await;
    for round in 0..3 {
        let ended: Vec<bool> = admin
            .query(
                "SELECT pg_terminate_backend(pid) FROM pg_stat_activity \
                 WHERE application_name = $1 AND pid <> pg_backend_pid()",
                &[&db.schema()],
            )
            .await
            .unwrap()
            .iter()
            .map(|r| r.get(0))
            .collect();
        assert!(
            !ended.is_empty() && ended.iter().all(|x| *x),
            "round {round}: the store's connections were there to end: {ended:?}"
        );
        let version = i64::from(round) + 2;
        let saved = store
            .save(&saving("c", "k", json!(version), &format!("after-{round}")))
            .await
            .expect("the save after the connection ended");
        assert_eq!(saved.version, version);
        let r = &Ask::new("c").run(&store).await.unwrap()[0];
        assert_eq!(r.value, json!(version));
    }
    // The same for a lookup first.
    admin
        .execute(
            "SELECT pg_terminate_backend(pid) FROM pg_stat_activity \
             WHERE application_name = $1 AND pid <> pg_backend_pid()",
            &[&db.schema()],
        )
        .await
        .unwrap();
    assert_eq!(Ask::new("c").keys(&store).await, ["k"]);
}

#[tokio::test]
async fn past_the_candidate_bound_a_lookup_fails_naming_what_sql_could_not_do() {
    let db = Fresh::new(Backend::Postgres).await;
    let store = db
        .open_with(PgSettings {
            max_candidates: 5,
            ..PgSettings::default()
        })
        .await;
    for i in 0..10 {
        let group = if i < 3 { "a" } else { "b" };
        store
            .save(&saving(
                "c",
                &format!("k{i}"),
                json!({"group": group, "i": i}),
                &format!("{i}"),
            ))
            .await
            .unwrap();
    }
    // A list of more than 1000 items is searched in memory.
    let many: Vec<String> = (0..1001).map(|i| format!("k{}", i % 20)).collect();
    let err = Ask::matching(
        "c",
        "contains($input.many, $record.key)",
        json!({"many": many}),
    )
    .run(&store)
    .await
    .unwrap_err();
    let msg = err.to_string();
    assert!(
        matches!(&err, LookupError::TooManyCandidates { bound: 5, not_compiled, .. } if not_compiled.len() == 1),
        "{err:?}"
    );
    for part in [
        "collection `c`",
        "more than 5 records",
        "records.maxCandidates",
        "character 1",
        "more than 1000 items",
    ] {
        assert!(msg.contains(part), "{part:?} not in: {msg}");
    }
    // A part SQL decides narrows the candidates below the bound: the answer
    // is whole, memory's records merged in order.
    let got = Ask {
        condition: Some("$record.value.group == \"a\" and contains($input.many, $record.key)"),
        input: json!({"many": many}),
        order_by: Some("$record.value.i"),
        descending: true,
        ..Ask::new("c")
    }
    .keys(&store)
    .await;
    assert_eq!(got, ["k2", "k1", "k0"]);
    // SQL keeps some (group b, 7 records, no bound on what SQL keeps) and
    // memory the others (3 undecided lists): merged, ordered, limited.
    for i in 0..3 {
        store
            .save(&saving(
                "c",
                &format!("l{i}"),
                json!({"group": [i]}),
                &format!("l{i}"),
            ))
            .await
            .unwrap();
    }
    let got = Ask {
        condition: Some("$record.value.group == \"b\" or $record.value.group == $input.one"),
        input: json!({"one": [1]}),
        order_by: Some("$record.key"),
        descending: true,
        limit: 4,
        ..Ask::new("c")
    }
    .keys(&store)
    .await;
    assert_eq!(got, ["l1", "k9", "k8", "k7"]);
}

// --- SQL's order and merge against the comparator and the evaluator ---------

fn sort_value() -> impl Strategy<Value = Option<Value>> {
    prop::option::weighted(
        0.85,
        prop_oneof![
            Just(Value::Null),
            (-3i64..=3).prop_map(Value::from),
            (-12i32..=12).prop_map(|m| json!(f64::from(m) / 4.0)),
            (-30i32..=30).prop_map(|m| json!(f64::from(m) / 10.0)),
            prop::sample::select(vec!["", "a", "ab", "B", "Z", "é", "e\u{301}", "😀", "a b"])
                .prop_map(Value::from),
            any::<bool>().prop_map(Value::Bool),
            prop::collection::vec((0i64..3).prop_map(Value::from), 0..3).prop_map(Value::Array),
            prop::sample::select(vec![json!({}), json!({"a": 1}), json!({"b": "x"})]),
        ],
    )
}

#[derive(Debug, Clone)]
struct Gen {
    records: Vec<(String, Value)>,
    condition: Option<&'static str>,
    order_by: Option<&'static str>,
    descending: bool,
    limit: usize,
}

fn generated() -> impl Strategy<Value = Gen> {
    let record = (
        prop::sample::select(vec!["k", "K", "é", "a", "k1"]),
        sort_value(),
        sort_value(),
        prop::sample::select(vec!["a", "b", "c"]),
    );
    (
        prop::collection::vec(record, 0..14),
        prop::option::weighted(
            0.7,
            prop::sample::select(vec![
                // Exact in SQL.
                "$record.value.g == \"a\"",
                "$record.value.g != \"c\" and $record.value.p != null",
                // Lists left to memory, merged with what SQL keeps.
                "$record.value.g == \"a\" or $record.value.p == $input.one",
                "$record.value.p == $record.value.q",
                "$record.value.p == $input.empty or $record.value.q == $input.obj",
                // Fails on most collections: the first failing key, alike.
                "$record.value.p >= 0",
                "$record.value.g == \"b\" and len($record.value.q) > 0",
            ]),
        ),
        prop::option::weighted(
            0.8,
            prop::sample::select(vec![
                "$record.value.p",
                "$record.value.q",
                "$record.value.p[0]",
                "$record.value",
                "$record.key",
                "$record.version",
                "$record.savedAt",
                "$record.value.g",
            ]),
        ),
        any::<bool>(),
        1usize..16,
    )
        .prop_map(|(rs, condition, order_by, descending, limit)| Gen {
            records: rs
                .into_iter()
                .enumerate()
                .map(|(i, (prefix, p, q, g))| {
                    let mut m = serde_json::Map::new();
                    m.insert("g".into(), json!(g));
                    if let Some(p) = p {
                        m.insert("p".into(), p);
                    }
                    if let Some(q) = q {
                        m.insert("q".into(), q);
                    }
                    (format!("{prefix}{}", i % 9), Value::Object(m))
                })
                .collect(),
            condition,
            order_by,
            descending,
            limit,
        })
}

/// The run's data the conditions read.
fn input() -> Value {
    json!({"one": [1], "empty": [], "obj": {"a": 1}})
}

/// The evaluator and the comparator over every record: what a lookup must
/// answer (`Err(key)` for the first record by key the condition fails on).
fn reference(all: &[Record], g: &Gen) -> Result<Vec<String>, String> {
    let mut kept = Vec::new();
    let cond = g.condition.map(expr);
    for r in all {
        let keep = match &cond {
            None => true,
            Some(c) => c
                .eval_bool(&json!({"record": r.to_json(), "input": input()}))
                .map_err(|_| r.key.clone())?,
        };
        if keep {
            kept.push(r.clone());
        }
    }
    let by = g.order_by.map(expr);
    let order = OrderBy::new(
        by.as_ref().map(|e| e.references().next().unwrap()),
        g.descending,
    )
    .unwrap();
    let mut sorted = order.sort(kept);
    sorted.truncate(g.limit);
    Ok(sorted.into_iter().map(|r| r.key).collect())
}

async fn answer(store: &Store, collection: &str, g: &Gen) -> Result<Vec<String>, String> {
    let ask = Ask {
        condition: g.condition,
        order_by: g.order_by,
        descending: g.descending,
        limit: g.limit,
        input: input(),
        ..Ask::new(collection)
    };
    match ask.run(store).await {
        Ok(rs) => Ok(rs.into_iter().map(|r| r.key).collect()),
        Err(LookupError::Eval { key, .. }) => Err(key),
        Err(e) => panic!("{g:?}: {e}"),
    }
}

#[test]
fn sql_order_and_merge_agree_with_the_comparator_and_the_evaluator() {
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap();
    let (pg_db, sqlite_db) = rt.block_on(async {
        (
            Fresh::new(Backend::Postgres).await,
            Fresh::new(Backend::Sqlite).await,
        )
    });
    let (pg, sqlite) = rt.block_on(async { (pg_db.open().await, sqlite_db.open().await) });
    let mut runner = support::proptest_runner(96);
    let cases = runner.config().cases;
    let n = Cell::new(0);
    let counts = RefCell::new([0usize; 3]); // answers, failures, merged-in records
    runner
        .run(&generated(), |g| {
            n.set(n.get() + 1);
            let collection = format!("c{}", n.get());
            rt.block_on(async {
                for (i, (key, value)) in g.records.iter().enumerate() {
                    for store in [&pg, &sqlite] {
                        store
                            .save(&saving(
                                &collection,
                                key,
                                value.clone(),
                                &format!("{collection}/{i}"),
                            ))
                            .await
                            .unwrap();
                    }
                }
                let all = Ask {
                    limit: 1000,
                    ..Ask::new(&collection)
                }
                .run(&pg)
                .await
                .unwrap();
                let want = reference(&all, &g);
                let got = answer(&pg, &collection, &g).await;
                prop_assert_eq!(&got, &want, "PostgreSQL, {:?}", g);
                if g.order_by != Some("$record.savedAt") {
                    // SQLite's clock has milliseconds: savedAt ties there.
                    let local = answer(&sqlite, &collection, &g).await;
                    prop_assert_eq!(&local, &want, "SQLite, {:?}", g);
                }
                let mut counts = counts.borrow_mut();
                match &want {
                    Ok(_) => counts[0] += 1,
                    Err(_) => counts[1] += 1,
                }
                if g.condition
                    .is_some_and(|c| c.contains("$input") || c.contains("$record.value.q"))
                {
                    counts[2] += 1;
                }
                Ok::<(), TestCaseError>(())
            })
        })
        .unwrap();
    let counts = counts.into_inner();
    let n = n.get();
    eprintln!(
        "{n} lookups: {} answered, {} failed, {} with records left to memory",
        counts[0], counts[1], counts[2]
    );
    assert!(
        counts[0] > cases as usize / 3 && counts[1] > 0,
        "{counts:?}"
    );
}
