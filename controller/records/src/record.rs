//! A stored record as a `where` condition sees it, and the table it lives in.
//!
//! The compiler in [`crate::filter`] writes SQL over the columns of
//! [`SCHEMA`], and the in-memory evaluator reads [`Record::to_json`] of the
//! same row. Both must describe one value, so the text of `savedAt` is made
//! by PostgreSQL in both places, with the one expression [`SAVED_AT_TEXT`].

use serde_json::{Value, json};
use tokio_postgres::Row;

/// One spelling of the `savedAt` text for [`SAVED_AT_TEXT`] and
/// [`SELECT_COLUMNS`].
macro_rules! saved_at_text {
    () => {
        r#"to_char(saved_at AT TIME ZONE 'UTC', 'YYYY-MM-DD"T"HH24:MI:SS.US"Z"')"#
    };
}

/// The table of records: one row per (namespace, collection, key), the
/// newest version.
///
/// Every column is `NOT NULL`: the SQL the compiler writes relies on it (a
/// text column is always text, `version` always a number). `value` may
/// still hold JSON `null`. The text columns compare by their bytes
/// (`COLLATE "C"`), whatever the database's collation, so the primary key's
/// index gives the order of `orderBy: $record.key` (see [`crate::order`]).
pub const SCHEMA: &str = "CREATE TABLE IF NOT EXISTS records (
    namespace text COLLATE \"C\" NOT NULL,
    collection text COLLATE \"C\" NOT NULL,
    key text COLLATE \"C\" NOT NULL,
    value jsonb NOT NULL,
    version bigint NOT NULL,
    saved_at timestamptz NOT NULL,
    run text COLLATE \"C\" NOT NULL,
    step text COLLATE \"C\" NOT NULL,
    PRIMARY KEY (namespace, collection, key)
)";

/// `saved_at` as the text `$record.savedAt` reads: UTC, microseconds
/// (PostgreSQL's precision), always the same width
/// (`2026-05-01T09:30:00.000000Z`), so text order is time order.
///
/// The compiler compares this text, not the timestamp, so a condition such
/// as `$record.savedAt >= "2026-05"` means the same in SQL and in memory.
pub const SAVED_AT_TEXT: &str = saved_at_text!();

/// The select list that [`Record::from_row`] reads, in its order.
pub const SELECT_COLUMNS: &str = concat!(
    "key, value, version, ",
    saved_at_text!(),
    " AS saved_at, run, step"
);

/// One stored record: what `$record` is in a `where` condition and what a
/// lookup hands a step.
#[derive(Debug, Clone, PartialEq)]
pub struct Record {
    /// The record's key within its collection.
    pub key: String,
    /// What was saved, as read back: from PostgreSQL, `jsonb` keeps numbers
    /// as decimals (see the crate documentation); from SQLite, exactly as
    /// serde_json wrote it.
    pub value: Value,
    /// 1 for the first save of the key, one more for each save after it.
    pub version: i64,
    /// When the version was saved, as [`SAVED_AT_TEXT`] writes it.
    pub saved_at: String,
    /// The run that saved it.
    pub run: String,
    /// The step that saved it.
    pub step: String,
}

/// A row that does not hold a record as [`SELECT_COLUMNS`] selects it, or
/// whose value serde_json cannot read back (a number past ±1.8e308 as
/// `jsonb` prints it); the message names the cause, not only the column.
#[derive(Debug, thiserror::Error)]
#[error("reading a record from its row: {err}{cause}", err = .0, cause = cause(.0))]
pub struct RowError(#[from] tokio_postgres::Error);

fn cause(e: &tokio_postgres::Error) -> String {
    std::error::Error::source(e).map_or_else(String::new, |c| format!(": {c}"))
}

impl Record {
    /// Reads a row selected with [`SELECT_COLUMNS`], so the caller never
    /// spells the columns or the time format twice.
    pub fn from_row(row: &Row) -> Result<Record, RowError> {
        Ok(Record {
            key: row.try_get("key")?,
            value: row.try_get("value")?,
            version: row.try_get("version")?,
            saved_at: row.try_get("saved_at")?,
            run: row.try_get("run")?,
            step: row.try_get("step")?,
        })
    }

    /// The record as `$record` reads it:
    /// `{key, value, version, savedAt, run, step}`.
    pub fn to_json(&self) -> Value {
        json!({
            "key": self.key,
            "value": self.value,
            "version": self.version,
            "savedAt": self.saved_at,
            "run": self.run,
            "step": self.step,
        })
    }
}
