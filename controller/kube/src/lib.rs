//! What every Coxswain actor on Kubernetes shares, and nothing that acts:
//! the names and labels of the objects Coxswain makes ([`names`]), reading
//! lists of objects without trusting their depth ([`guard`]), the flow
//! snapshots a Run is pinned to ([`snapshot`]), which Approval is a run's
//! ([`approvals`]), a Run's status read whole with its moved-out values
//! ([`values`]), the checks a rerun's source must pass ([`rerun_source`]),
//! and the ops server every process serves ([`ops`]: metrics, health,
//! leader election, logging).
//!
//! Admission (`coxswain-admission`, which judges requests), the controller
//! (`coxswain-k8s`, which reconciles) and the person's client
//! (`coxswain-client`, what the viewer and the plugin act through) build on
//! this crate; it depends on none of them.

pub mod approvals;
pub mod guard;
pub mod names;
pub mod ops;
pub mod rerun_source;
pub mod snapshot;
pub mod values;
