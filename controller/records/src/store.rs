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

use coxswain_core::expr::{EvalError, Expr, Reference};
use coxswain_core::flow::{MAX_JSON_DEPTH, json_depth};
use coxswain_core::scope::Scope;
use serde::{Deserialize, Serialize};
use serde_json::Value;

use crate::filter::{BindError, CompileError, NotCompiled};
use crate::order::OrderError;
pub use crate::pg::PgSettings;
use crate::pg::PgStore;
use crate::record::Record;
use crate::sqlite::SqliteStore;

/// The most records one lookup may ask for.
pub const MAX_LIMIT: usize = 1000;

/// The newest schema this build knows; [`Store::open_sqlite`] and
/// [`Store::connect_postgres`] migrate up to it and refuse a newer one.
pub const SCHEMA_VERSION: i64 = 1;

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

/// One save: what a `save` step writes.
#[derive(Debug, Clone, PartialEq)]
pub struct Saving {
    /// The Run's namespace; collections belong to it.
    pub namespace: String,
    /// The collection (a name like a step key).
    pub collection: String,
    /// The record's key within the collection.
    pub key: String,
    /// What to store.
    pub value: Value,
    /// The Run's name, kept on the record (`$record.run`).
    pub run: String,
    /// The step's key, kept on the record (`$record.step`).
    pub step: String,
    /// Names this save among all saves of the namespace (the engine uses
    /// `run-uid/step/attempt`): a save repeated with the same one changes
    /// nothing and answers the first one's [`Saved`].
    pub idempotency: String,
}

/// What a save did: the `save` step's output,
/// `{"collection", "key", "version", "created"}`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Saved {
    /// The collection saved into.
    pub collection: String,
    /// The record's key.
    pub key: String,
    /// The version this save made: 1 for a new key.
    pub version: i64,
    /// The key was new.
    pub created: bool,
}

/// One lookup: what a step's `lookup` entry asks for, with the run's data to
/// bind the condition's other references.
#[derive(Clone, Copy)]
pub struct Lookup<'a> {
    /// The Run's namespace.
    pub namespace: &'a str,
    /// The collection to read.
    pub collection: &'a str,
    /// `where`, with `$record` for the record; `None` keeps every record.
    pub condition: Option<&'a Expr>,
    /// The run's data, for every reference of the condition that does not
    /// read `$record`.
    pub scope: &'a (dyn Scope + Sync),
    /// `orderBy`: a path under `$record`; `None` orders by key.
    pub order_by: Option<&'a Reference>,
    /// Reverses the whole order.
    pub descending: bool,
    /// At most this many records, 1 to [`MAX_LIMIT`].
    pub limit: usize,
}

/// A Run that ended, as archived: enough to list it and to show it whole
/// after its object is gone from the cluster.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ArchivedRun {
    /// The Run's namespace.
    pub namespace: String,
    /// The Run's name (names repeat over time; the uid does not).
    pub name: String,
    /// The Run's uid: the archive's key.
    pub uid: String,
    /// The Flow it ran.
    pub flow: String,
    /// Its last phase (`Succeeded`, `Failed`, …).
    pub phase: String,
    /// When the Run was created, RFC 3339 (given back in UTC, as
    /// `2026-05-01T09:30:00Z`, with as many fractional digits as needed, at
    /// most six).
    pub created: String,
    /// When it ended, RFC 3339 like `created`.
    pub finished: Option<String>,
    /// The digest of the flow it ran, pinned at its start.
    pub flow_digest: Option<String>,
    /// The whole Run object as JSON (spec and status).
    pub run: Value,
    /// Values the controller moved out of the Run (into ConfigMaps), by the
    /// reference the Run holds.
    pub offloaded: Value,
}

impl ArchivedRun {
    /// The archived run of `summary` with its JSON: both stores read a run
    /// back as its summary's columns and the two JSON ones.
    pub(crate) fn from_summary(summary: RunSummary, run: Value, offloaded: Value) -> Self {
        let RunSummary {
            namespace,
            name,
            uid,
            flow,
            phase,
            created,
            finished,
            flow_digest,
        } = summary;
        ArchivedRun {
            namespace,
            name,
            uid,
            flow,
            phase,
            created,
            finished,
            flow_digest,
            run,
            offloaded,
        }
    }
}

