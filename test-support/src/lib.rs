//! Test helpers shared by more than one test target of the workspace, in a
//! crate of their own (dev-only, never published) so each target depends on
//! them by name instead of including their files by path.

pub mod auth_trap;
pub mod browser;
#[allow(
    missing_docs,
    reason = "its fields and helpers are named for the case files' keys"
)]
pub mod conformance_driver;
pub mod git_server;
pub mod packages;
pub mod postgres;
pub mod recording_proxy;
pub mod viewer;
pub mod when_gone;

/// Every file below `root` whose name ends `.ext`, by its path under
/// `root`, with its text, sorted: what tests that read the repository's
/// own sources or pages walk.
pub fn text_files(root: &std::path::Path, ext: &str) -> Vec<(String, String)> {
    let mut found = Vec::new();
    let mut folders = vec![root.to_path_buf()];
    while let Some(folder) = folders.pop() {
        for entry in std::fs::read_dir(&folder).expect("a readable folder") {
            let path = entry.expect("an entry").path();
            if path.is_dir() {
                folders.push(path);
            } else if path.extension().is_some_and(|e| e == ext) {
                let name = path.strip_prefix(root).unwrap_or(&path);
                let text = std::fs::read_to_string(&path).expect("readable");
                found.push((name.to_string_lossy().into_owned(), text));
            }
        }
    }
    found.sort();
    found
}

/// A random number for names and ids that must differ between test runs
/// (the process's hasher seed mixed with the clock; no extra crate).
pub fn random_u32() -> u32 {
    use std::hash::{BuildHasher, Hasher};
    let mut h = std::collections::hash_map::RandomState::new().build_hasher();
    h.write_u128(
        std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map(|d| d.as_nanos())
            .unwrap_or_default(),
    );
    (h.finish() >> 32) as u32
}
