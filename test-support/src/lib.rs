//! Test helpers shared by more than one test target of the workspace, in a
//! crate of their own (dev-only, never published) so each target depends on
//! them by name instead of including their files by path.

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
