//! The one order of a lookup's records, `orderBy` or not.
//!
//! `orderBy` names a path under `$record` (`$record.savedAt`,
//! `$record.value.priority`). The value it reads orders records by kind
//! first, then within the kind:
//!
//! 1. missing or `null`;
//! 2. numbers, by value (exactly: `2 < 2.5 < 3`, `1 == 1.0`);
//! 3. texts, by their bytes (UTF-8; PostgreSQL's `COLLATE "C"`, so `"B" <
//!    "a"` and `"é"` after `"z"`), whatever the database's collation;
//! 4. `false`, then `true`;
//! 5. lists, all equal to one another;
//! 6. objects, all equal to one another.
//!
//! Records the path ties (same value, or both lists) are ordered by key,
//! ascending. `descending: true` reverses the whole order, the key included.
//! Without `orderBy`, records come by key, ascending. `savedAt` is a text of
//! fixed width, so its order is time order; `version` is a number.
//!
//! The same order is written twice: [`compare`] in Rust (the SQLite store
//! sorts with it, and the PostgreSQL store merges what SQL kept with what
//! memory kept with it) and [`OrderBy::sql`] as an `ORDER BY` list for
//! PostgreSQL. A test checks on generated records that the two agree.
//!
//! Numbers compare as the records hold them once read back (see the crate
//! documentation for what `jsonb` does to numbers), while SQL orders
//! PostgreSQL's decimals: the two agree for every number serde_json writes
//! and reads back exactly (whole numbers of 64 bits, and every float whose
//! shortest decimal it parses to the same float).

use std::cmp::Ordering;

use coxswain_core::expr::{Expr, Reference, Root, parse};
use serde_json::{Number, Value, json};

use crate::filter::{Column, order_column};
use crate::number::{Exact, exact};
use crate::record::Record;

/// Why a path cannot order records.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("orderBy must be a path under $record, not `{reference}`")]
pub struct OrderError {
    /// The reference as written.
    pub reference: String,
}

/// An `orderBy`, checked and ready for both SQL and memory.
#[derive(Debug, Clone)]
pub struct OrderBy {
    /// The path alone, evaluated on each record by the evaluator itself (so
    /// a path means exactly what it means in a condition).
    path: Option<Expr>,
    column: Column,
    descending: bool,
}

impl OrderBy {
    /// `by` must read `$record`; `None` orders by key.
    pub fn new(by: Option<&Reference>, descending: bool) -> Result<OrderBy, OrderError> {
        let Some(r) = by else {
            return Ok(OrderBy {
                path: None,
                column: Column::Same,
                descending,
            });
        };
        let bad = || OrderError {
            reference: r.text().to_string(),
        };
        if *r.root() != Root::Record {
            return Err(bad());
        }
        let path = parse(r.text()).map_err(|_| bad())?;
        Ok(OrderBy {
            path: Some(path),
            column: order_column(r),
            descending,
        })
    }

    /// What the path reads on `record` (`null` where it leads nowhere), to
    /// hand to [`OrderBy::compare`].
    pub fn sort_value(&self, record: &Record) -> Value {
        let Some(path) = &self.path else {
            return Value::Null;
        };
        let scope = json!({ "record": record.to_json() });
        path.eval(&scope).unwrap_or(Value::Null)
    }

    /// The order of two records whose [`OrderBy::sort_value`]s are `va` and
    /// `vb`.
    pub fn compare(&self, a: &Record, va: &Value, b: &Record, vb: &Value) -> Ordering {
        let o = compare(va, vb).then_with(|| a.key.as_bytes().cmp(b.key.as_bytes()));
        if self.descending { o.reverse() } else { o }
    }

    /// Sorts `records` in this order.
    pub fn sort(&self, records: Vec<Record>) -> Vec<Record> {
        let mut keyed: Vec<(Value, Record)> = records
            .into_iter()
            .map(|r| (self.sort_value(&r), r))
            .collect();
        keyed.sort_by(|(va, a), (vb, b)| self.compare(a, va, b, vb));
        keyed.into_iter().map(|(_, r)| r).collect()
    }

    /// The `ORDER BY` list for PostgreSQL (without the words `ORDER BY`).
    pub fn sql(&self) -> String {
        sql(&self.column, self.descending)
    }
}

fn rank(v: &Value) -> u8 {
    match v {
        Value::Null => 0,
        Value::Number(_) => 1,
        Value::String(_) => 2,
        Value::Bool(_) => 3,
        Value::Array(_) => 4,
        Value::Object(_) => 5,
    }
}

