//! Coxswain's pure core: what a flow is and how a run moves.
//!
//! `api` (the resource types), `scope`, `expr`, `template`, `flow` (reading
//! and validating flows) and `engine` (the run state machine) do no I/O and
//! know nothing of a Kubernetes client, an HTTP client or an async runtime,
//! so the controller, the admission webhook and the local runner share one
//! exact implementation of the flow language, and this crate builds without
//! any of them.

pub mod api;
pub mod crds;
pub mod engine;
pub mod expr;
pub mod flow;
pub mod portable_yaml;
pub mod scope;
pub mod template;
pub mod text;
