//! The store a flow's `save` steps write and its `lookup`s read, and the
//! archive of finished Runs: one API over SQLite (`coxswain run` on a
//! laptop) and PostgreSQL (the controller on a cluster).
//!
//! # Semantics, on both backends
//!
//! - Collections belong to a namespace: the key of a record is (namespace,
//!   collection, key), and a lookup never sees another namespace's records.
//! - [`Store::save`] is an upsert by key. `version` is 1 for a new key and
//!   one more at each save after it; `savedAt` is set by the database
//!   ([`crate::record::SAVED_AT_TEXT`]'s format; SQLite's clock has
//!   milliseconds, so its last three digits are zeros). A deleted key saved
//!   again starts at 1 and is `created`.
//! - A save carries an idempotency key (the engine's `run-uid/step/attempt`):
//!   a save repeated with the same (namespace, idempotency key) changes
//!   nothing and answers what the first one answered, so a retry after a
//!   crash does not add a version. Concurrent saves with different keys to
//!   one record each get a version of their own.
//! - A lookup sees every save that returned before it started (one database,
//!   no replicas: read-your-writes).
//! - `where` is the condition language with `$record` as the record; every
//!   other reference reads the run's data. The in-memory evaluator is the
//!   meaning: a record is kept when it answers `true`, and when it fails on
//!   any record of the collection the lookup fails naming that record's key
//!   (the first by key) — never a partial answer.
//! - The order is [`crate::order`]'s; `limit` is 1 to [`MAX_LIMIT`].
//!
//! # How each backend answers
//!
//! SQLite keeps values as JSON text and evaluates `where` in memory over the
//! namespace's collection: there is no candidate bound locally, a laptop's
//! collection is read whole. PostgreSQL keeps values as `jsonb` and runs the
//! compiled condition ([`crate::filter`]): an exact one entirely in SQL (the
//! kept rows, sorted and limited, and one probe for a failing record); any
//! other also reads the records SQL cannot decide, at most
//! [`PgSettings::max_candidates`] of them, and evaluates them in memory —
//! past the bound the lookup fails saying so.
//!
//! Values that one backend could store but not give back are refused by
//! both: a text holding the character NUL (PostgreSQL's text and `jsonb`
//! cannot hold it) and a number serde_json cannot read back from the decimal
//! `jsonb` prints (such as the largest float).

use std::path::Path;

use coxswain_core::flow::{MAX_JSON_DEPTH, json_depth};
use serde_json::Value;

use crate::model::{
    ArchivedRun, Lookup, LookupError, MAX_LIMIT, RunQuery, RunSummary, Saved, Saving, StoreError,
    to_stored_time,
};
pub use crate::pg::PgSettings;
use crate::pg::PgStore;
use crate::record::Record;
use crate::sqlite::SqliteStore;

/// The records database, local or shared. Cloning is cheap and shares the
/// connections: the controller keeps one for its life.
#[derive(Clone)]
pub enum Store {
    /// A SQLite file, for `coxswain run`.
    Sqlite(SqliteStore),
    /// A PostgreSQL server, for the controller.
    Postgres(PgStore),
}

impl std::fmt::Debug for Store {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Store::Sqlite(s) => write!(f, "Store::Sqlite({})", s.path().display()),
            Store::Postgres(_) => f.write_str("Store::Postgres"),
        }
    }
}

impl Store {
    /// Opens (making its folder and the file when missing) a SQLite
    /// records database and migrates it.
    pub async fn open_sqlite(path: &Path) -> Result<Store, StoreError> {
        Ok(Store::Sqlite(SqliteStore::open(path).await?))
    }

    /// Connects to PostgreSQL (`postgres://…` or `host=… dbname=…`; no TLS
    /// yet: `sslmode=require` is refused) and migrates the schema, under an
    /// advisory lock so controllers starting together take turns. Refuses a
    /// schema newer than [`SCHEMA_VERSION`].
    pub async fn connect_postgres(url: &str, settings: PgSettings) -> Result<Store, StoreError> {
        Ok(Store::Postgres(PgStore::connect(url, settings).await?))
    }

    /// Saves a record (module docs: upsert, version, idempotency).
    pub async fn save(&self, s: &Saving) -> Result<Saved, StoreError> {
        check_saving(s)?;
        match self {
            Store::Sqlite(x) => x.save(s).await,
            Store::Postgres(x) => x.save(s).await,
        }
    }

