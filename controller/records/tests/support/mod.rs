//! A real PostgreSQL for the tests: `COXSWAIN_POSTGRES_URL` when set (as
//! `.ci/run` sets it), else the server `e2e/postgres/up` starts or reuses,
//! run once per test binary. Never skipped: without a server the tests fail.
//!
//! Each connection gets a `records` table of its own, a temporary one (it
//! goes with the session, and unqualified `records` finds it first), so tests
//! and test binaries run side by side on one server and leave nothing behind.

#![allow(dead_code)]

pub mod check;
pub mod stores;

use std::path::PathBuf;
use std::process::{Command, Stdio};
use std::sync::OnceLock;

use coxswain_records::SCHEMA;
use tokio_postgres::{Client, NoTls};

fn workspace_root() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../..")
}

/// The server's URL: the environment's, or the last line `up` prints.
pub fn url() -> String {
    static URL: OnceLock<String> = OnceLock::new();
    URL.get_or_init(|| {
        if let Ok(url) = std::env::var("COXSWAIN_POSTGRES_URL") {
            return url;
        }
        let up = workspace_root().join("e2e/postgres/up");
        let out = Command::new(&up)
            .stdin(Stdio::null())
            .stderr(Stdio::inherit())
            .output()
            .unwrap_or_else(|e| panic!("running {}: {e}", up.display()));
        assert!(
            out.status.success(),
            "{} failed ({}); see its messages above",
            up.display(),
            out.status
        );
        let stdout = String::from_utf8_lossy(&out.stdout);
        let line = stdout.lines().last().unwrap_or_default();
        line.strip_prefix("COXSWAIN_POSTGRES_URL=")
            .unwrap_or_else(|| panic!("{} printed {stdout:?}, not the URL line", up.display()))
            .to_string()
    })
    .clone()
}

/// A connection with an empty temporary `records` table.
pub async fn client() -> Client {
    let url = url();
    let (client, connection) = tokio_postgres::connect(&url, NoTls)
        .await
        .unwrap_or_else(|e| panic!("connecting to {url}: {e}"));
    tokio::spawn(async move {
        if let Err(e) = connection.await {
            eprintln!("postgres connection ended: {e}");
        }
    });
    let temp = SCHEMA.replacen("CREATE TABLE IF NOT EXISTS", "CREATE TEMPORARY TABLE", 1);
    assert_ne!(
        temp, SCHEMA,
        "SCHEMA starts with CREATE TABLE IF NOT EXISTS"
    );
    client
        .batch_execute(&temp)
        .await
        .expect("making the temporary records table");
    client
}

/// A proptest runner of `PROPTEST_CASES` cases (`default` without it),
/// keeping no failure files: a failing case is printed, not saved.
pub fn proptest_runner(default: u32) -> proptest::test_runner::TestRunner {
    let cases = std::env::var("PROPTEST_CASES")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or(default);
    proptest::test_runner::TestRunner::new(proptest::test_runner::Config {
        cases,
        failure_persistence: None,
        ..proptest::test_runner::Config::default()
    })
}
