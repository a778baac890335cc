//! Records into the real table, and one condition checked against the
//! in-memory evaluator record by record.

use std::collections::BTreeMap;
use std::fmt::Write as _;

use coxswain_core::expr::{Root, parse};
use coxswain_records::record::SELECT_COLUMNS;
use coxswain_records::{Record, bind, compile};
use serde_json::{Value, json};
use tokio_postgres::Client;
use tokio_postgres::types::{ToSql, Type};

/// A record to insert.
#[derive(Clone, Debug)]
pub struct Rec {
    pub key: String,
    pub value: Value,
    pub version: i64,
    /// Microseconds since 1970.
    pub saved_us: i64,
    pub run: String,
    pub step: String,
}

/// Inserts `recs` into `collection` and reads them back as `$record` sees
/// them (the values as `jsonb` returns them), by key.
pub async fn insert(client: &Client, collection: &str, recs: &[Rec]) -> BTreeMap<String, Value> {
    let keys: Vec<&str> = recs.iter().map(|r| r.key.as_str()).collect();
    let values: Vec<&Value> = recs.iter().map(|r| &r.value).collect();
    let versions: Vec<i64> = recs.iter().map(|r| r.version).collect();
    let saved: Vec<i64> = recs.iter().map(|r| r.saved_us).collect();
    let runs: Vec<&str> = recs.iter().map(|r| r.run.as_str()).collect();
    let steps: Vec<&str> = recs.iter().map(|r| r.step.as_str()).collect();
    client
        .execute(
            "INSERT INTO records (namespace, collection, key, value, version, saved_at, run, step) \
             SELECT 'default', $1, k, v, ver, 'epoch'::timestamptz + us * interval '1 microsecond', r, s \
             FROM unnest($2::text[], $3::jsonb[], $4::int8[], $5::int8[], $6::text[], $7::text[]) \
             AS t(k, v, ver, us, r, s)",
            &[
                &collection,
                &keys,
                &values,
                &versions,
                &saved,
                &runs,
                &steps,
            ],
        )
        .await
        .unwrap_or_else(|e| panic!("inserting {recs:?}: {e}"));
    let rows = client
        .query(
            &format!("SELECT {SELECT_COLUMNS} FROM records WHERE collection = $1"),
            &[&collection],
        )
        .await
        .expect("reading the records back");
    rows.iter()
        .map(|row| {
            let r = Record::from_row(row).expect("a record row");
            (r.key.clone(), r.to_json())
        })
        .collect()
}

/// What the evaluator answers for one record.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Outcome {
    Keep,
    Drop,
    Fail,
}

/// Counts over many checks, to show the tests are not vacuous.
#[derive(Default, Debug)]
pub struct Stats {
    pub conditions: usize,
    pub exact: usize,
    pub with_gaps: usize,
    pub kept: usize,
    pub dropped: usize,
    pub failed: usize,
    /// Records SQL left to memory.
    pub undecided: usize,
    /// Records SQL decided.
    pub decided: usize,
    /// Records `narrow` selects (the others it proved dropped).
    pub narrowed_in: usize,
    /// Conditions whose `narrow` is not `TRUE`.
    pub narrowing: usize,
}

