//! The PostgreSQL store: the controller's, one for its life.
//!
//! Connections: a few (at most [`PgSettings::max_connections`]) kept open and
//! shared by concurrent calls. A connection found closed is dropped and a new
//! one made; a call whose connection breaks under it (the server restarted,
//! an administrator ended the backend) is tried once more on a new one. A
//! retried save is safe (its idempotency key), so are lookups and the
//! archive; a retried delete may answer `false` for a record the first try
//! deleted.
//!
//! TLS is not supported yet: connections are plain TCP or a Unix socket
//! (`sslmode=prefer`, the default, falls back to plain; `sslmode=require`
//! fails to connect). Use a network the cluster trusts, or a sidecar.
//!
//! # Indexes, and what they earn
//!
//! Measured with `records_bench` (BENCHMARKS.md, "Stored records"): 100,000
//! records in one collection, `limit 20`, ordered by `savedAt` descending.
//!
//! - `records_value`, GIN `jsonb_path_ops` on `value`: the compiler adds
//!   `value @> {"component": "db"}` to an equality on a value path (text,
//!   true/false or a whole number; `Filter::narrow` carries it to the
//!   probe for failing records), so a selective equality reads ~2,000 rows
//!   instead of the collection: 6–8x faster, alone or beside a range. It
//!   only answers `@>`: ranges gain nothing from it. It costs about 30% of
//!   save throughput.
//! - `records_saved_at`, (namespace, collection, saved_at, key): gives
//!   `orderBy: $record.savedAt` (both directions, ties by key) without a
//!   sort, so "the newest 20" reads 20 rows (0.3 ms against 49 ms), and a
//!   range's kept rows are found walking back from the newest (half the
//!   range lookup's time).
//! - The primary key (namespace, collection, key), its text columns in byte
//!   order (`COLLATE "C"`): every query's namespace and collection, and
//!   the order by key.
//!
//! A range on a value path (`priority >= 4`) has no index: a path index per
//! field would have to be made per flow. Its cost is the one pass over the
//! collection that the semantics need anyway — a lookup fails when the
//! condition fails on any record, so every record whose `priority` might
//! not be a number is looked at.

use std::ops::{Deref, DerefMut};
use std::sync::{Arc, Mutex};

use serde_json::Value;
use tokio::sync::{Semaphore, SemaphorePermit};
use tokio_postgres::types::{ToSql, Type};
use tokio_postgres::{Client, Config, IsolationLevel, NoTls, Row};

use crate::filter::{Filter, bind, compile};
use crate::model::{
    ArchivedRun, Lookup, LookupError, PRUNE_BATCH, RunQuery, RunSummary, SCHEMA_VERSION, Saved,
    Saving, StoreError, evaluate, from_stored_time,
};
use crate::order::OrderBy;
use crate::record::{Record, SCHEMA, SELECT_COLUMNS};
use coxswain_core::expr::Root;

/// How the PostgreSQL store behaves.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PgSettings {
    /// The most records a lookup reads to evaluate in memory, when SQL
    /// cannot decide them all; past it the lookup fails saying so.
    pub max_candidates: usize,
    /// Connections kept open at most (concurrent calls beyond it wait).
    pub max_connections: usize,
}

impl Default for PgSettings {
    fn default() -> Self {
        PgSettings {
            max_candidates: 10_000,
            max_connections: 8,
        }
    }
}

/// The advisory lock migrations run under (`coxswain` in ASCII): one per
/// database, so two controllers starting together migrate one after the
/// other.
pub const MIGRATION_LOCK: i64 = 0x636f_7873_7761_696e;

