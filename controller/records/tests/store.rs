//! The store's semantics, the same cases on both backends: SQLite in a
//! temporary folder and PostgreSQL in a schema of its own. Each test runs its
//! cases on SQLite, then on PostgreSQL, and names the backend when one fails.

mod support;

use std::time::Duration;

use coxswain_records::{
    ArchivedRun, LookupError, MAX_LIMIT, RunQuery, Saved, Saving, Store, StoreError,
};
use serde_json::{Value, json};
use support::stores::{Ask, BOTH, Backend, Fresh};

fn saving(ns: &str, collection: &str, key: &str, value: Value, idem: &str) -> Saving {
    Saving {
        namespace: ns.into(),
        collection: collection.into(),
        key: key.into(),
        value,
        run: "triage-1".into(),
        step: "remember".into(),
        idempotency: idem.into(),
    }
}

/// Saves [`saving`]`(ns, collection, key, value, idem)`, which must work.
async fn save(
    store: &Store,
    ns: &str,
    collection: &str,
    key: &str,
    value: Value,
    idem: &str,
) -> Saved {
    store
        .save(&saving(ns, collection, key, value, idem))
        .await
        .unwrap()
}

/// The tickets every lookup case reads, saved in this order (t2 twice, the
/// second time last; t8 by another run), a few milliseconds apart so
/// `savedAt` differs even on SQLite's millisecond clock.
async fn tickets(store: &Store) {
    let values = [
        (
            "t1",
            json!({"component": "db", "priority": 3, "tags": ["urgent", "db"], "title": "Disk full"}),
        ),
        (
            "t2",
            json!({"component": "db", "priority": 1, "title": "slow"}),
        ),
        (
            "t3",
            json!({"component": "web", "priority": 2.5, "tags": []}),
        ),
        ("t4", json!({"component": "db", "priority": "high"})),
        ("t5", json!({"component": "db"})),
        (
            "t6",
            json!({"component": "DB", "priority": 2, "title": "Backup"}),
        ),
        ("t7", json!({"component": null, "priority": 2.0})),
        (
            "t8",
            json!({"component": "web", "priority": true, "title": "é"}),
        ),
        (
            "t2",
            json!({"component": "db", "priority": 1, "title": "slow query"}),
        ),
    ];
    for (i, (key, value)) in values.into_iter().enumerate() {
        let mut s = saving(
            "team-a",
            "tickets",
            key,
            value,
            &format!("uid-1/remember/{i}"),
        );
        if key == "t8" {
            s.run = "triage-2".into();
        }
        store.save(&s).await.expect("saving a ticket");
        tokio::time::sleep(Duration::from_millis(3)).await;
    }
}

/// What a lookup case expects.
enum Want {
    Keys(&'static [&'static str]),
    /// Fails on this record, the message holding this text.
    Fails(&'static str, &'static str),
}

struct Case {
    condition: Option<&'static str>,
    order_by: Option<&'static str>,
    descending: bool,
    limit: usize,
    want: Want,
}

const fn case(condition: Option<&'static str>, want: Want) -> Case {
    Case {
        condition,
        order_by: None,
        descending: false,
        limit: 100,
        want,
    }
}

