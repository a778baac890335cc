//! The Debian packages a test needs, installed by the tests' own set-up
//! when missing (`e2e/packages`, the one helper for it: as root through
//! apt-get, otherwise a message naming the command), so `cargo test
//! --workspace` runs on a fresh machine and CI installs nothing by hand.

use std::collections::BTreeMap;
use std::path::Path;
use std::process::{Command, Stdio};
use std::sync::Mutex;

/// Makes sure the packages of `set` (a file in `e2e/packages.d/`) are
/// installed, once per process; the error is `e2e/packages`' own words.
pub fn ensure(set: &str) -> Result<(), String> {
    static DONE: Mutex<BTreeMap<String, Result<(), String>>> = Mutex::new(BTreeMap::new());
    let mut done = DONE.lock().unwrap_or_else(|e| e.into_inner());
    done.entry(set.to_string())
        .or_insert_with(|| install(set))
        .clone()
}

fn install(set: &str) -> Result<(), String> {
    let script = Path::new(env!("CARGO_MANIFEST_DIR")).join("../e2e/packages");
    let out = Command::new(&script)
        .arg(format!("@{set}"))
        .stdin(Stdio::null())
        .output()
        .map_err(|e| format!("{}: {e}", script.display()))?;
    if out.status.success() {
        Ok(())
    } else {
        Err(format!(
            "the Debian packages of e2e/packages.d/{set} are missing and were not installed: {}",
            String::from_utf8_lossy(&out.stderr).trim()
        ))
    }
}
