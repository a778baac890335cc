//! `where` conditions compiled to SQL and run on a real PostgreSQL agree with
//! the in-memory evaluator, record by record: generated records and
//! conditions (a property test), then every pair of awkward numbers and of
//! awkward texts under every comparison.
//!
//! `$item` stands for `$record` (the language has no `$record` yet); the
//! records are read back from `jsonb` before the evaluator sees them, as a
//! lookup will hand them over.

mod support;

use std::time::Instant;

use proptest::prelude::*;
use proptest::test_runner::TestCaseError;
use serde_json::{Value, json};
use support::check::{Rec, Stats, check, insert};

// --- values ------------------------------------------------------------------

fn float(f: f64) -> Value {
    serde_json::Number::from_f64(f).map_or(Value::Null, Value::Number)
}

/// Numbers that trip exactness: the ends of 64 bits, 2^53 + 1, floats that
/// `jsonb` gives back as whole numbers (2^60 → 1152921504606847000), 17
/// digits, subnormals, the largest float.
const FLOATS: &[f64] = &[
    0.0,
    -0.0,
    0.1,
    0.5,
    1.0,
    -1.5,
    2.0,
    2.5,
    0.30000000000000004,
    0.7999999999999999,
    0.8,
    1e20,
    1e-30,
    5e-324,
    1e308,
    9_007_199_254_740_992.0,
    9_007_199_254_740_994.0,
    1_152_921_504_606_846_976.0,
    18_446_744_073_709_551_616.0,
    -9_223_372_036_854_775_808.0,
    9_223_372_036_854_775_808.0,
    9.000_000_000_000_002,
    123_456.789,
    1e15,
    1_000_000_000_000_000.2,
];
const INTS: &[i64] = &[
    i64::MIN,
    i64::MAX,
    -9_007_199_254_740_993,
    9_007_199_254_740_993,
    1_152_921_504_606_846_976,
    1_152_921_504_606_847_000,
    9_007_199_254_740_992,
];
const UINTS: &[u64] = &[
    u64::MAX,
    9_223_372_036_854_775_808,
    18_446_744_073_709_551_000,
];
const TEXTS: &[&str] = &[
    "",
    "a",
    "ab",
    "abc",
    "b",
    "B",
    "Z",
    "é",
    "e\u{301}",
    "😀",
    "a b",
    "1",
    "2",
    "true",
    "null",
    "k1",
    "2026",
    "\u{10FFFF}",
    "\u{FFFF}",
    "aé",
    "Ab",
];

fn number() -> impl Strategy<Value = Value> {
    prop_oneof![
        (-3i64..=3).prop_map(Value::from),
        prop::sample::select(INTS).prop_map(Value::from),
        prop::sample::select(UINTS).prop_map(Value::from),
        prop::sample::select(FLOATS).prop_map(float),
        any::<f64>().prop_map(float),
        (-2000i32..2000, 0u32..4).prop_map(|(m, e)| float(f64::from(m) / 10f64.powi(e as i32))),
    ]
}

fn text() -> impl Strategy<Value = String> {
    prop_oneof![
        prop::sample::select(TEXTS).prop_map(str::to_string),
        prop::collection::vec(
            prop::sample::select(vec!['a', 'b', 'B', 'é', '😀', ' ', '1']),
            0..4
        )
        .prop_map(|cs| cs.into_iter().collect()),
    ]
}

fn scalar() -> impl Strategy<Value = Value> {
    prop_oneof![
        Just(Value::Null),
        any::<bool>().prop_map(Value::Bool),
        number(),
        number(),
        text().prop_map(Value::String),
        text().prop_map(Value::String),
    ]
}

fn field() -> impl Strategy<Value = String> {
    prop::sample::select(vec!["a", "b", "x", "0", "é", "it's"]).prop_map(str::to_string)
}

fn json_value() -> impl Strategy<Value = Value> {
    scalar().prop_recursive(2, 12, 4, |inner| {
        prop_oneof![
            prop::collection::vec(inner.clone(), 0..4).prop_map(Value::Array),
            prop::collection::btree_map(field(), inner, 0..3)
                .prop_map(|m| Value::Object(m.into_iter().collect())),
        ]
    })
}

