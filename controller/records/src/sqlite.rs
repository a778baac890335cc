//! The SQLite store: `coxswain run`'s, one file on the laptop.
//!
//! One connection, used by one call at a time on tokio's blocking threads.
//! The file is in WAL mode with a busy timeout, so two processes (two
//! `coxswain run`s, or a run and `coxswain records list`) can share it.
//! Values are JSON text as serde_json writes them; `where` is evaluated in
//! memory over the whole collection of the namespace (no candidate bound: a
//! laptop's collections are read whole), then sorted with
//! [`crate::order`]'s comparator.

use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};

use rusqlite::{Connection, OptionalExtension, TransactionBehavior, params};
use serde_json::Value;

use crate::model::{
    ArchivedRun, Lookup, LookupError, RunQuery, RunSummary, SCHEMA_VERSION, Saved, Saving,
    StoreError, evaluate, from_stored_time,
};
use crate::order::OrderBy;
use crate::record::Record;

/// `savedAt` as SQLite writes it: the format of
/// [`crate::record::SAVED_AT_TEXT`]; SQLite's clock has milliseconds, the
/// microseconds are zeros.
const NOW: &str = "strftime('%Y-%m-%dT%H:%M:%f', 'now') || '000Z'";

/// The migrations, in order: version `i + 1` is `MIGRATIONS[i]`. Texts
/// compare by their bytes (SQLite's `BINARY`), as `COLLATE "C"` does.
const MIGRATIONS: &[&str] = &[
    "
    CREATE TABLE records (
        namespace TEXT NOT NULL,
        collection TEXT NOT NULL,
        key TEXT NOT NULL,
        value TEXT NOT NULL,
        version INTEGER NOT NULL,
        saved_at TEXT NOT NULL,
        run TEXT NOT NULL,
        step TEXT NOT NULL,
        PRIMARY KEY (namespace, collection, key)
    ) WITHOUT ROWID;
    CREATE TABLE saves (
        namespace TEXT NOT NULL,
        idempotency TEXT NOT NULL,
        collection TEXT NOT NULL,
        key TEXT NOT NULL,
        version INTEGER NOT NULL,
        created INTEGER NOT NULL,
        at TEXT NOT NULL,
        PRIMARY KEY (namespace, idempotency)
    ) WITHOUT ROWID;
    CREATE TABLE runs (
        uid TEXT PRIMARY KEY,
        namespace TEXT NOT NULL,
        name TEXT NOT NULL,
        flow TEXT NOT NULL,
        phase TEXT NOT NULL,
        created TEXT NOT NULL,
        finished TEXT,
        flow_digest TEXT,
        run TEXT NOT NULL,
        offloaded TEXT NOT NULL,
        archived_at TEXT NOT NULL
    );
    CREATE INDEX runs_by_flow ON runs (namespace, flow, finished DESC);
    CREATE INDEX runs_by_finished ON runs (namespace, finished DESC);
    CREATE INDEX runs_by_name ON runs (namespace, name);
",
    "
    -- The archive's retention deletes by when a run ended.
    CREATE INDEX runs_by_end ON runs (COALESCE(finished, created));
",
];

/// The SQLite records database.
#[derive(Clone)]
pub struct SqliteStore {
    conn: Arc<Mutex<Connection>>,
    path: PathBuf,
}

fn sql(doing: &'static str) -> impl Fn(rusqlite::Error) -> StoreError {
    move |e| StoreError::Database {
        doing,
        message: e.to_string(),
    }
}

impl SqliteStore {
    /// The file.
    pub fn path(&self) -> &Path {
        &self.path
    }

    pub(crate) async fn open(path: &Path) -> Result<SqliteStore, StoreError> {
        let path = path.to_path_buf();
        let p = path.clone();
        let conn = tokio::task::spawn_blocking(move || open(&p))
            .await
            .map_err(|e| StoreError::Open {
                path: path.display().to_string(),
                message: e.to_string(),
            })??;
        Ok(SqliteStore {
            conn: Arc::new(Mutex::new(conn)),
            path,
        })
    }

