//! Readable lookups, run as a lookup will run them (`keep` and `fail` as
//! `WHERE` clauses after the caller's `collection = $1`), and what `jsonb`
//! does to numbers, which the compiler is built around.

mod support;

use std::collections::BTreeSet;

use coxswain_core::expr::{Root, parse};
use coxswain_records::record::SELECT_COLUMNS;
use coxswain_records::{Filter, Record, bind, compile};
use serde_json::{Value, json};
use support::check::{Rec, insert};
use tokio_postgres::Client;
use tokio_postgres::types::{ToSql, Type};

fn tickets() -> Vec<Rec> {
    [
        ("t1", json!({"component": "db", "priority": 3, "tags": ["urgent", "db"], "title": "Disk full"})),
        ("t2", json!({"component": "db", "priority": 1})),
        ("t3", json!({"component": "web", "priority": 2.5, "tags": []})),
        ("t4", json!({"component": "db", "priority": "high"})),
        ("t5", json!({"component": "db"})),
        ("t6", json!({"component": "DB", "priority": 2})),
        ("t7", json!({"component": null, "priority": 2.0})),
    ]
    .into_iter()
    .map(|(key, value)| Rec {
        key: key.into(),
        value,
        version: 1,
        saved_us: 1_780_000_000_000_000,
        run: "triage-1".into(),
        step: "remember".into(),
    })
    .collect()
}

/// The keys `pred` selects in the collection, as a lookup queries.
async fn select(client: &Client, f: &Filter, pred: &str) -> BTreeSet<String> {
    let mut params: Vec<(&(dyn ToSql + Sync), Type)> = vec![(&"tickets", Type::TEXT)];
    params.extend(f.typed_params());
    client
        .query_typed(
            &format!("SELECT key FROM records WHERE collection = $1 AND {pred}"),
            &params,
        )
        .await
        .unwrap_or_else(|e| panic!("{pred}: {e:?}"))
        .iter()
        .map(|r| r.get(0))
        .collect()
}

fn keys(ks: &[&str]) -> BTreeSet<String> {
    ks.iter().map(|k| k.to_string()).collect()
}

#[tokio::test]
async fn typical_lookups_keep_and_fail_what_the_evaluator_does() {
    let client = support::client().await;
    insert(&client, "tickets", &tickets()).await;
    let input = json!({"component": "db"});
    // (condition, kept, failed, exact)
    let cases: &[(&str, &[&str], &[&str], bool)] = &[
        // "high" >= 2 and null >= 2 fail: the lookup as a whole fails.
        (
            "$item.value.component == $input.component and $item.value.priority >= 2",
            &["t1"],
            &["t4", "t5"],
            false,
        ),
        // A null check first spares t5; t4 still fails.
        (
            "$item.value.component == $input.component and $item.value.priority != null and $item.value.priority >= 2",
            &["t1"],
            &["t4"],
            false,
        ),
        // Texts are compared exactly: "DB" is not "db".
        (
            "$item.value.component == \"db\"",
            &["t1", "t2", "t4", "t5"],
            &[],
            true,
        ),
        // 2 and 2.0 are equal.
        ("$item.value.priority == 2", &["t6", "t7"], &[], false),
        ("contains($item.value.tags, \"urgent\")", &["t1"], &[], true),
        // A missing title is null: startswith is false, not a failure.
        (
            "startswith($item.value.title, \"Disk\")",
            &["t1"],
            &[],
            true,
        ),
        ("$item.key >= \"t5\"", &["t5", "t6", "t7"], &[], true),
        (
            "len($item.value.tags) > 1",
            &["t1"],
            &["t2", "t4", "t5", "t6", "t7"],
            true,
        ),
        (
            "not ($item.value.component == null)",
            &["t1", "t2", "t3", "t4", "t5", "t6"],
            &[],
            true,
        ),
    ];
    for (cond, kept, failed, exact) in cases {
        let expr = parse(cond).unwrap();
        let bindings = bind(&expr, &Root::Item, &json!({ "input": input })).unwrap();
        let f = compile(&expr, &Root::Item, &bindings, 2).unwrap();
        assert_eq!(f.exact, *exact, "{cond}");
        assert!(f.not_compiled.is_empty(), "{cond}: {:?}", f.not_compiled);
        assert_eq!(
            select(&client, &f, &f.keep).await,
            keys(kept),
            "{cond}: kept"
        );
        assert_eq!(
            select(&client, &f, &f.fail).await,
            keys(failed),
            "{cond}: failed"
        );
        // These records are all decided, exact filter or not.
        assert_eq!(
            select(&client, &f, &f.undecided()).await,
            keys(&[]),
            "{cond}: undecided"
        );
    }
}

/// `jsonb` keeps numbers as decimals and serde_json reads them back: a
/// whole decimal of 64 bits as a whole number, anything else as a float (not
/// always the nearest: serde_json's default parser). The compiler reproduces
/// the evaluator on the numbers as read back; these are the facts it builds
/// on, so a change of serde_json's features shows here.
#[tokio::test]
async fn jsonb_gives_numbers_back_as_decimals() {
    let client = support::client().await;
    let row = |v: Value| Rec {
        key: v.to_string(),
        value: v,
        version: 1,
        saved_us: 0,
        run: "r".into(),
        step: "s".into(),
    };
    let two_60 = 1_152_921_504_606_846_976.0_f64;
    let stored = insert(
        &client,
        "numbers",
        &[
            row(json!(two_60)),
            row(json!(0.1)),
            row(json!(1.0)),
            row(json!(-0.0)),
        ],
    )
    .await;
    let back = |v: Value| stored[&v.to_string()]["value"].clone();
    // 2^60 was saved as its shortest text, 1.152921504606847e18: it comes
    // back a whole number, and not 2^60.
    assert_eq!(back(json!(two_60)), json!(1_152_921_504_606_847_000_u64));
    assert_eq!(back(json!(0.1)), json!(0.1));
    assert!(back(json!(1.0)).is_f64(), "1.0 stays a float");
    assert_eq!(back(json!(-0.0)).as_f64(), Some(0.0));

    // The largest float goes in but does not come out: serde_json's parser
    // overflows on the 309-digit decimal `jsonb` prints. A save must refuse
    // such a value (issue 23), or records become unreadable.
    client
        .execute(
            "INSERT INTO records VALUES ('default', 'huge', 'max', $1, 1, now(), 'r', 's')",
            &[&json!(f64::MAX)],
        )
        .await
        .expect("jsonb takes it");
    let err = client
        .query_one(
            &format!("SELECT {SELECT_COLUMNS} FROM records WHERE collection = 'huge'"),
            &[],
        )
        .await
        .map(|row| Record::from_row(&row).map(|_| ()))
        .expect("the row is there")
        .expect_err("serde_json cannot read it back");
    assert!(err.to_string().contains("number out of range"), "{err}");
}
