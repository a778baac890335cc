//! The Flow reconciler: a Flow's `Valid` and `Ready` conditions, its
//! summary columns, and its schedule.
//!
//! It writes only a Flow's `status` (GitOps: nothing but the author writes
//! `spec`), and only when it changed, so its own writes never start a storm.

pub mod runs;
pub mod schedule;
pub mod status;