    /// The records of a collection the condition keeps, in order, at most
    /// `limit`.
    pub async fn lookup(&self, q: &Lookup<'_>) -> Result<Vec<Record>, LookupError> {
        if !(1..=MAX_LIMIT).contains(&q.limit) {
            return Err(LookupError::Limit(q.limit));
        }
        match self {
            Store::Sqlite(x) => x.lookup(q).await,
            Store::Postgres(x) => x.lookup(q).await,
        }
    }

    /// Deletes one record; whether there was one.
    pub async fn delete(
        &self,
        namespace: &str,
        collection: &str,
        key: &str,
    ) -> Result<bool, StoreError> {
        match self {
            Store::Sqlite(x) => x.delete(namespace, collection, key).await,
            Store::Postgres(x) => x.delete(namespace, collection, key).await,
        }
    }

    /// Archives a Run that ended, replacing an earlier copy of the same uid
    /// (so archiving twice is harmless). Texts holding NUL have it replaced
    /// with U+FFFD, and numbers serde_json could not read back are kept as
    /// their text, so every Run can be archived and read back.
    pub async fn archive(&self, run: &ArchivedRun) -> Result<(), StoreError> {
        let run = archivable(run)?;
        match self {
            Store::Sqlite(x) => x.archive(&run).await,
            Store::Postgres(x) => x.archive(&run).await,
        }
    }

    /// Deletes the archived Runs that ended before `ended_before` (RFC
    /// 3339; one archived without an end counts from its creation);
    /// returns how many. The archive's retention.
    pub async fn prune_runs(&self, ended_before: &str) -> Result<u64, StoreError> {
        let before = to_stored_time(ended_before)?;
        match self {
            Store::Sqlite(x) => x.prune_runs(&before).await,
            Store::Postgres(x) => x.prune_runs(&before).await,
        }
    }

    /// Whether the Run with this uid is archived (retention deletes a Run
    /// only then).
    pub async fn is_archived(&self, uid: &str) -> Result<bool, StoreError> {
        match self {
            Store::Sqlite(x) => x.is_archived(uid).await,
            Store::Postgres(x) => x.is_archived(uid).await,
        }
    }

    /// The archived Run of this name; the one that ended last when the name
    /// was used more than once.
    pub async fn archived_run(
        &self,
        namespace: &str,
        name: &str,
    ) -> Result<Option<ArchivedRun>, StoreError> {
        match self {
            Store::Sqlite(x) => x.archived_run(namespace, name).await,
            Store::Postgres(x) => x.archived_run(namespace, name).await,
        }
    }

    /// Archived Runs, newest first.
    pub async fn list_runs(&self, q: &RunQuery) -> Result<Vec<RunSummary>, StoreError> {
        if !(1..=MAX_LIMIT).contains(&q.limit) {
            return Err(StoreError::Invalid(format!(
                "a list of runs is between 1 and {MAX_LIMIT} long, not {}",
                q.limit
            )));
        }
        let since = q.since.as_deref().map(to_stored_time).transpose()?;
        match self {
            Store::Sqlite(x) => x.list_runs(q, since.as_deref()).await,
            Store::Postgres(x) => x.list_runs(q, since.as_deref()).await,
        }
    }
}

fn check_saving(s: &Saving) -> Result<(), StoreError> {
    for (what, text) in [
        ("namespace", &s.namespace),
        ("collection", &s.collection),
        ("key", &s.key),
        ("idempotency key", &s.idempotency),
    ] {
        if text.is_empty() {
            return Err(StoreError::Invalid(format!("a record's {what} is empty")));
        }
    }
    for (what, text) in [
        ("namespace", &s.namespace),
        ("collection", &s.collection),
        ("key", &s.key),
        ("run", &s.run),
        ("step", &s.step),
        ("idempotency key", &s.idempotency),
    ] {
        if text.contains('\0') {
            return Err(StoreError::Invalid(format!(
                "the record's {what} holds the character NUL, which the records database cannot store"
            )));
        }
    }
    let depth = json_depth(&s.value);
    if depth > MAX_JSON_DEPTH {
        return Err(StoreError::TooDeep {
            collection: s.collection.clone(),
            key: s.key.clone(),
            depth,
        });
    }
    check_value(&s.value, &mut String::from("value")).map_err(|why| {
        StoreError::Invalid(format!(
            "record `{}` of collection `{}` cannot be saved: {why}",
            s.key, s.collection
        ))
    })
}

