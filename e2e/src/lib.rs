//! Test support for Coxswain's end-to-end tests.
//!
//! Tests must run against a real kube-apiserver (schemas, status subresources,
//! owner references, webhooks and watches behave as on users' clusters), so
//! this crate starts the Go harness in `e2e/cluster` — etcd, kube-apiserver,
//! kube-controller-manager and a stand-in node that runs pods as local
//! processes — once per test binary, or uses `KUBECONFIG` when it is set.
//! Every test gets its own namespace ([`TestNamespace`]).

mod cluster;
mod controller;
mod error;
mod kubectl;
mod namespace;
mod wait;

pub use cluster::{client, kubeconfig, workspace_root};
pub use controller::{ControllerProcess, coxswain_bin};
pub use error::Error;
pub use kubectl::Kubectl;
pub use namespace::TestNamespace;
pub use wait::{wait_for, wait_for_job_condition};

/// Result with this crate's [`Error`].
pub type Result<T, E = Error> = std::result::Result<T, E>;