/// The order of two values an `orderBy` path read (module docs), before
/// the key breaks ties.
pub fn compare(a: &Value, b: &Value) -> Ordering {
    match (a, b) {
        (Value::Number(x), Value::Number(y)) => compare_numbers(x, y),
        (Value::String(x), Value::String(y)) => x.as_bytes().cmp(y.as_bytes()),
        (Value::Bool(x), Value::Bool(y)) => x.cmp(y),
        _ => rank(a).cmp(&rank(b)),
    }
}

/// Two numbers by their exact values (a whole number against a float
/// without rounding either).
fn compare_numbers(x: &Number, y: &Number) -> Ordering {
    match (exact(x), exact(y)) {
        (Exact::Int(a), Exact::Int(b)) => a.cmp(&b),
        // JSON has no NaN; -0.0 and 0.0 are one value.
        (Exact::Float(a), Exact::Float(b)) => a.partial_cmp(&b).unwrap_or(Ordering::Equal),
        (Exact::Int(a), Exact::Float(b)) => int_vs_float(a, b),
        (Exact::Float(a), Exact::Int(b)) => int_vs_float(b, a).reverse(),
    }
}

/// A whole number against a float, exactly.
fn int_vs_float(i: i128, f: f64) -> Ordering {
    // 2^127: every float at or past it is beyond any i128.
    const LIMIT: f64 = 170_141_183_460_469_231_731_687_303_715_884_105_728.0;
    if f >= LIMIT {
        return Ordering::Less;
    }
    if f < -LIMIT {
        return Ordering::Greater;
    }
    let whole = f.trunc();
    // In range, so the cast is exact.
    match i.cmp(&(whole as i128)) {
        Ordering::Equal => {
            let frac = f - whole;
            if frac > 0.0 {
                Ordering::Less
            } else if frac < 0.0 {
                Ordering::Greater
            } else {
                Ordering::Equal
            }
        }
        o => o,
    }
}

/// The `ORDER BY` list for a column in the order of the module docs.
pub(crate) fn sql(column: &Column, descending: bool) -> String {
    // Columns named with the table: a bare `saved_at` in ORDER BY would be
    // the select list's `savedAt` text of that name, which no index gives.
    let dir = if descending { " DESC" } else { "" };
    let key = format!("records.key COLLATE \"C\"{dir}");
    match column {
        Column::Same => key,
        Column::SavedAt => format!("records.saved_at{dir}, {key}"),
        Column::Version => format!("records.version{dir}, {key}"),
        Column::Text(c) => format!("records.{c} COLLATE \"C\"{dir}, {key}"),
        Column::Json(x) => format!(
            "(CASE jsonb_typeof({x}) WHEN 'number' THEN 1 WHEN 'string' THEN 2 \
             WHEN 'boolean' THEN 3 WHEN 'array' THEN 4 WHEN 'object' THEN 5 ELSE 0 END){dir}, \
             (CASE WHEN jsonb_typeof({x}) = 'number' THEN ({x})::numeric END){dir}, \
             (CASE WHEN jsonb_typeof({x}) = 'string' THEN {x} #>> '{{}}' END) COLLATE \"C\"{dir}, \
             (CASE WHEN jsonb_typeof({x}) = 'boolean' THEN ({x})::boolean END){dir}, \
             {key}"
        ),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn kinds_come_in_the_documented_order() {
        let values = [
            json!(null),
            json!(-1),
            json!(0.5),
            json!(1),
            json!(1e30),
            json!(""),
            json!("B"),
            json!("a"),
            json!("é"),
            json!(false),
            json!(true),
            json!([]),
            json!({}),
        ];
        for (i, a) in values.iter().enumerate() {
            for (j, b) in values.iter().enumerate() {
                assert_eq!(compare(a, b), i.cmp(&j), "{a} against {b}");
            }
        }
    }

    #[test]
    fn numbers_compare_exactly() {
        assert_eq!(compare(&json!(1), &json!(1.0)), Ordering::Equal);
        assert_eq!(compare(&json!(0.0), &json!(-0.0)), Ordering::Equal);
        // 2^53 + 1 is above the float 2^53.
        assert_eq!(
            compare(
                &json!(9_007_199_254_740_993_i64),
                &json!(9_007_199_254_740_992.0)
            ),
            Ordering::Greater
        );
        assert_eq!(compare(&json!(u64::MAX), &json!(1e30)), Ordering::Less);
        assert_eq!(compare(&json!(-3), &json!(-2.5)), Ordering::Less);
        assert_eq!(compare(&json!(-2), &json!(-2.5)), Ordering::Greater);
        assert_eq!(compare(&json!([1, 2]), &json!(["a"])), Ordering::Equal);
    }
}