/// Whether `v` can be stored and read back the same on both backends.
fn check_value(v: &Value, at: &mut String) -> Result<(), String> {
    match v {
        Value::String(s) if s.contains('\0') => Err(format!(
            "the text at {at} holds the character NUL, which PostgreSQL cannot store"
        )),
        Value::Number(n) if !number_reads_back(n) => Err(format!(
            "the number at {at} ({n}) could not be read back from the database"
        )),
        Value::Array(items) => {
            for (i, x) in items.iter().enumerate() {
                let len = at.len();
                at.push_str(&format!("[{i}]"));
                check_value(x, at)?;
                at.truncate(len);
            }
            Ok(())
        }
        Value::Object(o) => {
            for (k, x) in o {
                if k.contains('\0') {
                    return Err(format!(
                        "a key in {at} holds the character NUL, which PostgreSQL cannot store"
                    ));
                }
                let len = at.len();
                at.push('.');
                at.push_str(k);
                check_value(x, at)?;
                at.truncate(len);
            }
            Ok(())
        }
        _ => Ok(()),
    }
}

/// `jsonb` prints a float's shortest decimal without an exponent (as Rust's
/// `{}` does); serde_json must be able to read that back.
fn number_reads_back(n: &serde_json::Number) -> bool {
    if n.is_i64() || n.is_u64() {
        return true;
    }
    let Some(f) = n.as_f64() else { return true };
    serde_json::from_str::<Value>(&format!("{f}")).is_ok()
}

/// A copy of `v` that every backend stores and gives back: NUL in texts
/// replaced, unreadable numbers kept as their text.
fn sanitize(v: &Value) -> Value {
    match v {
        Value::String(s) if s.contains('\0') => Value::String(s.replace('\0', "\u{FFFD}")),
        Value::Number(n) if !number_reads_back(n) => Value::String(n.to_string()),
        Value::Array(items) => Value::Array(items.iter().map(sanitize).collect()),
        Value::Object(o) => Value::Object(
            o.iter()
                .map(|(k, x)| (k.replace('\0', "\u{FFFD}"), sanitize(x)))
                .collect(),
        ),
        other => other.clone(),
    }
}

fn archivable(run: &ArchivedRun) -> Result<ArchivedRun, StoreError> {
    for (what, text) in [
        ("namespace", &run.namespace),
        ("name", &run.name),
        ("uid", &run.uid),
    ] {
        if text.is_empty() || text.contains('\0') {
            return Err(StoreError::Invalid(format!(
                "an archived run's {what} must be a non-empty text without NUL"
            )));
        }
    }
    let clean = |s: &str| s.replace('\0', "\u{FFFD}");
    Ok(ArchivedRun {
        namespace: run.namespace.clone(),
        name: run.name.clone(),
        uid: run.uid.clone(),
        flow: clean(&run.flow),
        phase: clean(&run.phase),
        created: to_stored_time(&run.created)?,
        finished: run.finished.as_deref().map(to_stored_time).transpose()?,
        flow_digest: run.flow_digest.as_deref().map(clean),
        run: sanitize(&run.run),
        offloaded: sanitize(&run.offloaded),
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn values_that_would_not_come_back_are_refused_or_cleaned() {
        let mut at = String::from("value");
        assert!(check_value(&json!({"a": [1, 2.5, "x", 1e300]}), &mut at).is_ok());
        let err = check_value(&json!({"a": [0, f64::MAX]}), &mut at).unwrap_err();
        assert!(err.contains("value.a[1]"), "{err}");
        let err = check_value(&json!({"t": "a\u{0}b"}), &mut String::from("value")).unwrap_err();
        assert!(err.contains("value.t") && err.contains("NUL"), "{err}");
        assert_eq!(
            sanitize(&json!({"t": "a\u{0}b", "n": f64::MAX})),
            json!({"t": "a\u{FFFD}b", "n": "1.7976931348623157e+308"})
        );
    }
}