/// The migrations, in order: version `i + 1` is `MIGRATIONS[i]`.
fn migrations() -> Vec<String> {
    vec![
        format!(
        "{SCHEMA};
        -- orderBy savedAt (and a where on it) within one collection.
        CREATE INDEX IF NOT EXISTS records_saved_at ON records (namespace, collection, saved_at, key);
        -- Equality on any value path: the compiler adds `value @> {{…}}`.
        CREATE INDEX IF NOT EXISTS records_value ON records USING gin (value jsonb_path_ops);
        CREATE TABLE IF NOT EXISTS saves (
            namespace text COLLATE \"C\" NOT NULL,
            idempotency text COLLATE \"C\" NOT NULL,
            collection text NOT NULL,
            key text NOT NULL,
            version bigint,
            created boolean,
            at timestamptz NOT NULL DEFAULT now(),
            PRIMARY KEY (namespace, idempotency)
        );
        CREATE TABLE IF NOT EXISTS runs (
            uid text PRIMARY KEY,
            namespace text COLLATE \"C\" NOT NULL,
            name text COLLATE \"C\" NOT NULL,
            flow text COLLATE \"C\" NOT NULL,
            phase text NOT NULL,
            created timestamptz NOT NULL,
            finished timestamptz,
            flow_digest text,
            run jsonb NOT NULL,
            offloaded jsonb NOT NULL,
            archived_at timestamptz NOT NULL DEFAULT now()
        );
        CREATE INDEX IF NOT EXISTS runs_by_flow ON runs (namespace, flow, finished DESC NULLS LAST);
        CREATE INDEX IF NOT EXISTS runs_by_finished ON runs (namespace, finished DESC NULLS LAST);
        CREATE INDEX IF NOT EXISTS runs_by_name ON runs (namespace, name);"
    ),
        // The archive's retention deletes by when a run ended.
        "CREATE INDEX IF NOT EXISTS runs_by_end ON runs ((COALESCE(finished, created)));".to_string(),
    ]
}

/// The PostgreSQL records database.
#[derive(Clone)]
pub struct PgStore {
    inner: Arc<Inner>,
}

struct Inner {
    config: Config,
    idle: Mutex<Vec<Client>>,
    permits: Semaphore,
    settings: PgSettings,
}

/// A connection lent to one call, back to the idle list when dropped (unless
/// closed).
struct Conn<'a> {
    client: Option<Client>,
    inner: &'a Inner,
    _permit: SemaphorePermit<'a>,
}

impl Conn<'_> {
    fn discard(mut self) {
        self.client = None;
    }
}

impl Deref for Conn<'_> {
    type Target = Client;
    fn deref(&self) -> &Client {
        self.client.as_ref().expect("a lent connection")
    }
}

impl DerefMut for Conn<'_> {
    fn deref_mut(&mut self) -> &mut Client {
        self.client.as_mut().expect("a lent connection")
    }
}

impl Drop for Conn<'_> {
    fn drop(&mut self) {
        if let Some(c) = self.client.take()
            && !c.is_closed()
        {
            self.inner
                .idle
                .lock()
                .unwrap_or_else(|e| e.into_inner())
                .push(c);
        }
    }
}

/// Whether the error says the connection is gone (so a new one may do).
fn lost(e: &tokio_postgres::Error) -> bool {
    if e.is_closed() {
        return true;
    }
    if let Some(code) = e.code() {
        let c = code.code();
        return c.starts_with("08") || c.starts_with("57P");
    }
    std::error::Error::source(e).is_some_and(|s| s.is::<std::io::Error>())
}

fn message(e: &tokio_postgres::Error) -> String {
    match std::error::Error::source(e) {
        Some(c) => format!("{e}: {c}"),
        None => e.to_string(),
    }
}

fn db(doing: &'static str) -> impl Fn(tokio_postgres::Error) -> StoreError {
    move |e| StoreError::Database {
        doing,
        message: message(&e),
    }
}

/// Runs `$body` (an async expression using `$c: &mut Client`) with a lent
/// connection, once more on a new connection when the first was lost.
macro_rules! with_conn {
    ($self:ident, $c:ident, $doing:expr, $body:expr) => {{
        let mut tried = false;
        loop {
            let mut conn = $self.conn().await?;
            let $c: &mut Client = &mut conn;
            match $body.await {
                Err(e) if !tried && lost(&e) => {
                    tried = true;
                    conn.discard();
                }
                Err(e) => break Err(db($doing)(e)),
                Ok(v) => break Ok(v),
            }
        }
    }};
}

