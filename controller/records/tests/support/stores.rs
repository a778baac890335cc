//! Fresh stores for the store tests: SQLite in a temporary folder, and
//! PostgreSQL in a schema of its own on the test server (made here, named
//! `test_<pid>_<n>_<nanos>`, reached through `search_path` in the URL's
//! `options`, and dropped when the test ends, even when it fails), so tests
//! run side by side and leave nothing behind.

use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::{SystemTime, UNIX_EPOCH};

use coxswain_core::expr::{Expr, parse};
use coxswain_records::{Lookup, LookupError, PgSettings, Record, Store};
use serde_json::Value;
use tokio_postgres::{Client, NoTls};

use super::url;

/// Which database a shared case runs on.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Backend {
    Sqlite,
    Postgres,
}

pub const BOTH: [Backend; 2] = [Backend::Sqlite, Backend::Postgres];

/// A fresh, empty database and the means to open more handles on it.
pub struct Fresh {
    pub backend: Backend,
    /// The SQLite file's folder.
    dir: Option<tempfile::TempDir>,
    /// The PostgreSQL schema, dropped on drop.
    schema: Option<String>,
}

impl Fresh {
    /// A fresh store of `backend`, and the guard that removes it.
    pub async fn with_store(backend: Backend) -> (Fresh, Store) {
        let db = Fresh::new(backend).await;
        let store = db.open().await;
        (db, store)
    }

    pub async fn new(backend: Backend) -> Fresh {
        match backend {
            Backend::Sqlite => Fresh {
                backend,
                dir: Some(tempfile::tempdir().expect("a temporary folder")),
                schema: None,
            },
            Backend::Postgres => {
                static N: AtomicUsize = AtomicUsize::new(0);
                let nanos = SystemTime::now()
                    .duration_since(UNIX_EPOCH)
                    .unwrap()
                    .subsec_nanos();
                let schema = format!(
                    "test_{}_{}_{nanos}",
                    std::process::id(),
                    N.fetch_add(1, Ordering::Relaxed)
                );
                admin()
                    .await
                    .batch_execute(&format!("CREATE SCHEMA {schema}"))
                    .await
                    .expect("making the test schema");
                Fresh {
                    backend,
                    dir: None,
                    schema: Some(schema),
                }
            }
        }
    }

    /// The SQLite file (in a folder that does not exist yet: opening makes
    /// it).
    pub fn sqlite_path(&self) -> std::path::PathBuf {
        self.dir
            .as_ref()
            .expect("a SQLite database")
            .path()
            .join("data/coxswain/records.sqlite3")
    }

    /// The URL of the test server with this schema first on the search path
    /// and `application_name` set to the schema (to find its backends).
    pub fn pg_url(&self) -> String {
        let schema = self.schema.as_ref().expect("a PostgreSQL database");
        let base = url();
        let sep = if base.contains('?') { '&' } else { '?' };
        format!("{base}{sep}options=-csearch_path%3D{schema}&application_name={schema}")
    }

    pub fn schema(&self) -> &str {
        self.schema.as_deref().expect("a PostgreSQL database")
    }

    /// A store on this database (each call a new handle).
    pub async fn open(&self) -> Store {
        self.open_with(PgSettings::default()).await
    }

    pub async fn open_with(&self, settings: PgSettings) -> Store {
        match self.backend {
            Backend::Sqlite => Store::open_sqlite(&self.sqlite_path())
                .await
                .expect("opening the SQLite store"),
            Backend::Postgres => Store::connect_postgres(&self.pg_url(), settings)
                .await
                .expect("connecting the PostgreSQL store"),
        }
    }

    /// A plain connection to the schema, to look behind the store's back.
    pub async fn client(&self) -> Client {
        connect(&self.pg_url()).await
    }
}

impl Drop for Fresh {
    fn drop(&mut self) {
        let Some(schema) = self.schema.take() else {
            return;
        };
        // Drop runs inside the test's runtime: a runtime of its own, on a
        // thread of its own.
        let _ = std::thread::spawn(move || {
            let rt = tokio::runtime::Builder::new_current_thread()
                .enable_all()
                .build()
                .expect("a runtime");
            rt.block_on(async {
                let c = admin().await;
                // End the store's own connections first: they could hold
                // locks on the schema's tables.
                let _ = c
                    .execute(
                        "SELECT pg_terminate_backend(pid) FROM pg_stat_activity \
                         WHERE application_name = $1 AND pid <> pg_backend_pid()",
                        &[&schema],
                    )
                    .await;
                if let Err(e) = c
                    .batch_execute(&format!("DROP SCHEMA IF EXISTS {schema} CASCADE"))
                    .await
                {
                    eprintln!("dropping {schema}: {e}");
                }
            });
        })
        .join();
    }
}

async fn connect(url: &str) -> Client {
    let (client, connection) = tokio_postgres::connect(url, NoTls)
        .await
        .unwrap_or_else(|e| panic!("connecting to {url}: {e}"));
    tokio::spawn(async move {
        let _ = connection.await;
    });
    client
}

/// A connection to the test server itself.
pub async fn admin() -> Client {
    connect(&url()).await
}

/// A parsed condition or path.
pub fn expr(src: &str) -> Expr {
    parse(src).unwrap_or_else(|e| panic!("{src}: {e}"))
}

/// A lookup as a step would make it.
pub struct Ask<'a> {
    pub namespace: &'a str,
    pub collection: &'a str,
    pub condition: Option<&'a str>,
    pub input: Value,
    pub order_by: Option<&'a str>,
    pub descending: bool,
    pub limit: usize,
}

impl<'a> Ask<'a> {
    pub fn new(collection: &'a str) -> Ask<'a> {
        Ask {
            namespace: "team-a",
            collection,
            condition: None,
            input: Value::Null,
            order_by: None,
            descending: false,
            limit: 100,
        }
    }

    /// A lookup of `collection` where `condition` holds, given `input`.
    pub fn matching(collection: &'a str, condition: &'a str, input: Value) -> Ask<'a> {
        Ask {
            condition: Some(condition),
            input,
            ..Ask::new(collection)
        }
    }

    pub async fn run(&self, store: &Store) -> Result<Vec<Record>, LookupError> {
        let cond = self.condition.map(expr);
        let order = self.order_by.map(expr);
        let order_ref = order.as_ref().map(|e| {
            e.references()
                .next()
                .unwrap_or_else(|| panic!("{:?} is a reference", self.order_by))
        });
        let scope = serde_json::json!({ "input": self.input });
        store
            .lookup(&Lookup {
                namespace: self.namespace,
                collection: self.collection,
                condition: cond.as_ref(),
                scope: &scope,
                order_by: order_ref,
                descending: self.descending,
                limit: self.limit,
            })
            .await
    }

    pub async fn keys(&self, store: &Store) -> Vec<String> {
        self.run(store)
            .await
            .unwrap_or_else(|e| panic!("{:?}: {e}", self.condition))
            .into_iter()
            .map(|r| r.key)
            .collect()
    }
}