    /// Runs `f` with the connection on a blocking thread.
    async fn with<T: Send + 'static>(
        &self,
        f: impl FnOnce(&mut Connection) -> Result<T, StoreError> + Send + 'static,
    ) -> Result<T, StoreError> {
        let conn = self.conn.clone();
        tokio::task::spawn_blocking(move || {
            let mut c = conn.lock().unwrap_or_else(|e| e.into_inner());
            f(&mut c)
        })
        .await
        .map_err(|e| StoreError::Database {
            doing: "running a SQLite call",
            message: e.to_string(),
        })?
    }

    pub(crate) async fn save(&self, s: &Saving) -> Result<Saved, StoreError> {
        let s = s.clone();
        self.with(move |c| save(c, &s)).await
    }

    pub(crate) async fn lookup(&self, q: &Lookup<'_>) -> Result<Vec<Record>, LookupError> {
        let order = OrderBy::new(q.order_by, q.descending)?;
        let (ns, coll) = (q.namespace.to_string(), q.collection.to_string());
        let all = self.with(move |c| collection(c, &ns, &coll)).await?;
        let mut kept = Vec::new();
        for r in all {
            match q.condition {
                None => kept.push(r),
                Some(cond) => {
                    if evaluate(q, cond, &r)? {
                        kept.push(r);
                    }
                }
            }
        }
        let mut kept = order.sort(kept);
        kept.truncate(q.limit);
        Ok(kept)
    }

    pub(crate) async fn delete(
        &self,
        namespace: &str,
        collection: &str,
        key: &str,
    ) -> Result<bool, StoreError> {
        let k = [namespace, collection, key].map(str::to_string);
        self.with(move |c| {
            c.execute(
                "DELETE FROM records WHERE namespace = ?1 AND collection = ?2 AND key = ?3",
                params![k[0], k[1], k[2]],
            )
            .map(|n| n > 0)
            .map_err(sql("deleting a record"))
        })
        .await
    }

    pub(crate) async fn archive(&self, r: &ArchivedRun) -> Result<(), StoreError> {
        let r = r.clone();
        self.with(move |c| {
            c.execute(
                &format!(
                    "INSERT INTO runs (uid, namespace, name, flow, phase, created, finished, flow_digest, run, offloaded, archived_at) \
                     VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10, {NOW}) \
                     ON CONFLICT (uid) DO UPDATE SET namespace = excluded.namespace, name = excluded.name, \
                     flow = excluded.flow, phase = excluded.phase, created = excluded.created, \
                     finished = excluded.finished, flow_digest = excluded.flow_digest, run = excluded.run, \
                     offloaded = excluded.offloaded, archived_at = excluded.archived_at"
                ),
                params![
                    r.uid,
                    r.namespace,
                    r.name,
                    r.flow,
                    r.phase,
                    r.created,
                    r.finished,
                    r.flow_digest,
                    r.run.to_string(),
                    r.offloaded.to_string()
                ],
            )
            .map(|_| ())
            .map_err(sql("archiving a run"))
        })
        .await
    }

    pub(crate) async fn prune_runs(&self, before: &str) -> Result<u64, StoreError> {
        let before = before.to_string();
        self.with(move |c| {
            c.execute(
                "DELETE FROM runs WHERE COALESCE(finished, created) < ?1",
                [before],
            )
            .map(|n| n as u64)
            .map_err(sql("deleting archived runs past their retention"))
        })
        .await
    }

    pub(crate) async fn is_archived(&self, uid: &str) -> Result<bool, StoreError> {
        let uid = uid.to_string();
        self.with(move |c| {
            c.query_row("SELECT 1 FROM runs WHERE uid = ?1", [uid], |_| Ok(()))
                .optional()
                .map(|r| r.is_some())
                .map_err(sql("reading the archive"))
        })
        .await
    }

    pub(crate) async fn archived_run(
        &self,
        namespace: &str,
        name: &str,
    ) -> Result<Option<ArchivedRun>, StoreError> {
        let (ns, name) = (namespace.to_string(), name.to_string());
        self.with(move |c| {
            let row = c
                .query_row(
                    &format!(
                        "SELECT {RUN_COLUMNS}, run, offloaded FROM runs WHERE namespace = ?1 AND name = ?2 \
                         ORDER BY finished IS NULL, finished DESC, created DESC, uid LIMIT 1"
                    ),
                    [ns, name],
                    |row| Ok((summary_row(row)?, row.get::<_, String>(8)?, row.get::<_, String>(9)?)),
                )
                .optional()
                .map_err(sql("reading the archive"))?;
            let Some((s, run, offloaded)) = row else {
                return Ok(None);
            };
            let s = summary(s)?;
            let json = |t: &str| {
                serde_json::from_str::<Value>(t).map_err(|e| StoreError::Database {
                    doing: "reading an archived run",
                    message: e.to_string(),
                })
            };
            Ok(Some(ArchivedRun::from_summary(
                s,
                json(&run)?,
                json(&offloaded)?,
            )))
        })
        .await
    }

    pub(crate) async fn list_runs(
        &self,
        q: &RunQuery,
        since: Option<&str>,
    ) -> Result<Vec<RunSummary>, StoreError> {
        let mut query = format!("SELECT {RUN_COLUMNS} FROM runs WHERE 1");
        let mut values: Vec<String> = Vec::new();
        for (col, v) in [
            ("namespace", &q.namespace),
            ("flow", &q.flow),
            ("phase", &q.phase),
        ] {
            if let Some(v) = v {
                values.push(v.clone());
                query.push_str(&format!(" AND {col} = ?{}", values.len()));
            }
        }
        if let Some(s) = since {
            values.push(s.to_string());
            query.push_str(&format!(
                " AND COALESCE(finished, created) >= ?{}",
                values.len()
            ));
        }
        query.push_str(&format!(
            " ORDER BY finished IS NULL, finished DESC, created DESC, uid LIMIT {}",
            q.limit
        ));
        self.with(move |c| {
            let mut stmt = c.prepare(&query).map_err(sql("listing archived runs"))?;
            let rows = stmt
                .query_map(rusqlite::params_from_iter(values.iter()), summary_row)
                .map_err(sql("listing archived runs"))?;
            let mut out = Vec::new();
            for r in rows {
                out.push(summary(r.map_err(sql("listing archived runs"))?)?);
            }
            Ok(out)
        })
        .await
    }
}