impl PgStore {
    pub(crate) async fn connect(url: &str, settings: PgSettings) -> Result<PgStore, StoreError> {
        let config: Config = url
            .parse()
            .map_err(|e| StoreError::Connect(format!("reading the URL: {e}")))?;
        let store = PgStore {
            inner: Arc::new(Inner {
                config,
                idle: Mutex::new(Vec::new()),
                permits: Semaphore::new(settings.max_connections.max(1)),
                settings,
            }),
        };
        let mut conn = store.conn().await?;
        migrate(&mut conn).await?;
        drop(conn);
        Ok(store)
    }

    async fn conn(&self) -> Result<Conn<'_>, StoreError> {
        let permit = self
            .inner
            .permits
            .acquire()
            .await
            .expect("the semaphore is never closed");
        loop {
            let c = self
                .inner
                .idle
                .lock()
                .unwrap_or_else(|e| e.into_inner())
                .pop();
            match c {
                Some(c) if c.is_closed() => continue,
                Some(c) => {
                    return Ok(Conn {
                        client: Some(c),
                        inner: &self.inner,
                        _permit: permit,
                    });
                }
                None => break,
            }
        }
        let (client, connection) = self
            .inner
            .config
            .connect(NoTls)
            .await
            .map_err(|e| StoreError::Connect(message(&e)))?;
        tokio::spawn(async move {
            // The error, if any, is seen by the next call on the client.
            let _ = connection.await;
        });
        Ok(Conn {
            client: Some(client),
            inner: &self.inner,
            _permit: permit,
        })
    }

    pub(crate) async fn save(&self, s: &Saving) -> Result<Saved, StoreError> {
        with_conn!(self, c, "saving a record", save(c, s))
    }

    pub(crate) async fn lookup(&self, q: &Lookup<'_>) -> Result<Vec<Record>, LookupError> {
        let order = OrderBy::new(q.order_by, q.descending)?;
        let filter = match q.condition {
            None => None,
            Some(cond) => {
                let bindings = bind(cond, &Root::Record, q.scope)?;
                Some(compile(cond, &Root::Record, &bindings, 3)?)
            }
        };
        let max = self.inner.settings.max_candidates;
        let found = with_conn!(
            self,
            c,
            "looking records up",
            lookup(c, q, filter.as_ref(), &order, max)
        )?;
        if let (true, Some(f)) = (found.too_many, filter.as_ref()) {
            return Err(too_many(q, f, max));
        }
        let (kept, suspects) = found.read(q.collection)?;
        let Some(cond) = q.condition else {
            return Ok(kept);
        };
        // The records SQL could not decide, and the ones it says fail, by
        // key: the evaluator answers for each, the first failure fails the
        // lookup with the evaluator's message.
        let mut extra = Vec::new();
        for (record, failing) in suspects {
            let keep = evaluate(q, cond, &record)?;
            if failing {
                return Err(StoreError::Database {
                    doing: "looking records up",
                    message: format!(
                        "SQL says the condition fails on record `{}` but the evaluator keeps or drops it; please report this",
                        record.key
                    ),
                }
                .into());
            }
            if keep {
                extra.push(record);
            }
        }
        if extra.is_empty() {
            return Ok(kept);
        }
        let mut all = order.sort(kept.into_iter().chain(extra).collect());
        all.truncate(q.limit);
        Ok(all)
    }

    pub(crate) async fn delete(
        &self,
        namespace: &str,
        collection: &str,
        key: &str,
    ) -> Result<bool, StoreError> {
        let n = with_conn!(
            self,
            c,
            "deleting a record",
            c.execute_typed(
                "DELETE FROM records WHERE namespace = $1 AND collection = $2 AND key = $3",
                &[
                    (&namespace, Type::TEXT),
                    (&collection, Type::TEXT),
                    (&key, Type::TEXT)
                ],
            )
        )?;
        Ok(n > 0)
    }

    pub(crate) async fn archive(&self, r: &ArchivedRun) -> Result<(), StoreError> {
        with_conn!(
            self,
            c,
            "archiving a run",
            c.execute_typed(
                "INSERT INTO runs (uid, namespace, name, flow, phase, created, finished, flow_digest, run, offloaded) \
                 VALUES ($1, $2, $3, $4, $5, $6::text::timestamptz, $7::text::timestamptz, $8, $9, $10) \
                 ON CONFLICT (uid) DO UPDATE SET namespace = EXCLUDED.namespace, name = EXCLUDED.name, \
                 flow = EXCLUDED.flow, phase = EXCLUDED.phase, created = EXCLUDED.created, \
                 finished = EXCLUDED.finished, flow_digest = EXCLUDED.flow_digest, run = EXCLUDED.run, \
                 offloaded = EXCLUDED.offloaded, archived_at = now()",
                &[
                    (&r.uid, Type::TEXT),
                    (&r.namespace, Type::TEXT),
                    (&r.name, Type::TEXT),
                    (&r.flow, Type::TEXT),
                    (&r.phase, Type::TEXT),
                    (&r.created, Type::TEXT),
                    (&r.finished, Type::TEXT),
                    (&r.flow_digest, Type::TEXT),
                    (&r.run, Type::JSONB),
                    (&r.offloaded, Type::JSONB),
                ],
            )
        )?;
        Ok(())
    }

    pub(crate) async fn prune_runs(&self, before: &str) -> Result<u64, StoreError> {
        let mut total = 0;
        loop {
            let n = with_conn!(
                self,
                c,
                "deleting archived runs past their retention",
                c.execute_typed(
                    "DELETE FROM runs WHERE uid IN (SELECT uid FROM runs \
                     WHERE COALESCE(finished, created) < $1::text::timestamptz LIMIT $2)",
                    &[(&before, Type::TEXT), (&PRUNE_BATCH, Type::INT8)],
                )
            )?;
            total += n;
            if n < PRUNE_BATCH as u64 {
                return Ok(total);
            }
        }
    }

    pub(crate) async fn is_archived(&self, uid: &str) -> Result<bool, StoreError> {
        let row = with_conn!(
            self,
            c,
            "reading the archive",
            c.query_typed_opt("SELECT 1 FROM runs WHERE uid = $1", &[(&uid, Type::TEXT)])
        )?;
        Ok(row.is_some())
    }

    pub(crate) async fn archived_run(
        &self,
        namespace: &str,
        name: &str,
    ) -> Result<Option<ArchivedRun>, StoreError> {
        let sql = format!(
            "SELECT {RUN_COLUMNS}, run, offloaded FROM runs WHERE namespace = $1 AND name = $2 \
             ORDER BY finished DESC NULLS LAST, created DESC, uid LIMIT 1"
        );
        let row = with_conn!(
            self,
            c,
            "reading the archive",
            c.query_typed_opt(&sql, &[(&namespace, Type::TEXT), (&name, Type::TEXT)])
        )?;
        let Some(row) = row else { return Ok(None) };
        let s = summary(&row)?;
        let read = db("reading an archived run");
        Ok(Some(ArchivedRun::from_summary(
            s,
            row.try_get::<_, Value>("run").map_err(&read)?,
            row.try_get::<_, Value>("offloaded").map_err(&read)?,
        )))
    }

    pub(crate) async fn list_runs(
        &self,
        q: &RunQuery,
        since: Option<&str>,
    ) -> Result<Vec<RunSummary>, StoreError> {
        let mut sql = format!("SELECT {RUN_COLUMNS} FROM runs WHERE TRUE");
        let mut params: Vec<(&(dyn ToSql + Sync), Type)> = Vec::new();
        let since = since.map(str::to_string);
        for (col, v, cast) in [
            ("namespace", &q.namespace, ""),
            ("flow", &q.flow, ""),
            ("phase", &q.phase, ""),
        ]
        .into_iter()
        .chain([("since", &since, "::text::timestamptz")])
        {
            let Some(v) = v else { continue };
            params.push((v, Type::TEXT));
            let n = params.len();
            if col == "since" {
                sql.push_str(&format!(" AND COALESCE(finished, created) >= ${n}{cast}"));
            } else {
                sql.push_str(&format!(" AND {col} = ${n}"));
            }
        }
        sql.push_str(&format!(
            " ORDER BY finished DESC NULLS LAST, created DESC, uid LIMIT {}",
            q.limit
        ));
        let rows = with_conn!(
            self,
            c,
            "listing archived runs",
            c.query_typed(&sql, &params)
        )?;
        rows.iter().map(summary).collect()
    }
}

