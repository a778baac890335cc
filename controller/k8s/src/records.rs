//! The records database on a cluster: PostgreSQL, named by a setting the
//! chart fills from a Secret. Saves and lookups of Runs go there, and every
//! Run that ends is archived there (see [`crate::run`]).
//!
//! The controller connects at start and migrates the schema (under an
//! advisory lock, so replicas starting together take turns); a database
//! migrated by a newer Coxswain stops it with a message saying so. Without
//! a database, flows that save or look up are refused by admission, and a
//! Run that reaches such a step anyway fails it naming the setting.

use coxswain_records::{PgSettings, Store};
use coxswain_steps::records::Records;

use crate::admission::RecordsDatabase;
use crate::error::StartError;

/// What a Run meets when no database is configured, naming the chart value
/// and the flag.
pub const NOT_CONFIGURED: &str = "no records database is configured: set `records.database` in \
     the chart (the controller's --records-database, COXSWAIN_RECORDS_DATABASE) to a PostgreSQL URL";

/// Where records and archived Runs live.
#[derive(clap::Args, Debug, Clone, Default)]
pub struct RecordsSettings {
    /// The database.
    #[command(flatten)]
    pub database: RecordsDatabase,
    /// The most records one lookup evaluates in memory when its `where`
    /// cannot all be compiled to SQL; past it the step fails saying so.
    #[arg(
        long = "records-max-candidates",
        env = "COXSWAIN_RECORDS_MAX_CANDIDATES",
        default_value_t = 10_000
    )]
    pub max_candidates: usize,
    /// Connections to the database kept open at most.
    #[arg(
        long = "records-connections",
        env = "COXSWAIN_RECORDS_CONNECTIONS",
        default_value_t = 8
    )]
    pub max_connections: usize,
    /// Delete finished Runs from the cluster this long after they ended,
    /// once archived (a Flow's `retention.finishedRuns` wins), as a
    /// duration such as `1h` or `7d`. Default: keep them.
    #[arg(
        long = "retention-finished-runs",
        env = "COXSWAIN_RETENTION_FINISHED_RUNS",
        value_name = "DURATION",
        value_parser = retention
    )]
    pub finished_runs: Option<std::time::Duration>,
    /// Delete archived Runs from the database this long after they ended,
    /// as a duration such as `90d` (the leader looks every hour, or every
    /// tenth of the duration when shorter). Default: keep them.
    #[arg(
        long = "archive-retention",
        env = "COXSWAIN_ARCHIVE_RETENTION",
        value_name = "DURATION",
        value_parser = retention
    )]
    pub archive: Option<std::time::Duration>,
}

fn retention(text: &str) -> Result<std::time::Duration, String> {
    match coxswain_core::flow::parse_duration(text) {
        Ok(d) if d.is_zero() => Err("a retention must be longer than zero".into()),
        Ok(d) => Ok(d),
        Err(e) => Err(e.to_string()),
    }
}

impl RecordsSettings {
    /// Whether a database is configured (admission refuses flows that save
    /// or look up when not).
    pub fn configured(&self) -> bool {
        self.database.named().is_some()
    }
}

/// Deletes the archived Runs past `keep` while this replica leads: when it
/// starts leading, then every hour (every tenth of `keep` when that is
/// shorter, at least a second apart).
pub async fn prune_archive(
    store: Store,
    keep: std::time::Duration,
    mut leading: tokio::sync::watch::Receiver<bool>,
) {
    let every = (keep / 10).clamp(
        std::time::Duration::from_secs(1),
        std::time::Duration::from_secs(3600),
    );
    loop {
        if leading.wait_for(|l| *l).await.is_err() {
            return;
        }
        match jiff::Timestamp::now().checked_sub(keep) {
            Ok(cut) => match store.prune_runs(&cut.to_string()).await {
                Ok(0) => {}
                Ok(deleted) => {
                    tracing::info!(deleted, ended_before = %cut, "deleted archived runs past the archive's retention");
                }
                Err(e) => {
                    tracing::warn!(error = %e, "could not delete archived runs past the archive's retention");
                }
            },
            Err(e) => {
                tracing::warn!(error = %e, "the archive's retention reaches before any time");
            }
        }
        tokio::time::sleep(every).await;
    }
}

/// Connects and migrates, when a database is configured.
pub async fn connect(settings: &RecordsSettings) -> Result<Option<Store>, StartError> {
    let Some(url) = settings.database.named() else {
        return Ok(None);
    };
    let pg = PgSettings {
        max_candidates: settings.max_candidates,
        max_connections: settings.max_connections.max(1),
    };
    let store = Store::connect_postgres(url, pg)
        .await
        .map_err(|e| StartError::Setting(format!("--records-database: {e}")))?;
    tracing::info!("records database connected and migrated");
    Ok(Some(store))
}

/// The saves and lookups of Runs: the store, or the reason there is none.
pub fn records(store: Option<&Store>) -> Records {
    match store {
        Some(store) => Records::new(store.clone()),
        None => Records::unavailable(NOT_CONFIGURED),
    }
}