/// An archived Run without its JSON, as [`Store::list_runs`] lists it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct RunSummary {
    /// The Run's namespace.
    pub namespace: String,
    /// The Run's name.
    pub name: String,
    /// The Run's uid.
    pub uid: String,
    /// The Flow it ran.
    pub flow: String,
    /// Its last phase.
    pub phase: String,
    /// When it was created, as in [`ArchivedRun::created`].
    pub created: String,
    /// When it ended.
    pub finished: Option<String>,
    /// The digest of the flow it ran.
    pub flow_digest: Option<String>,
}

/// Which archived runs [`Store::list_runs`] lists, newest first (by when
/// they ended, then when they were created).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RunQuery {
    /// Only this namespace; `None` for all.
    pub namespace: Option<String>,
    /// Only runs of this Flow.
    pub flow: Option<String>,
    /// Only runs that ended in this phase.
    pub phase: Option<String>,
    /// Only runs that ended (or, not ended, were created) at or after this
    /// time, RFC 3339.
    pub since: Option<String>,
    /// At most this many, 1 to [`MAX_LIMIT`].
    pub limit: usize,
}

impl Default for RunQuery {
    fn default() -> Self {
        RunQuery {
            namespace: None,
            flow: None,
            phase: None,
            since: None,
            limit: 100,
        }
    }
}

/// A store that could not do what was asked.
#[derive(Debug, thiserror::Error)]
pub enum StoreError {
    /// The SQLite file could not be opened or made.
    #[error("opening the records database {path}: {message}")]
    Open {
        /// The file.
        path: String,
        /// What went wrong.
        message: String,
    },
    /// The PostgreSQL server could not be reached or refused us.
    #[error("connecting to the records database: {0}")]
    Connect(String),
    /// The database was migrated by a newer Coxswain.
    #[error(
        "the records database is at schema version {found}, this coxswain knows up to {known}; upgrade coxswain"
    )]
    SchemaTooNew {
        /// The version the database is at.
        found: i64,
        /// [`SCHEMA_VERSION`].
        known: i64,
    },
    /// A statement failed.
    #[error("the records database failed {doing}: {message}")]
    Database {
        /// What the store was doing.
        doing: &'static str,
        /// The database's message, with its cause.
        message: String,
    },
    /// What was asked cannot be stored (or given back) as it is.
    #[error("{0}")]
    Invalid(String),
    /// A stored record whose value cannot be read back (a row written
    /// before saves were bounded, or by hand). The database answered: this
    /// is no outage, and waiting would not help.
    #[error(
        "record `{key}` of collection `{collection}` cannot be read back from the records database ({reason}); delete it (locally `coxswain records delete {collection} {key}`) or save it again"
    )]
    Unreadable {
        /// The collection.
        collection: String,
        /// The record's key.
        key: String,
        /// Why it cannot be read.
        reason: String,
    },
    /// A value nested deeper than a record keeps.
    #[error(
        "record `{key}` of collection `{collection}` cannot be saved: the value nests arrays and objects {depth} levels deep; at most {MAX_JSON_DEPTH} are kept in a record, as in a step's output (deeper records cannot be read back)"
    )]
    TooDeep {
        /// The collection.
        collection: String,
        /// The record's key.
        key: String,
        /// How deep the value nests.
        depth: usize,
    },
}