const RUN_COLUMNS: &str = "namespace, name, uid, flow, phase, created, finished, flow_digest";

type SummaryRow = (
    String,
    String,
    String,
    String,
    String,
    String,
    Option<String>,
    Option<String>,
);

fn summary_row(row: &rusqlite::Row<'_>) -> rusqlite::Result<SummaryRow> {
    Ok((
        row.get(0)?,
        row.get(1)?,
        row.get(2)?,
        row.get(3)?,
        row.get(4)?,
        row.get(5)?,
        row.get(6)?,
        row.get(7)?,
    ))
}

fn summary(r: SummaryRow) -> Result<RunSummary, StoreError> {
    let (namespace, name, uid, flow, phase, created, finished, flow_digest) = r;
    Ok(RunSummary {
        namespace,
        name,
        uid,
        flow,
        phase,
        created: from_stored_time(&created)?,
        finished: finished.as_deref().map(from_stored_time).transpose()?,
        flow_digest,
    })
}

fn open(path: &Path) -> Result<Connection, StoreError> {
    let fail = |message: String| StoreError::Open {
        path: path.display().to_string(),
        message,
    };
    if let Some(dir) = path.parent()
        && !dir.as_os_str().is_empty()
    {
        std::fs::create_dir_all(dir).map_err(|e| fail(format!("making {}: {e}", dir.display())))?;
    }
    let mut c = Connection::open(path).map_err(|e| fail(e.to_string()))?;
    c.busy_timeout(std::time::Duration::from_secs(10))
        .map_err(|e| fail(e.to_string()))?;
    c.pragma_update(None, "journal_mode", "WAL")
        .map_err(|e| fail(e.to_string()))?;
    c.pragma_update(None, "synchronous", "NORMAL")
        .map_err(|e| fail(e.to_string()))?;
    migrate(&mut c)?;
    Ok(c)
}