const RUN_COLUMNS: &str = concat!(
    "namespace, name, uid, flow, phase, ",
    r#"to_char(created AT TIME ZONE 'UTC', 'YYYY-MM-DD"T"HH24:MI:SS.US"Z"') AS created, "#,
    r#"to_char(finished AT TIME ZONE 'UTC', 'YYYY-MM-DD"T"HH24:MI:SS.US"Z"') AS finished, "#,
    "flow_digest"
);

fn summary(row: &Row) -> Result<RunSummary, StoreError> {
    let read = db("reading an archived run");
    let finished: Option<String> = row.try_get("finished").map_err(&read)?;
    Ok(RunSummary {
        namespace: row.try_get("namespace").map_err(&read)?,
        name: row.try_get("name").map_err(&read)?,
        uid: row.try_get("uid").map_err(&read)?,
        flow: row.try_get("flow").map_err(&read)?,
        phase: row.try_get("phase").map_err(&read)?,
        created: from_stored_time(&row.try_get::<_, String>("created").map_err(&read)?)?,
        finished: finished.as_deref().map(from_stored_time).transpose()?,
        flow_digest: row.try_get("flow_digest").map_err(&read)?,
    })
}

async fn migrate(c: &mut Client) -> Result<(), StoreError> {
    let doing = db("migrating the schema");
    let tx = c.transaction().await.map_err(&doing)?;
    tx.batch_execute(&format!(
        "SELECT pg_advisory_xact_lock({MIGRATION_LOCK});
         CREATE TABLE IF NOT EXISTS coxswain_schema (
             version bigint PRIMARY KEY,
             migrated_at timestamptz NOT NULL DEFAULT now()
         );"
    ))
    .await
    .map_err(&doing)?;
    let found: i64 = tx
        .query_one("SELECT COALESCE(max(version), 0) FROM coxswain_schema", &[])
        .await
        .map_err(&doing)?
        .get(0);
    if found > SCHEMA_VERSION {
        return Err(StoreError::SchemaTooNew {
            found,
            known: SCHEMA_VERSION,
        });
    }
    for (i, sql) in migrations().iter().enumerate() {
        let version = i as i64 + 1;
        if version <= found {
            continue;
        }
        tx.batch_execute(sql).await.map_err(&doing)?;
        tx.execute(
            "INSERT INTO coxswain_schema (version) VALUES ($1)",
            &[&version],
        )
        .await
        .map_err(&doing)?;
    }
    tx.commit().await.map_err(&doing)
}