const fn ordered(order_by: &'static str, descending: bool, want: &'static [&'static str]) -> Case {
    Case {
        condition: None,
        order_by: Some(order_by),
        descending,
        limit: 100,
        want: Want::Keys(want),
    }
}

const CASES: &[Case] = &[
    // Everything, by key.
    case(
        None,
        Want::Keys(&["t1", "t2", "t3", "t4", "t5", "t6", "t7", "t8"]),
    ),
    // A reference to the run's data.
    case(
        Some("$record.value.component == $input.component"),
        Want::Keys(&["t1", "t2", "t4", "t5"]),
    ),
    // "high" >= 2 fails on t4 (and null >= 2 on t5): the first by key.
    case(
        Some("$record.value.component == $input.component and $record.value.priority >= 2"),
        Want::Fails("t4", "cannot order"),
    ),
    case(
        Some(
            "$record.value.component == \"db\" and $record.value.priority != null and $record.value.priority != \"high\" and $record.value.priority >= 2",
        ),
        Want::Keys(&["t1"]),
    ),
    case(
        Some("contains($record.value.tags, \"urgent\")"),
        Want::Keys(&["t1"]),
    ),
    case(
        Some("startswith($record.value.title, \"Disk\")"),
        Want::Keys(&["t1"]),
    ),
    case(
        Some("$record.key >= \"t5\""),
        Want::Keys(&["t5", "t6", "t7", "t8"]),
    ),
    // 2 and 2.0 are one number.
    case(
        Some("$record.value.priority == 2"),
        Want::Keys(&["t6", "t7"]),
    ),
    case(
        Some("not ($record.value.component == null)"),
        Want::Keys(&["t1", "t2", "t3", "t4", "t5", "t6", "t8"]),
    ),
    case(
        Some("$record.run == \"triage-2\" or $record.version > 1"),
        Want::Keys(&["t2", "t8"]),
    ),
    case(
        Some("$record.step == \"remember\" and $record.value.component == \"web\""),
        Want::Keys(&["t3", "t8"]),
    ),
    // Empty answers are answers.
    case(
        Some("$record.value.component == \"nothing\""),
        Want::Keys(&[]),
    ),
    // len(null) fails on t2, the first record without tags.
    case(
        Some("len($record.value.tags) > 1"),
        Want::Fails("t2", "`len` needs"),
    ),
    // The order of kinds: missing, numbers (2 ties 2.0: by key), texts,
    // booleans.
    ordered(
        "$record.value.priority",
        false,
        &["t5", "t2", "t6", "t7", "t3", "t1", "t4", "t8"],
    ),
    ordered(
        "$record.value.priority",
        true,
        &["t8", "t4", "t1", "t3", "t7", "t6", "t2", "t5"],
    ),
    // Texts by bytes: "B" before "D" before "s" before "é".
    ordered(
        "$record.value.title",
        false,
        &["t3", "t4", "t5", "t7", "t6", "t1", "t2", "t8"],
    ),
    // null first, then "DB" < "db" < "web".
    ordered(
        "$record.value.component",
        false,
        &["t7", "t6", "t1", "t2", "t4", "t5", "t3", "t8"],
    ),
    // Lists tie with each other, after everything missing.
    ordered(
        "$record.value.tags",
        false,
        &["t2", "t4", "t5", "t6", "t7", "t8", "t1", "t3"],
    ),
    // Objects tie: by key.
    ordered(
        "$record.value",
        false,
        &["t1", "t2", "t3", "t4", "t5", "t6", "t7", "t8"],
    ),
    ordered(
        "$record.version",
        true,
        &["t2", "t8", "t7", "t6", "t5", "t4", "t3", "t1"],
    ),
    // t2 was saved again last.
    ordered(
        "$record.savedAt",
        false,
        &["t1", "t3", "t4", "t5", "t6", "t7", "t8", "t2"],
    ),
    ordered(
        "$record.savedAt",
        true,
        &["t2", "t8", "t7", "t6", "t5", "t4", "t3", "t1"],
    ),
    // A path that reads nothing: all tie.
    ordered(
        "$record.value.nothing.here",
        true,
        &["t8", "t7", "t6", "t5", "t4", "t3", "t2", "t1"],
    ),
    Case {
        condition: None,
        order_by: Some("$record.key"),
        descending: true,
        limit: 3,
        want: Want::Keys(&["t8", "t7", "t6"]),
    },
    Case {
        condition: Some("$record.value.component == \"db\""),
        order_by: Some("$record.value.priority"),
        descending: true,
        limit: 2,
        want: Want::Keys(&["t4", "t1"]),
    },
    Case {
        condition: Some("$record.value.component == \"web\" or $record.value.priority == 1"),
        order_by: Some("$record.savedAt"),
        descending: true,
        limit: 2,
        want: Want::Keys(&["t2", "t8"]),
    },
];

#[tokio::test]
async fn lookups_keep_order_limit_and_fail_alike_on_both_backends() {
    for backend in BOTH {
        let (_db, store) = Fresh::with_store(backend).await;
        tickets(&store).await;
        for c in CASES {
            let ask = Ask {
                condition: c.condition,
                input: json!({"component": "db"}),
                order_by: c.order_by,
                descending: c.descending,
                limit: c.limit,
                ..Ask::new("tickets")
            };
            let what = format!(
                "{backend:?}: where {:?} orderBy {:?} descending {} limit {}",
                c.condition, c.order_by, c.descending, c.limit
            );
            match (&c.want, ask.run(&store).await) {
                (Want::Keys(want), Ok(got)) => {
                    let got: Vec<&str> = got.iter().map(|r| r.key.as_str()).collect();
                    assert_eq!(&got, want, "{what}");
                }
                (Want::Fails(key, text), Err(e @ LookupError::Eval { .. })) => {
                    let msg = e.to_string();
                    assert!(
                        msg.contains(&format!("record `{key}` of collection `tickets`"))
                            && msg.contains(text),
                        "{what}: {msg}"
                    );
                    assert_eq!(e.code(), "workflow.expression_error");
                }
                (_, got) => panic!("{what}: got {got:?}"),
            }
        }
    }
}

#[tokio::test]
async fn a_record_reads_as_saved_with_its_version_time_run_and_step() {
    for backend in BOTH {
        let (_db, store) = Fresh::with_store(backend).await;
        let first = save(
            &store,
            "team-a",
            "notes",
            "k",
            json!({"n": 1, "t": "é😀", "l": [true, null, 2.5]}),
            "u/s/1",
        )
        .await;
        assert_eq!(
            first,
            Saved {
                collection: "notes".into(),
                key: "k".into(),
                version: 1,
                created: true
            },
            "{backend:?}"
        );
        assert_eq!(
            serde_json::to_value(&first).unwrap(),
            json!({"collection": "notes", "key": "k", "version": 1, "created": true})
        );
        let got = Ask::new("notes").run(&store).await.unwrap();
        assert_eq!(got.len(), 1, "{backend:?}");
        let r = &got[0];
        assert_eq!(r.value, json!({"n": 1, "t": "é😀", "l": [true, null, 2.5]}));
        assert_eq!((r.run.as_str(), r.step.as_str()), ("triage-1", "remember"));
        // 2026-05-01T09:30:00.000000Z: fixed width, UTC, microseconds.
        let t = r.saved_at.as_bytes();
        assert!(
            t.len() == 27
                && t[4] == b'-'
                && t[10] == b'T'
                && t[19] == b'.'
                && t[26] == b'Z'
                && r.saved_at[20..26].bytes().all(|b| b.is_ascii_digit()),
            "{backend:?}: {}",
            r.saved_at
        );

        let mut again = saving("team-a", "notes", "k", json!("second"), "u/s/2");
        again.run = "triage-2".into();
        let second = store.save(&again).await.unwrap();
        assert_eq!((second.version, second.created), (2, false), "{backend:?}");
        let r = &Ask::new("notes").run(&store).await.unwrap()[0];
        assert_eq!(
            (&r.value, r.version, r.run.as_str()),
            (&json!("second"), 2, "triage-2")
        );
        assert!(r.saved_at >= got[0].saved_at, "{backend:?}");
        assert_eq!(r.to_json()["savedAt"], json!(r.saved_at));
    }
}

#[tokio::test]
async fn a_save_repeated_with_its_idempotency_key_changes_nothing() {
    for backend in BOTH {
        let (_db, store) = Fresh::with_store(backend).await;
        let first = save(&store, "team-a", "c", "k", json!(1), "uid/step/0").await;
        // A retry after a crash: same key, even if the value came out
        // different the second time.
        let retry = save(&store, "team-a", "c", "k", json!(2), "uid/step/0").await;
        assert_eq!(retry, first, "{backend:?}");
        let r = &Ask::new("c").run(&store).await.unwrap()[0];
        assert_eq!((r.version, &r.value), (1, &json!(1)), "{backend:?}");
        // The same idempotency key in another namespace is another save.
        let other = save(&store, "team-b", "c", "k", json!(3), "uid/step/0").await;
        assert_eq!((other.version, other.created), (1, true), "{backend:?}");
        let next = save(&store, "team-a", "c", "k", json!(4), "uid/step/1").await;
        assert_eq!(next.version, 2, "{backend:?}");
    }
}

#[tokio::test]
async fn namespaces_never_see_each_others_records() {
    for backend in BOTH {
        let (_db, store) = Fresh::with_store(backend).await;
        save(&store, "team-a", "c", "shared", json!("a"), "a/1").await;
        save(&store, "team-a", "c", "only-a", json!("a"), "a/2").await;
        let b = save(&store, "team-b", "c", "shared", json!("b"), "b/1").await;
        assert!(b.created, "{backend:?}: a new key in team-b");
        let a_keys = Ask::new("c").keys(&store).await;
        assert_eq!(a_keys, ["only-a", "shared"], "{backend:?}");
        let in_b = Ask {
            namespace: "team-b",
            ..Ask::new("c")
        };
        let got = in_b.run(&store).await.unwrap();
        assert_eq!(got.len(), 1, "{backend:?}");
        assert_eq!(got[0].value, json!("b"));
        // Even a condition that would match team-a's records.
        let cond = Ask {
            condition: Some("$record.value == \"a\""),
            ..in_b
        };
        assert!(cond.keys(&store).await.is_empty(), "{backend:?}");
        // Deleting in team-b leaves team-a's record.
        assert!(store.delete("team-b", "c", "shared").await.unwrap());
        assert_eq!(Ask::new("c").keys(&store).await, ["only-a", "shared"]);
    }
}

#[tokio::test]
async fn delete_says_whether_there_was_a_record_and_a_new_save_starts_again() {
    for backend in BOTH {
        let (_db, store) = Fresh::with_store(backend).await;
        save(&store, "team-a", "c", "k", json!(1), "1").await;
        save(&store, "team-a", "c", "k", json!(2), "2").await;
        assert!(!store.delete("team-a", "c", "other").await.unwrap());
        assert!(!store.delete("team-a", "other", "k").await.unwrap());
        assert!(
            store.delete("team-a", "c", "k").await.unwrap(),
            "{backend:?}"
        );
        assert!(
            !store.delete("team-a", "c", "k").await.unwrap(),
            "{backend:?}"
        );
        assert!(Ask::new("c").keys(&store).await.is_empty());
        let again = save(&store, "team-a", "c", "k", json!(3), "3").await;
        assert_eq!((again.version, again.created), (1, true), "{backend:?}");
    }
}

#[tokio::test]
async fn a_lookup_sees_a_save_made_through_another_handle_at_once() {
    for backend in BOTH {
        let db = Fresh::new(backend).await;
        let writer = db.open().await;
        let reader = db.open().await;
        for i in 0..20 {
            let key = format!("k{i:02}");
            writer
                .save(&saving("team-a", "c", &key, json!(i), &key))
                .await
                .unwrap();
            let seen = Ask::matching("c", "$record.key == $input.key", json!({"key": key}))
                .run(&reader)
                .await
                .unwrap();
            assert_eq!(seen.len(), 1, "{backend:?}: {key} not seen");
            assert_eq!(seen[0].value, json!(i));
        }
    }
}

#[tokio::test]
async fn limits_and_paths_outside_the_record_are_refused() {
    for backend in BOTH {
        let (_db, store) = Fresh::with_store(backend).await;
        for limit in [0, MAX_LIMIT + 1] {
            let err = Ask {
                limit,
                ..Ask::new("c")
            }
            .run(&store)
            .await
            .unwrap_err();
            assert!(
                matches!(err, LookupError::Limit(l) if l == limit),
                "{backend:?}: {err}"
            );
            assert!(err.to_string().contains("between 1 and 1000"), "{err}");
        }
        let ok = Ask {
            limit: MAX_LIMIT,
            ..Ask::new("c")
        };
        assert!(ok.run(&store).await.unwrap().is_empty());
        let err = Ask {
            order_by: Some("$input.x"),
            ..Ask::new("c")
        }
        .run(&store)
        .await
        .unwrap_err();
        assert!(
            err.to_string()
                .contains("orderBy must be a path under $record"),
            "{backend:?}: {err}"
        );
    }
}

#[tokio::test]
async fn values_one_backend_could_not_give_back_are_refused_by_both() {
    for backend in BOTH {
        let (_db, store) = Fresh::with_store(backend).await;
        for (value, says) in [
            (json!({"n": [1, f64::MAX]}), "value.n[1]"),
            (json!({"t": "a\u{0}b"}), "NUL"),
        ] {
            let err = store
                .save(&saving("team-a", "c", "k", value, "x"))
                .await
                .unwrap_err();
            assert!(
                matches!(&err, StoreError::Invalid(m) if m.contains(says) && m.contains("record `k`")),
                "{backend:?}: {err}"
            );
        }
        let mut empty = saving("team-a", "c", "", json!(1), "x");
        assert!(store.save(&empty).await.is_err());
        empty.key = "a\u{0}".into();
        assert!(store.save(&empty).await.is_err());
        assert!(Ask::new("c").keys(&store).await.is_empty(), "{backend:?}");
        // A large float that reads back is fine.
        save(&store, "team-a", "c", "k", json!(1e300), "y").await;
    }
}

fn run(uid: &str, name: &str, flow: &str, phase: &str, finished: Option<&str>) -> ArchivedRun {
    ArchivedRun {
        namespace: "team-a".into(),
        name: name.into(),
        uid: uid.into(),
        flow: flow.into(),
        phase: phase.into(),
        created: "2026-05-01T09:00:00Z".into(),
        finished: finished.map(str::to_string),
        flow_digest: Some("sha256:abc".into()),
        run: json!({"metadata": {"name": name, "uid": uid}, "status": {"phase": phase, "log": "a\u{0}b"}}),
        offloaded: json!({"steps.fetch.output": {"configMap": format!("{name}-1")}}),
    }
}

#[tokio::test]
async fn the_archives_retention_deletes_the_runs_that_ended_before_a_time() {
    for backend in BOTH {
        let (_db, store) = Fresh::with_store(backend).await;
        let runs = [
            run(
                "u1",
                "a",
                "build",
                "Succeeded",
                Some("2026-05-01T10:00:00Z"),
            ),
            run(
                "u2",
                "b",
                "build",
                "Failed",
                Some("2026-05-02T10:00:00.25Z"),
            ),
            // 23:30 on the 1st in UTC.
            run(
                "u3",
                "c",
                "build",
                "Succeeded",
                Some("2026-05-02T01:30:00+02:00"),
            ),
            // Archived without an end: counts from its creation (the 1st).
            run("u4", "d", "build", "Cancelled", None),
            // Ended exactly at the cut: kept.
            run(
                "u5",
                "e",
                "build",
                "Succeeded",
                Some("2026-05-02T00:00:00Z"),
            ),
        ];
        for r in &runs {
            store.archive(r).await.unwrap();
        }
        let pruned = store.prune_runs("2026-05-02T02:00:00+02:00").await.unwrap();
        assert_eq!(pruned, 3, "{backend:?}");
        for (uid, kept) in [
            ("u1", false),
            ("u2", true),
            ("u3", false),
            ("u4", false),
            ("u5", true),
        ] {
            assert_eq!(
                store.is_archived(uid).await.unwrap(),
                kept,
                "{backend:?}: {uid}"
            );
        }
        assert_eq!(store.prune_runs("2026-05-02T00:00:00Z").await.unwrap(), 0);
        let err = store.prune_runs("last week").await.unwrap_err();
        assert!(matches!(err, StoreError::Invalid(_)), "{err}");
    }
}

#[tokio::test]
async fn the_archive_keeps_runs_by_uid_and_lists_the_newest_first() {
    for backend in BOTH {
        let (_db, store) = Fresh::with_store(backend).await;
        let runs = [
            run(
                "u1",
                "nightly",
                "build",
                "Succeeded",
                Some("2026-05-01T10:00:00Z"),
            ),
            // The same name later (the first Run was deleted and made again).
            run(
                "u2",
                "nightly",
                "build",
                "Failed",
                Some("2026-05-02T10:00:00.25Z"),
            ),
            run(
                "u3",
                "triage-1",
                "triage",
                "Succeeded",
                Some("2026-05-01T12:00:00+02:00"),
            ),
            run("u4", "triage-2", "triage", "Cancelled", None),
        ];
        assert!(!store.is_archived("u1").await.unwrap());
        for r in &runs {
            store.archive(r).await.unwrap();
        }
        // Archiving again (the controller retried) replaces, never adds.
        let mut again = runs[0].clone();
        again.phase = "Succeeded".into();
        store.archive(&again).await.unwrap();
        assert!(store.is_archived("u1").await.unwrap(), "{backend:?}");
        assert!(!store.is_archived("u9").await.unwrap());

        let newest = store
            .archived_run("team-a", "nightly")
            .await
            .unwrap()
            .expect("archived");
        assert_eq!(newest.uid, "u2", "{backend:?}");
        assert_eq!(newest.finished.as_deref(), Some("2026-05-02T10:00:00.25Z"));
        assert_eq!(newest.created, "2026-05-01T09:00:00Z");
        assert_eq!(newest.offloaded, runs[1].offloaded);
        // NUL cannot be stored: it is replaced.
        assert_eq!(newest.run["status"]["log"], json!("a\u{FFFD}b"));
        assert_eq!(newest.run["metadata"], runs[1].run["metadata"]);
        assert_eq!(newest.flow_digest.as_deref(), Some("sha256:abc"));
        assert!(
            store
                .archived_run("team-b", "nightly")
                .await
                .unwrap()
                .is_none()
        );

        let list = |q: RunQuery| {
            let store = store.clone();
            async move {
                store
                    .list_runs(&q)
                    .await
                    .unwrap()
                    .into_iter()
                    .map(|r| r.uid)
                    .collect::<Vec<_>>()
            }
        };
        // u3 ended at 10:00Z, the same moment as u1: by created, then uid.
        assert_eq!(
            list(RunQuery::default()).await,
            ["u2", "u1", "u3", "u4"],
            "{backend:?}"
        );
        assert_eq!(
            list(RunQuery {
                flow: Some("triage".into()),
                ..RunQuery::default()
            })
            .await,
            ["u3", "u4"]
        );
        assert_eq!(
            list(RunQuery {
                phase: Some("Succeeded".into()),
                ..RunQuery::default()
            })
            .await,
            ["u1", "u3"]
        );
        assert_eq!(
            list(RunQuery {
                since: Some("2026-05-01T11:00:00+01:00".into()),
                ..RunQuery::default()
            })
            .await,
            ["u2", "u1", "u3"],
            "{backend:?}: since 10:00Z, inclusive"
        );
        assert_eq!(
            list(RunQuery {
                namespace: Some("team-b".into()),
                ..RunQuery::default()
            })
            .await,
            Vec::<String>::new()
        );
        assert_eq!(
            list(RunQuery {
                limit: 1,
                ..RunQuery::default()
            })
            .await,
            ["u2"]
        );
        let all = store.list_runs(&RunQuery::default()).await.unwrap();
        assert_eq!(all[2].finished.as_deref(), Some("2026-05-01T10:00:00Z"));
        assert_eq!(all[3].finished, None);
        assert!(
            store
                .list_runs(&RunQuery {
                    since: Some("last week".into()),
                    ..RunQuery::default()
                })
                .await
                .is_err()
        );
    }
}

#[tokio::test]
async fn opening_migrates_once_and_again_is_harmless() {
    for backend in BOTH {
        let (db, store) = Fresh::with_store(backend).await;
        save(&store, "team-a", "c", "k", json!(1), "1").await;
        drop(store);
        // Opened again: the schema is there, the record too.
        let store = db.open().await;
        assert_eq!(Ask::new("c").keys(&store).await, ["k"], "{backend:?}");
        if backend == Backend::Sqlite {
            assert!(db.sqlite_path().exists());
        }
    }
}

/// The engine runs lookups and saves in spawned tasks: every call's future
/// must be `Send` (a compile-time check; never run).
#[allow(dead_code)]
fn every_call_can_run_in_a_spawned_task(
    store: &Store,
    q: &coxswain_records::Lookup<'_>,
    s: &Saving,
    r: &ArchivedRun,
) {
    fn send<T: Send>(_: T) {}
    send(store.lookup(q));
    send(store.save(s));
    send(store.delete("a", "b", "c"));
    send(store.archive(r));
    send(store.is_archived("u"));
    send(store.archived_run("a", "b"));
    send(store.list_runs(&RunQuery::default()));
    send(Store::open_sqlite(std::path::Path::new("x")));
    send(Store::connect_postgres(
        "x",
        coxswain_records::PgSettings::default(),
    ));
}

/// JSON text of `depth` nested lists around a number.
fn nested(depth: usize) -> String {
    format!("{}1{}", "[".repeat(depth), "]".repeat(depth))
}

#[tokio::test]
async fn a_value_deeper_than_an_output_is_refused_naming_the_limit() {
    for backend in BOTH {
        let (_db, store) = Fresh::with_store(backend).await;
        let deep: Value = serde_json::from_str(&nested(65)).expect("65 levels read");
        let err = store
            .save(&saving("team-a", "c", "deep", deep, "x"))
            .await
            .unwrap_err();
        let message = err.to_string();
        assert!(
            matches!(err, StoreError::TooDeep { depth: 65, .. })
                && message.contains("record `deep` of collection `c`")
                && message.contains("65 levels deep; at most 64"),
            "{backend:?}: {message}"
        );
        assert!(Ask::new("c").keys(&store).await.is_empty(), "{backend:?}");
        let at_limit: Value = serde_json::from_str(&nested(64)).expect("64 levels read");
        store
            .save(&saving("team-a", "c", "ok", at_limit, "y"))
            .await
            .expect("64 levels are kept");
        assert_eq!(Ask::new("c").keys(&store).await, ["ok"], "{backend:?}");
    }
}

#[tokio::test]
async fn a_row_that_cannot_be_read_fails_the_lookup_naming_it_and_can_be_deleted() {
    for backend in BOTH {
        let (db, store) = Fresh::with_store(backend).await;
        save(&store, "team-a", "c", "fine", json!({"a": 1}), "x").await;
        // A row written behind the store's back (or before saves were
        // bounded): 142 levels, past serde_json's 128.
        let text = nested(142);
        match backend {
            Backend::Sqlite => {
                let c = rusqlite::Connection::open(db.sqlite_path()).expect("the file");
                c.execute(
                    "INSERT INTO records VALUES ('team-a', 'c', 'eve', ?1, 1, \
                     '2026-05-01T09:30:00.000000Z', 'r', 's')",
                    [&text],
                )
                .expect("SQLite takes the text");
            }
            Backend::Postgres => {
                db.client()
                    .await
                    .execute(
                        "INSERT INTO records VALUES ('team-a', 'c', 'eve', $1::text::jsonb, 1, now(), 'r', 's')",
                        &[&text],
                    )
                    .await
                    .expect("jsonb takes it");
            }
        }
        let err = Ask::new("c").run(&store).await.unwrap_err();
        let message = err.to_string();
        assert!(
            matches!(&err, LookupError::Store(StoreError::Unreadable { key, collection, .. })
                if key == "eve" && collection == "c")
                && message.contains("record `eve` of collection `c` cannot be read back")
                && message.contains("recursion limit"),
            "{backend:?}: {message}"
        );
        assert_eq!(err.code(), "records.lookup_failed", "{backend:?}");
        // Another collection is not disturbed, and the row can be deleted.
        assert!(Ask::new("other").keys(&store).await.is_empty());
        assert!(store.delete("team-a", "c", "eve").await.expect("delete"));
        assert_eq!(Ask::new("c").keys(&store).await, ["fine"], "{backend:?}");
    }
}