fn migrate(c: &mut Connection) -> Result<(), StoreError> {
    let doing = sql("migrating the schema");
    // IMMEDIATE: the write lock first, so two processes take turns.
    let tx = c
        .transaction_with_behavior(TransactionBehavior::Immediate)
        .map_err(&doing)?;
    tx.execute_batch(&format!(
        "CREATE TABLE IF NOT EXISTS coxswain_schema (
             version INTEGER PRIMARY KEY,
             migrated_at TEXT NOT NULL DEFAULT ({NOW})
         );"
    ))
    .map_err(&doing)?;
    let found: i64 = tx
        .query_row(
            "SELECT COALESCE(max(version), 0) FROM coxswain_schema",
            [],
            |r| r.get(0),
        )
        .map_err(&doing)?;
    if found > SCHEMA_VERSION {
        return Err(StoreError::SchemaTooNew {
            found,
            known: SCHEMA_VERSION,
        });
    }
    for (i, m) in MIGRATIONS.iter().enumerate() {
        let version = i as i64 + 1;
        if version <= found {
            continue;
        }
        tx.execute_batch(m).map_err(&doing)?;
        tx.execute(
            "INSERT INTO coxswain_schema (version) VALUES (?1)",
            [version],
        )
        .map_err(&doing)?;
    }
    tx.commit().map_err(&doing)
}

fn save(c: &mut Connection, s: &Saving) -> Result<Saved, StoreError> {
    let doing = sql("saving a record");
    let tx = c
        .transaction_with_behavior(TransactionBehavior::Immediate)
        .map_err(&doing)?;
    let earlier = tx
        .query_row(
            "SELECT collection, key, version, created FROM saves WHERE namespace = ?1 AND idempotency = ?2",
            params![s.namespace, s.idempotency],
            |r| {
                Ok(Saved {
                    collection: r.get(0)?,
                    key: r.get(1)?,
                    version: r.get(2)?,
                    created: r.get(3)?,
                })
            },
        )
        .optional()
        .map_err(&doing)?;
    if let Some(saved) = earlier {
        return Ok(saved);
    }
    let version: i64 = tx
        .query_row(
            &format!(
                "INSERT INTO records (namespace, collection, key, value, version, saved_at, run, step) \
                 VALUES (?1, ?2, ?3, ?4, 1, {NOW}, ?5, ?6) \
                 ON CONFLICT (namespace, collection, key) DO UPDATE SET value = excluded.value, \
                 version = records.version + 1, saved_at = excluded.saved_at, run = excluded.run, \
                 step = excluded.step RETURNING version"
            ),
            params![
                s.namespace,
                s.collection,
                s.key,
                s.value.to_string(),
                s.run,
                s.step
            ],
            |r| r.get(0),
        )
        .map_err(&doing)?;
    let saved = Saved {
        collection: s.collection.clone(),
        key: s.key.clone(),
        version,
        created: version == 1,
    };
    tx.execute(
        &format!(
            "INSERT INTO saves (namespace, idempotency, collection, key, version, created, at) \
             VALUES (?1, ?2, ?3, ?4, ?5, ?6, {NOW})"
        ),
        params![
            s.namespace,
            s.idempotency,
            s.collection,
            s.key,
            version,
            saved.created
        ],
    )
    .map_err(&doing)?;
    tx.commit().map_err(&doing)?;
    Ok(saved)
}

/// Every record of the namespace's collection, by key.
fn collection(c: &mut Connection, ns: &str, coll: &str) -> Result<Vec<Record>, StoreError> {
    let doing = sql("looking records up");
    let mut stmt = c
        .prepare(
            "SELECT key, value, version, saved_at, run, step FROM records \
             WHERE namespace = ?1 AND collection = ?2 ORDER BY key",
        )
        .map_err(&doing)?;
    let rows = stmt
        .query_map([ns, coll], |r| {
            Ok((
                r.get::<_, String>(0)?,
                r.get::<_, String>(1)?,
                r.get::<_, i64>(2)?,
                r.get::<_, String>(3)?,
                r.get::<_, String>(4)?,
                r.get::<_, String>(5)?,
            ))
        })
        .map_err(&doing)?;
    let mut out = Vec::new();
    for row in rows {
        let (key, value, version, saved_at, run, step) = row.map_err(&doing)?;
        let value = serde_json::from_str(&value).map_err(|e| StoreError::Unreadable {
            collection: coll.to_string(),
            key: key.clone(),
            reason: e.to_string(),
        })?;
        out.push(Record {
            key,
            value,
            version,
            saved_at,
            run,
            step,
        });
    }
    Ok(out)
}
