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