async fn save(c: &mut Client, s: &Saving) -> Result<Saved, tokio_postgres::Error> {
    let tx = c.transaction().await?;
    let ids: [(&(dyn ToSql + Sync), Type); 4] = [
        (&s.namespace, Type::TEXT),
        (&s.idempotency, Type::TEXT),
        (&s.collection, Type::TEXT),
        (&s.key, Type::TEXT),
    ];
    // First the claim: a concurrent save with the same idempotency key waits
    // here until this one commits, then finds the row.
    let claimed = tx
        .query_typed_opt(
            "INSERT INTO saves (namespace, idempotency, collection, key) VALUES ($1, $2, $3, $4) \
             ON CONFLICT DO NOTHING RETURNING 1",
            &ids,
        )
        .await?;
    if claimed.is_none() {
        let row = tx
            .query_typed_one(
                "SELECT collection, key, version, created FROM saves \
                 WHERE namespace = $1 AND idempotency = $2",
                &ids[..2],
            )
            .await?;
        tx.commit().await?;
        return Ok(Saved {
            collection: row.get(0),
            key: row.get(1),
            version: row.get(2),
            created: row.get(3),
        });
    }
    let row = tx
        .query_typed_one(
            "WITH r AS (\
               INSERT INTO records (namespace, collection, key, value, version, saved_at, run, step) \
               VALUES ($1, $3, $4, $5, 1, clock_timestamp(), $6, $7) \
               ON CONFLICT (namespace, collection, key) DO UPDATE SET value = EXCLUDED.value, \
               version = records.version + 1, saved_at = clock_timestamp(), run = EXCLUDED.run, \
               step = EXCLUDED.step RETURNING version) \
             UPDATE saves SET version = r.version, created = (r.version = 1) FROM r \
             WHERE saves.namespace = $1 AND saves.idempotency = $2 \
             RETURNING saves.version, saves.created",
            &[
                (&s.namespace, Type::TEXT),
                (&s.idempotency, Type::TEXT),
                (&s.collection, Type::TEXT),
                (&s.key, Type::TEXT),
                (&s.value, Type::JSONB),
                (&s.run, Type::TEXT),
                (&s.step, Type::TEXT),
            ],
        )
        .await?;
    tx.commit().await?;
    Ok(Saved {
        collection: s.collection.clone(),
        key: s.key.clone(),
        version: row.get(0),
        created: row.get(1),
    })
}