/// A record's value: mostly an object whose fields the conditions read,
/// each present or missing (`n` mostly a number, `s` mostly a text, `tags`
/// mostly a list); sometimes any JSON.
fn record_value() -> impl Strategy<Value = Value> {
    let typed = |t: BoxedStrategy<Value>| {
        prop::option::weighted(0.8, prop_oneof![4 => t, 1 => json_value()]).boxed()
    };
    let fields = (
        prop::option::weighted(0.7, json_value()),
        prop::option::weighted(0.7, json_value()),
        prop::option::weighted(0.7, json_value()),
        typed(number().boxed()),
        typed(text().prop_map(Value::String).boxed()),
        typed(
            prop::collection::vec(scalar(), 0..4)
                .prop_map(Value::Array)
                .boxed(),
        ),
        prop::option::weighted(0.7, json_value()),
    );
    prop_oneof![
        4 => fields.prop_map(|(a, b, c, n, s, tags, o)| {
            let mut m = serde_json::Map::new();
            for (k, v) in [("a", a), ("b", b), ("c", c), ("n", n), ("s", s), ("tags", tags), ("o", o)] {
                if let Some(v) = v {
                    m.insert(k.to_string(), v);
                }
            }
            Value::Object(m)
        }),
        1 => json_value(),
    ]
}

fn records() -> impl Strategy<Value = Vec<Rec>> {
    prop::collection::vec(
        (
            prop::sample::select(vec!["k", "K", "é", "a😀", "2026-"]),
            record_value(),
            prop_oneof![Just(1i64), 1i64..5, Just(i64::MAX)],
            // 1970 … 2100, to the microsecond.
            0i64..4_102_444_800_000_000,
            prop::sample::select(vec!["run-a", "run-b", "Run-é"]),
            prop::sample::select(vec!["fetch", "save", ""]),
        ),
        0..10,
    )
    .prop_map(|rs| {
        rs.into_iter()
            .enumerate()
            .map(|(i, (prefix, value, version, saved_us, run, step))| Rec {
                key: format!("{prefix}{i}"),
                value,
                version,
                saved_us,
                run: run.to_string(),
                step: step.to_string(),
            })
            .collect()
    })
}

// --- conditions ----------------------------------------------------------------

const PATHS: &[&str] = &[
    "$item.value.a",
    "$item.value.b",
    "$item.value.c",
    "$item.value.n",
    "$item.value.s",
    "$item.value.tags",
    "$item.value.tags[0]",
    "$item.value.tags[-1]",
    "$item.value.a.b",
    "$item.value.o.x",
    "$item.value[\"a\"]",
    "$item.value.a[0]",
    "$item.value.o[\"0\"]",
    "$item.value.o[\"it's\"]",
    "$item.value",
    "$item.value.missing",
    "$item.key",
    "$item.version",
    "$item.run",
    "$item.step",
    "$item.savedAt",
    "$item.key.x",
    "$item",
];
const LITERALS: &[&str] = &[
    "0",
    "1",
    "2",
    "-1",
    "2.5",
    "0.1",
    "0.5",
    "-0.0",
    "1.0",
    "0.30000000000000004",
    "9223372036854775807",
    "9223372036854775808",
    "18446744073709551615",
    "-9223372036854775808",
    "1152921504606846976.0",
    "1152921504606847000",
    "9007199254740993",
    "\"\"",
    "\"a\"",
    "\"b\"",
    "\"B\"",
    "\"é\"",
    "'😀'",
    "\"k1\"",
    "\"2026\"",
    "\"a b\"",
    "\"run-a\"",
    "true",
    "false",
    "null",
];
const BOUND: &[&str] = &[
    "$input.x",
    "$input.y",
    "$input.s",
    "$input.n",
    "$input.l",
    "$input.missing",
];
const OPS: &[&str] = &["==", "!=", "<", "<=", ">", ">="];
const FUNCS: &[&str] = &["contains", "startswith", "endswith"];

