//! A real PostgreSQL for tests that need the records database: the server
//! `e2e/postgres/up` starts (or reuses), or `COXSWAIN_POSTGRES_URL` when set
//! (as `.ci/run` sets it), and a fresh database of the test's own on it,
//! dropped when the guard goes. Never skipped: without a server, tests fail.

use std::path::PathBuf;
use std::process::{Command, Stdio};
use std::sync::OnceLock;

/// The server's URL (its `coxswain` database): the environment's, or the
/// last line `e2e/postgres/up` prints. Started once per test process.
pub fn server_url() -> String {
    static URL: OnceLock<String> = OnceLock::new();
    URL.get_or_init(|| {
        if let Ok(url) = std::env::var("COXSWAIN_POSTGRES_URL") {
            return url;
        }
        let up = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../e2e/postgres/up");
        let out = Command::new(&up)
            .stdin(Stdio::null())
            .stderr(Stdio::inherit())
            .output()
            .unwrap_or_else(|e| panic!("running {}: {e}", up.display()));
        assert!(
            out.status.success(),
            "{} failed ({})",
            up.display(),
            out.status
        );
        let stdout = String::from_utf8_lossy(&out.stdout);
        stdout
            .lines()
            .last()
            .and_then(|l| l.strip_prefix("COXSWAIN_POSTGRES_URL="))
            .unwrap_or_else(|| panic!("{} printed {stdout:?}, not the URL line", up.display()))
            .to_string()
    })
    .clone()
}

/// A database made for one test, dropped (its connections ended first)
/// when this is dropped.
pub struct FreshDatabase {
    /// Its URL, for `--records-database` or `Store::connect_postgres`.
    pub url: String,
    name: String,
}

impl FreshDatabase {
    /// A new empty database named `prefix_<random>`.
    pub fn new(prefix: &str) -> FreshDatabase {
        let server = server_url();
        let name = format!("{prefix}_{:08x}", crate::random_u32());
        psql(&server, &format!("CREATE DATABASE {name}"));
        let url = match server.rsplit_once('/') {
            Some((base, _)) => format!("{base}/{name}"),
            None => panic!("the server URL {server} names no database"),
        };
        FreshDatabase { url, name }
    }

    /// Runs one SQL statement in this database with `psql` and returns
    /// what it prints (unaligned, tuples only).
    pub fn query(&self, sql: &str) -> String {
        psql(&self.url, sql)
    }
}

impl Drop for FreshDatabase {
    fn drop(&mut self) {
        let server = server_url();
        let _ = run_psql(
            &server,
            &format!("DROP DATABASE IF EXISTS {} WITH (FORCE)", self.name),
        );
    }
}

fn psql(url: &str, sql: &str) -> String {
    match run_psql(url, sql) {
        Ok(out) => out,
        Err(e) => panic!("psql {sql:?} on {url}: {e}"),
    }
}

fn run_psql(url: &str, sql: &str) -> Result<String, String> {
    let out = Command::new(psql_bin())
        .args(["-X", "-q", "-At", "-v", "ON_ERROR_STOP=1", url, "-c", sql])
        .stdin(Stdio::null())
        .output()
        .map_err(|e| e.to_string())?;
    if !out.status.success() {
        return Err(String::from_utf8_lossy(&out.stderr).into_owned());
    }
    Ok(String::from_utf8_lossy(&out.stdout).trim().to_string())
}

/// Debian puts `psql` in /usr/bin (a wrapper) and in the versioned folder.
fn psql_bin() -> PathBuf {
    let versioned = std::fs::read_dir("/usr/lib/postgresql")
        .ok()
        .into_iter()
        .flatten()
        .flatten()
        .map(|e| e.path().join("bin/psql"))
        .find(|p| p.exists());
    versioned.unwrap_or_else(|| PathBuf::from("psql"))
}