/// What SQL answered, as rows: those it keeps (ordered, limited) and
/// those it leaves to the evaluator (with a `failing` column), or that
/// more than the bound were left to it.
struct Found {
    kept: Vec<Row>,
    suspects: Vec<Row>,
    too_many: bool,
}

/// The records SQL kept, and those left to the evaluator, each marked
/// when SQL says it fails.
type Sorted = (Vec<Record>, Vec<(Record, bool)>);

impl Found {
    /// The records SQL kept, and those it left to the evaluator by key,
    /// each marked when SQL says it fails (read up to the first that does).
    fn read(self, collection: &str) -> Result<Sorted, LookupError> {
        let kept = records(collection, &self.kept)?;
        let mut suspects = Vec::new();
        for row in &self.suspects {
            let failing: bool = row.get("failing");
            match Record::from_row(row) {
                Ok(r) => suspects.push((r, failing)),
                Err(e) => return Err(row_error(collection, row, e)),
            }
            if failing {
                // The evaluator fails on it (or on one before it): the
                // lookup ends there.
                break;
            }
        }
        suspects.sort_by(|(a, _), (b, _)| a.key.as_bytes().cmp(b.key.as_bytes()));
        Ok((kept, suspects))
    }
}

async fn lookup(
    c: &mut Client,
    q: &Lookup<'_>,
    filter: Option<&Filter>,
    order: &OrderBy,
    max_candidates: usize,
) -> Result<Found, tokio_postgres::Error> {
    // One snapshot for every query of the lookup: a save between two of
    // them cannot show a record twice or not at all.
    let tx = c
        .build_transaction()
        .isolation_level(IsolationLevel::RepeatableRead)
        .read_only(true)
        .start()
        .await?;
    let mut params: Vec<(&(dyn ToSql + Sync), Type)> =
        vec![(&q.namespace, Type::TEXT), (&q.collection, Type::TEXT)];
    if let Some(f) = filter {
        params.extend(f.typed_params());
    }
    let keep = filter.map_or("TRUE", |f| f.keep.as_str());
    let sql = format!(
        "SELECT {SELECT_COLUMNS} FROM records WHERE namespace = $1 AND collection = $2 AND {keep} \
         ORDER BY {} LIMIT {}",
        order.sql(),
        q.limit
    );
    let kept = tx.query_typed(&sql, &params).await?;
    let mut found = Found {
        kept,
        suspects: Vec::new(),
        too_many: false,
    };
    if let Some(f) = filter
        && (f.fail != "FALSE" || !f.exact)
    {
        // The records the evaluator must see: those SQL says fail, and
        // (not exact) those it cannot decide — everything neither kept nor
        // dropped. `narrow` holds them all, and an index may answer it.
        let open = if f.exact {
            format!("COALESCE({}, FALSE)", f.fail)
        } else {
            format!(
                "NOT (COALESCE({}, FALSE) OR COALESCE({}, FALSE))",
                f.keep, f.drop
            )
        };
        let from = format!(
            "SELECT {SELECT_COLUMNS}, COALESCE({fail}, FALSE) AS failing FROM records \
             WHERE namespace = $1 AND collection = $2 AND {narrow} AND {open}",
            fail = f.fail,
            narrow = f.narrow,
        );
        // Unordered first (no index order to follow: the whole collection
        // is usually read once, and nothing found): one row is enough when
        // exact, the bound and one more otherwise.
        let limit = if f.exact { 1 } else { max_candidates + 1 };
        let mut rows = tx
            .query_typed(&format!("{from} LIMIT {limit}"), &params)
            .await?;
        let first_failing = rows
            .iter()
            .position(|r| r.get::<_, bool>("failing"))
            .map(|i| rows.swap_remove(i));
        if let Some(failing) = first_failing {
            // Some record fails: the first by key is the one to name, as
            // the SQLite store names it.
            rows = tx
                .query_typed(
                    &format!(
                        "{from} ORDER BY key COLLATE \"C\" LIMIT {}",
                        max_candidates + 1
                    ),
                    &params,
                )
                .await?;
            if !rows.iter().any(|r| r.get::<_, bool>("failing")) {
                // More undecided records than the bound come before it by
                // key: they are evaluated, then the one found fails the
                // lookup (never an answer without it).
                rows.push(failing);
            }
        } else if rows.len() > max_candidates {
            found.too_many = true;
        }
        found.suspects = rows;
    }
    tx.commit().await?;
    Ok(found)
}

