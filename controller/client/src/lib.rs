//! Coxswain as a person acts on it: what `coxswain ui` and `kubectl
//! coxswain` do with the credentials of whoever uses them. Reading a run
//! never creates or writes anything ([`flow::of_run`], [`whole_status`]);
//! the one write is a person's answer to an Approval ([`answer::write`]),
//! which admission judges as it judges their own `kubectl patch`.
//!
//! The controller (`coxswain-k8s`) acts as itself and admission
//! (`coxswain-admission`) judges requests; this crate needs neither, and
//! shares with them only what `coxswain-kube` holds.

pub mod answer;
pub mod flow;

use coxswain_core::api::{Run, RunStatus};
pub use coxswain_kube::approvals::not_ours;
pub use coxswain_kube::values::ValueError;
use coxswain_kube::values::Values;

/// The status of `run` with every value moved out of it put back, read
/// with `client`'s credentials (no cache shared with anyone else).
pub async fn whole_status(client: &kube::Client, run: &Run) -> Result<RunStatus, ValueError> {
    Values::new(client.clone()).load(run).await
}