/// Compiles `cond` (`$item` is the record, `$input` the run's input) and
/// checks, for every record of `collection`: what `keep`, `drop` and `fail`
/// select is what the evaluator answers, `candidates` is everything but the
/// surely dropped, `undecided` exactly what none of the three selects, and
/// when the filter is exact nothing is undecided. Also runs `keep` as a
/// `WHERE` clause, as a lookup will. `SHOW_UNDECIDED=1` prints each record
/// left undecided, `SHOW_GAPS=1` each condition with parts left to memory.
pub async fn check(
    client: &Client,
    collection: &str,
    records: &BTreeMap<String, Value>,
    input: &Value,
    cond: &str,
    stats: &mut Stats,
) -> Result<(), String> {
    let expr = parse(cond).map_err(|e| format!("{cond:?} does not parse: {e}"))?;
    let run = json!({ "input": input });
    let bindings = bind(&expr, &Root::Item, &run).map_err(|e| e.to_string())?;
    let filter = compile(&expr, &Root::Item, &bindings, 2).map_err(|e| e.to_string())?;
    let describe = |extra: &str| {
        let mut s = String::new();
        let _ = writeln!(s, "condition: {cond}");
        let _ = writeln!(s, "input: {input}");
        let _ = writeln!(s, "keep: {}", filter.keep);
        let _ = writeln!(s, "drop: {}", filter.drop);
        let _ = writeln!(s, "fail: {}", filter.fail);
        let _ = writeln!(s, "narrow: {}", filter.narrow);
        let _ = writeln!(s, "params: {:?}", filter.params);
        let _ = writeln!(
            s,
            "exact: {}, not compiled: {:?}",
            filter.exact, filter.not_compiled
        );
        s.push_str(extra);
        s
    };

    let mut params: Vec<(&(dyn ToSql + Sync), Type)> = vec![(&collection, Type::TEXT)];
    params.extend(filter.typed_params());
    let sql = format!(
        "SELECT key, COALESCE({k}, FALSE), COALESCE({d}, FALSE), COALESCE({f}, FALSE), \
         COALESCE({c}, FALSE), COALESCE({u}, FALSE), COALESCE({n}, FALSE) FROM records WHERE collection = $1",
        n = filter.narrow,
        k = filter.keep,
        d = filter.drop,
        f = filter.fail,
        c = filter.candidates(),
        u = filter.undecided(),
    );
    let rows = client
        .query_typed(&sql, &params)
        .await
        .map_err(|e| describe(&format!("the query failed: {e:?}\n{sql}")))?;
    if rows.len() != records.len() {
        return Err(describe(&format!(
            "{} rows for {} records",
            rows.len(),
            records.len()
        )));
    }
    let where_keep = client
        .query_typed(
            &format!(
                "SELECT key FROM records WHERE collection = $1 AND {}",
                filter.keep
            ),
            &params,
        )
        .await
        .map_err(|e| describe(&format!("the keep query failed: {e:?}")))?;
    let where_keep: std::collections::BTreeSet<String> =
        where_keep.iter().map(|r| r.get(0)).collect();

    if std::env::var_os("SHOW_GAPS").is_some() && !filter.not_compiled.is_empty() {
        eprintln!(
            "gaps: {cond}: {:?} (sql {} bytes)",
            filter.not_compiled,
            filter.keep.len() + filter.drop.len() + filter.fail.len()
        );
    }
    stats.conditions += 1;
    stats.exact += usize::from(filter.exact);
    stats.narrowing += usize::from(filter.narrow != "TRUE");
    stats.with_gaps += usize::from(!filter.not_compiled.is_empty());
    for row in &rows {
        let key: String = row.get(0);
        let (keep, drop, fail, cand, und, narrow): (bool, bool, bool, bool, bool, bool) = (
            row.get(1),
            row.get(2),
            row.get(3),
            row.get(4),
            row.get(5),
            row.get(6),
        );
        let record = &records[&key];
        let scope = json!({ "input": input, "item": record });
        let truth = match expr.eval_bool(&scope) {
            Ok(true) => Outcome::Keep,
            Ok(false) => Outcome::Drop,
            Err(_) => Outcome::Fail,
        };
        let bad = |what: &str| {
            describe(&format!(
                "record {key}: {record}\nevaluator: {truth:?} ({:?}); SQL keep={keep} drop={drop} fail={fail} candidates={cand} undecided={und}: {what}",
                expr.eval_bool(&scope)
            ))
        };
        match truth {
            Outcome::Keep => stats.kept += 1,
            Outcome::Drop => stats.dropped += 1,
            Outcome::Fail => stats.failed += 1,
        }
        if (keep && truth != Outcome::Keep)
            || (drop && truth != Outcome::Drop)
            || (fail && truth != Outcome::Fail)
        {
            return Err(bad("SQL decided otherwise"));
        }
        if truth != Outcome::Drop && !narrow {
            return Err(bad(
                "narrow leaves out a record the evaluator keeps or fails on",
            ));
        }
        if narrow {
            stats.narrowed_in += 1;
        }
        let decided = keep || drop || fail;
        if filter.exact && !decided {
            return Err(bad("an exact filter left the record undecided"));
        }
        if cand == drop {
            return Err(bad("candidates() is not everything but drop"));
        }
        if und == decided {
            return Err(bad("undecided() disagrees with keep/drop/fail"));
        }
        if where_keep.contains(&key) != keep {
            return Err(bad("keep in a WHERE clause selects otherwise"));
        }
        if decided {
            stats.decided += 1;
        } else {
            stats.undecided += 1;
            if std::env::var_os("SHOW_UNDECIDED").is_some() {
                eprintln!("undecided: {cond} on {record} ({truth:?})");
            }
        }
    }
    Ok(())
}