#[derive(Clone, Debug)]
enum Cond {
    Cmp(&'static str, Opd, Opd),
    Call(&'static str, Opd, Opd),
    Truthy(Opd),
    Not(Box<Cond>),
    And(Box<Cond>, Box<Cond>),
    Or(Box<Cond>, Box<Cond>),
}

#[derive(Clone, Debug)]
enum Opd {
    Text(&'static str),
    Len(Box<Opd>),
    Cond(Box<Cond>),
}

fn leaf_operand() -> impl Strategy<Value = Opd> {
    prop_oneof![
        5 => prop::sample::select(PATHS).prop_map(Opd::Text),
        3 => prop::sample::select(LITERALS).prop_map(Opd::Text),
        2 => prop::sample::select(BOUND).prop_map(Opd::Text),
        1 => prop::sample::select(PATHS).prop_map(|p| Opd::Len(Box::new(Opd::Text(p)))),
    ]
}

/// `path op side`: an operator of OPS between one of `paths` and one of
/// `sides`.
fn compared(
    paths: Vec<&'static str>,
    sides: &'static [&'static str],
) -> impl Strategy<Value = Cond> {
    (
        prop::sample::select(OPS),
        prop::sample::select(paths),
        prop::sample::select(sides),
    )
        .prop_map(|(op, p, c)| Cond::Cmp(op, Opd::Text(p), Opd::Text(c)))
}

/// A comparison that mostly answers rather than fails: a number field
/// against a number, a text field or column against a text.
fn typed_cond() -> impl Strategy<Value = Cond> {
    const NUMBERS: &[&str] = &[
        "0",
        "1",
        "2",
        "-1",
        "2.5",
        "0.1",
        "0.5",
        "-0.0",
        "0.30000000000000004",
        "9223372036854775808",
        "-9223372036854775808",
        "1152921504606846976.0",
        "$input.n",
        "$item.version",
    ];
    const TEXT_SIDES: &[&str] = &[
        "\"\"", "\"a\"", "\"b\"", "\"B\"", "\"é\"", "'😀'", "\"k1\"", "\"2026\"", "$input.s",
    ];
    prop_oneof![
        compared(
            vec!["$item.value.n", "$item.version", "$item.value.tags[-1]"],
            NUMBERS,
        ),
        compared(
            vec![
                "$item.value.s",
                "$item.key",
                "$item.run",
                "$item.savedAt",
                "$item.value.tags[0]",
            ],
            TEXT_SIDES,
        ),
        (
            prop::sample::select(FUNCS),
            prop::sample::select(vec!["$item.value.s", "$item.key", "$item.value.tags"]),
            prop::sample::select(TEXT_SIDES),
        )
            .prop_map(|(f, p, c)| Cond::Call(f, Opd::Text(p), Opd::Text(c))),
    ]
}

fn leaf_cond() -> impl Strategy<Value = Cond> {
    prop_oneof![
        5 => typed_cond(),
        4 => (prop::sample::select(&["==", "!="][..]), leaf_operand(), leaf_operand())
            .prop_map(|(op, a, b)| Cond::Cmp(op, a, b)),
        3 => (prop::sample::select(OPS), leaf_operand(), leaf_operand())
            .prop_map(|(op, a, b)| Cond::Cmp(op, a, b)),
        2 => (prop::sample::select(FUNCS), leaf_operand(), leaf_operand())
            .prop_map(|(f, a, b)| Cond::Call(f, a, b)),
        1 => leaf_operand().prop_map(Cond::Truthy),
    ]
}

fn condition() -> impl Strategy<Value = Cond> {
    leaf_cond().prop_recursive(3, 12, 2, |inner| {
        prop_oneof![
            inner.clone().prop_map(|c| Cond::Not(Box::new(c))),
            (inner.clone(), inner.clone()).prop_map(|(a, b)| Cond::And(Box::new(a), Box::new(b))),
            (inner.clone(), inner.clone()).prop_map(|(a, b)| Cond::Or(Box::new(a), Box::new(b))),
            // A condition as a value: true/false only equal, never order.
            (
                prop::sample::select(&["==", "!="][..]),
                inner.clone(),
                leaf_operand()
            )
                .prop_map(|(op, a, b)| Cond::Cmp(op, Opd::Cond(Box::new(a)), b)),
        ]
    })
}

fn render_opd(o: &Opd) -> String {
    match o {
        Opd::Text(t) => (*t).to_string(),
        Opd::Len(inner) => format!("len({})", render_opd(inner)),
        Opd::Cond(c) => format!("({})", render(c)),
    }
}

fn render(c: &Cond) -> String {
    match c {
        Cond::Cmp(op, a, b) => format!("{} {op} {}", render_opd(a), render_opd(b)),
        Cond::Call(f, a, b) => format!("{f}({}, {})", render_opd(a), render_opd(b)),
        Cond::Truthy(o) => render_opd(o),
        Cond::Not(a) => format!("not ({})", render(a)),
        Cond::And(a, b) => format!("({}) and ({})", render(a), render(b)),
        Cond::Or(a, b) => format!("({}) or ({})", render(a), render(b)),
    }
}

fn input() -> impl Strategy<Value = Value> {
    (
        json_value(),
        json_value(),
        text(),
        number(),
        prop::collection::vec(scalar(), 0..4),
    )
        .prop_map(|(x, y, s, n, l)| json!({"x": x, "y": y, "s": s, "n": n, "l": l}))
}

/// [`check`], failing the test where SQL and the evaluator disagree.
async fn agrees(
    client: &tokio_postgres::Client,
    collection: &str,
    records: &std::collections::BTreeMap<String, Value>,
    input: &Value,
    cond: &str,
    stats: &mut Stats,
) {
    check(client, collection, records, input, cond, stats)
        .await
        .unwrap_or_else(|e| panic!("{e}"));
}

fn runtime() -> tokio::runtime::Runtime {
    tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .expect("a runtime")
}

// --- tests ----------------------------------------------------------------------

/// Generated records and conditions: for each condition, what SQL decides
/// is what the evaluator answers, record by record.
#[test]
fn generated_conditions_agree_with_the_evaluator() {
    let rt = runtime();
    let client = rt.block_on(support::client());
    let mut runner = support::proptest_runner(256);
    let cases = runner.config().cases;
    let strategy = (records(), input(), prop::collection::vec(condition(), 8));
    let stats = std::cell::RefCell::new(Stats::default());
    let counter = std::cell::Cell::new(0u64);
    let started = Instant::now();
    let result = runner.run(&strategy, |(recs, input, conds)| {
        counter.set(counter.get() + 1);
        let collection = format!("c{}", counter.get());
        let mut stats = stats.borrow_mut();
        let stats = &mut *stats;
        rt.block_on(async {
            let stored = insert(&client, &collection, &recs).await;
            for c in &conds {
                let text = render(c);
                check(&client, &collection, &stored, &input, &text, stats)
                    .await
                    .map_err(TestCaseError::fail)?;
            }
            Ok(())
        })
    });
    let stats = stats.into_inner();
    eprintln!("{cases} cases in {:.1?}: {stats:?}", started.elapsed());
    if let Err(e) = result {
        panic!("{e}");
    }
    // Not vacuous: every outcome occurs, most records are decided in SQL,
    // and many conditions compile exactly.
    assert!(
        stats.kept > 0 && stats.dropped > 0 && stats.failed > 0,
        "{stats:?}"
    );
    assert!(stats.decided > stats.undecided * 4, "{stats:?}");
    assert!(stats.exact * 4 > stats.conditions, "{stats:?}");
    // `narrow` does narrow: some conditions have one, and it leaves out
    // records (all of them dropped, as `check` proves).
    assert!(
        stats.narrowing * 10 > stats.conditions
            && stats.narrowed_in < stats.kept + stats.dropped + stats.failed,
        "{stats:?}"
    );
}

/// Every awkward number against every other, as record values and as
/// constants (literals where the language can write them, bound values
/// otherwise), under every comparison; and record against record.
#[test]
fn awkward_numbers_agree_under_every_comparison() {
    let rt = runtime();
    rt.block_on(async {
        let client = support::client().await;
        let mut values: Vec<Value> = FLOATS.iter().map(|f| float(*f)).collect();
        values.extend(INTS.iter().map(|i| Value::from(*i)));
        values.extend(UINTS.iter().map(|u| Value::from(*u)));
        values.extend([-3, -1, 0, 1, 3].map(Value::from));
        values.extend([
            json!("2"),
            json!(null),
            json!(true),
            json!([1]),
            json!({"a": 1}),
        ]);
        let rec = |key: String, n: &Value, m: &Value| Rec {
            key,
            value: json!({"n": n, "m": m, "l": [m]}),
            version: 1,
            saved_us: 0,
            run: "r".into(),
            step: "s".into(),
        };
        // One record per value against constants; every pair against each
        // other.
        let singles: Vec<Rec> = values
            .iter()
            .enumerate()
            .map(|(i, v)| rec(format!("r{i}"), v, v))
            .collect();
        let pairs: Vec<Rec> = values
            .iter()
            .enumerate()
            .flat_map(|(i, a)| {
                values
                    .iter()
                    .enumerate()
                    .map(move |(j, b)| rec(format!("r{i}-{j}"), a, b))
            })
            .collect();
        let stored = insert(&client, "numbers", &singles).await;
        let stored_pairs = insert(&client, "pairs", &pairs).await;
        let mut stats = Stats::default();
        let started = Instant::now();
        for (i, c) in values.iter().enumerate() {
            let input = json!({ "c": c });
            for op in OPS {
                for cond in [
                    format!("$item.value.n {op} $input.c"),
                    format!("$input.c {op} $item.value.n"),
                ] {
                    check(&client, "numbers", &stored, &input, &cond, &mut stats)
                        .await
                        .unwrap_or_else(|e| panic!("value {i}: {e}"));
                }
            }
        }
        for lit in LITERALS {
            for op in OPS {
                let cond = format!("$item.value.n {op} {lit}");
                agrees(&client, "numbers", &stored, &json!({}), &cond, &mut stats).await;
            }
        }
        for op in OPS {
            for cond in [
                format!("$item.value.n {op} $item.value.m"),
                format!("not ($item.value.n {op} $item.value.m)"),
                format!("contains($item.value.l, $item.value.n) {op} true"),
                format!("len($item.value.m) {op} 1"),
                format!("$item.value.n {op} $item.version"),
            ] {
                agrees(
                    &client,
                    "pairs",
                    &stored_pairs,
                    &json!({}),
                    &cond,
                    &mut stats,
                )
                .await;
            }
        }
        for cond in [
            "$item.value.n",
            "not $item.value.m",
            "contains($input.l, $item.value.n)",
        ] {
            let input = json!({"l": values});
            agrees(&client, "numbers", &stored, &input, cond, &mut stats).await;
        }
        eprintln!("numbers in {:.1?}: {stats:?}", started.elapsed());
        assert!(stats.decided > stats.undecided * 10, "{stats:?}");
    });
}

/// Texts order by their bytes (code points), never by the database's
/// collation (ICU `en-US` in e2e/postgres/up, where "a" < "B").
#[test]
fn awkward_texts_order_by_bytes() {
    let rt = runtime();
    rt.block_on(async {
        let client = support::client().await;
        let recs: Vec<Rec> = TEXTS
            .iter()
            .enumerate()
            .map(|(i, t)| Rec {
                key: (*t).to_string(),
                value: json!({"s": t, "l": [t, i], "o": {"t": t}}),
                version: i as i64 + 1,
                saved_us: i as i64,
                run: (*t).to_string(),
                step: format!("{t}{t}"),
            })
            .collect();
        let stored = insert(&client, "texts", &recs).await;
        let mut stats = Stats::default();
        for t in TEXTS {
            let input = json!({ "t": t });
            for op in OPS {
                for cond in [
                    format!("$item.value.s {op} $input.t"),
                    format!("$item.key {op} $input.t"),
                    format!("$item.run {op} $item.step"),
                    format!("$item.value.o.t {op} $item.key"),
                ] {
                    agrees(&client, "texts", &stored, &input, &cond, &mut stats).await;
                }
            }
            for f in FUNCS {
                for cond in [
                    format!("{f}($item.value.s, $input.t)"),
                    format!("{f}($input.t, $item.value.s)"),
                    format!("{f}($item.key, $item.value.s)"),
                    format!("{f}($item.value.l, $input.t)"),
                ] {
                    agrees(&client, "texts", &stored, &input, &cond, &mut stats).await;
                }
            }
        }
        eprintln!("texts: {stats:?}");
        assert_eq!(stats.undecided, 0, "texts are always decided: {stats:?}");
    });
}
