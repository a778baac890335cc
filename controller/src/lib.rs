//! Coxswain runs flows of AI agents, scripts, HTTP calls and people.
//!
//! The pure core (`scope`, `expr`, `template`, `flow`) does no I/O and knows
//! nothing of Kubernetes, so the controller, the admission webhook and the
//! local runner share one exact implementation of the flow language.

pub mod api;
pub mod cli;
pub mod crds;
pub mod engine;
pub mod expr;
pub mod flow;
pub mod local;
pub mod portable_yaml;
pub mod scope;
pub mod steps;
pub mod template;
pub mod text;