fn records(collection: &str, rows: &[Row]) -> Result<Vec<Record>, LookupError> {
    rows.iter()
        .map(|r| Record::from_row(r).map_err(|e| row_error(collection, r, e)))
        .collect()
}

/// A row [`Record::from_row`] could not read: named by its collection and
/// key when its key reads (the database answered; this is no outage).
fn row_error(collection: &str, row: &Row, e: crate::record::RowError) -> LookupError {
    let error = match row.try_get::<_, String>("key") {
        Ok(key) => StoreError::Unreadable {
            collection: collection.to_string(),
            key,
            reason: e.to_string(),
        },
        Err(_) => StoreError::Database {
            doing: "reading a record",
            message: e.to_string(),
        },
    };
    LookupError::Store(error)
}

fn too_many(q: &Lookup<'_>, f: &Filter, bound: usize) -> LookupError {
    let why = if f.not_compiled.is_empty() {
        "SQL cannot decide them exactly (numbers jsonb does not keep as the evaluator reads them, \
         or lists and objects compared with numbers); narrow the condition with a part SQL decides, \
         such as an equality on a text"
            .to_string()
    } else {
        let parts: Vec<String> = f
            .not_compiled
            .iter()
            .map(|p| format!("the part at character {}: {}", p.position, p.reason))
            .collect();
        format!("SQL could not compile {}", parts.join("; "))
    };
    LookupError::TooManyCandidates {
        collection: q.collection.to_string(),
        bound,
        not_compiled: f.not_compiled.clone(),
        why,
    }
}
