//! What the records stores take and give, shared by both backends: a
//! save and what it answered, a lookup and why it failed, an archived run
//! and its summary, the in-memory evaluation of `where`, and the stored
//! form of times. The [`Store`](crate::Store) facade and its backends
//! (`pg`, `sqlite`) build on it; it knows neither.

use coxswain_core::expr::{EvalError, Expr, Reference};
use coxswain_core::flow::MAX_JSON_DEPTH;
use coxswain_core::scope::Scope;
use serde::{Deserialize, Serialize};
use serde_json::Value;

use crate::filter::{BindError, CompileError, NotCompiled};
use crate::order::OrderError;
use crate::record::Record;

/// The most records one lookup may ask for.
pub const MAX_LIMIT: usize = 1000;

/// The newest schema this build knows; [`Store::open_sqlite`] and
/// [`Store::connect_postgres`] migrate up to it and refuse a newer one.
pub const SCHEMA_VERSION: i64 = 2;

/// Archived runs deleted by one statement of the retention: a large
/// backlog goes in short transactions, not one long one.
pub(crate) const PRUNE_BATCH: i64 = 1000;

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
}
