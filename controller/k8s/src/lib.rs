//! Coxswain on Kubernetes: the thin shell around the pure engine.
//!
//! The Run reconciler reads a Run, rebuilds the engine from its status, feeds
//! it what happened (the workspace's checkout or push ended, Jobs finished,
//! an Approval decided, in-controller work finished, time passed,
//! `spec.cancel`), writes the new status in one write, then carries out the
//! core's [`coxswain_core::engine::Plan`]: the same plan `coxswain run` and
//! the conformance driver follow, so the three drivers cannot disagree on
//! what runs, stops, is asked or let go. Nothing lives only in memory: a
//! controller killed at any moment resumes every run from the API server.
//! This crate sits above `coxswain-core` and `coxswain-steps` and is the
//! only one that talks to the API server.

pub mod chat;
pub mod controller;
pub mod error;
pub mod flows;
pub mod jobs;
pub mod offload;
pub mod records;
pub mod run;
pub mod settings;
pub mod shards;
pub mod snapshots;
pub mod store;

pub use coxswain_admission as admission;
pub use coxswain_kube::{guard, names, ops, rerun_source, snapshot};

pub use error::{Error, StartError, ValueError};
pub use settings::Settings;