/// A lookup that has no answer.
#[derive(Debug, thiserror::Error)]
pub enum LookupError {
    /// The database failed.
    #[error(transparent)]
    Store(#[from] StoreError),
    /// `limit` out of range.
    #[error("a lookup's limit must be between 1 and {MAX_LIMIT}, not {0}")]
    Limit(usize),
    /// `orderBy` does not read the record.
    #[error(transparent)]
    OrderBy(#[from] OrderError),
    /// The run's data could not be read for the condition.
    #[error("reading the run's data for the lookup's condition: {0}")]
    Bind(#[from] BindError),
    /// The condition could not be compiled (a reference left unbound).
    #[error("compiling the lookup's condition: {0}")]
    Compile(#[from] CompileError),
    /// The condition fails on a record of the collection.
    #[error(
        "the lookup's condition fails on record `{key}` of collection `{collection}`: {source}"
    )]
    Eval {
        /// The collection.
        collection: String,
        /// The record's key.
        key: String,
        /// The evaluator's error.
        source: EvalError,
    },
    /// More records than the bound would have to be evaluated in memory.
    #[error(
        "the lookup in collection `{collection}` would evaluate more than {bound} records in memory \
         (the bound is the setting records.maxCandidates); {why}"
    )]
    TooManyCandidates {
        /// The collection.
        collection: String,
        /// [`PgSettings::max_candidates`].
        bound: usize,
        /// The parts of the condition SQL could not compile.
        not_compiled: Vec<NotCompiled>,
        /// Those parts in words.
        why: String,
    },
}

impl LookupError {
    /// The error code a step fails with: `workflow.expression_error` when the
    /// condition itself fails on a record, as any expression's failure.
    pub fn code(&self) -> &'static str {
        match self {
            LookupError::Eval { .. } => EvalError::CODE,
            _ => "records.lookup_failed",
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

// ---------------------------------------------------------------------------
// Shared by both backends

/// The run's data with `$record` answered by one record: the in-memory
/// evaluator's view of a lookup.
pub(crate) struct RecordScope<'a> {
    pub run: &'a (dyn Scope + Sync),
    pub record: Value,
}

impl Scope for RecordScope<'_> {
    fn input(&self) -> Option<&Value> {
        self.run.input()
    }
    fn step(&self, key: &str) -> Option<&Value> {
        self.run.step(key)
    }
    fn root(&self, name: &str) -> Option<&Value> {
        if name == "record" {
            Some(&self.record)
        } else {
            self.run.root(name)
        }
    }
}

/// The evaluator's answer for one record: `Ok(true)` keeps it.
pub(crate) fn evaluate(q: &Lookup<'_>, cond: &Expr, record: &Record) -> Result<bool, LookupError> {
    let scope = RecordScope {
        run: q.scope,
        record: record.to_json(),
    };
    cond.eval_bool(&scope).map_err(|source| LookupError::Eval {
        collection: q.collection.to_string(),
        key: record.key.clone(),
        source,
    })
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

/// The stored form of a time: UTC, microseconds, fixed width (text order is
/// time order), as [`crate::record::SAVED_AT_TEXT`] writes.
pub(crate) const STORED_TIME: &str = "%Y-%m-%dT%H:%M:%S%.6fZ";

pub(crate) fn to_stored_time(s: &str) -> Result<String, StoreError> {
    let t: jiff::Timestamp = s
        .parse()
        .map_err(|e| StoreError::Invalid(format!("`{s}` is not an RFC 3339 time: {e}")))?;
    let t = jiff::Timestamp::from_microsecond(t.as_microsecond())
        .map_err(|e| StoreError::Invalid(format!("`{s}`: {e}")))?;
    Ok(t.strftime(STORED_TIME).to_string())
}

/// The stored form back as RFC 3339 in UTC, fractional digits as needed.
pub(crate) fn from_stored_time(s: &str) -> Result<String, StoreError> {
    let t: jiff::Timestamp = s.parse().map_err(|e| StoreError::Database {
        doing: "reading a stored time",
        message: format!("`{s}`: {e}"),
    })?;
    Ok(t.to_string())
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn times_are_stored_in_utc_at_fixed_width_and_given_back_short() {
        let s = to_stored_time("2026-05-01T11:30:00+02:00").unwrap();
        assert_eq!(s, "2026-05-01T09:30:00.000000Z");
        assert_eq!(from_stored_time(&s).unwrap(), "2026-05-01T09:30:00Z");
        let s = to_stored_time("2026-05-01T09:30:00.1234567Z").unwrap();
        assert_eq!(s, "2026-05-01T09:30:00.123456Z");
        assert_eq!(from_stored_time(&s).unwrap(), "2026-05-01T09:30:00.123456Z");
        assert!(to_stored_time("yesterday").is_err());
    }

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
