//! Coxswain runs flows of AI agents, scripts, HTTP calls and people.
//!
//! This crate is the `coxswain` binary, its command line and the local
//! runner. The layers below it are crates of their own, as in linkerd2's
//! policy-controller: `coxswain-core` (the resource types, the languages,
//! validation and the engine; no I/O, no Kubernetes client, no async
//! runtime) and `coxswain-steps` (the executors). They are re-exported here
//! under their module names, so `coxswain_core::engine` is the core's engine.

pub mod cli;
pub mod local;
