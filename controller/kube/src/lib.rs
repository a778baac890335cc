//! What every Coxswain actor on Kubernetes shares, and nothing that acts:
//! the names and labels of the objects Coxswain makes ([`names`]), reading
//! lists of objects without trusting their depth ([`guard`]), the flow
//! snapshots a Run is pinned to ([`snapshot`]), the checks a rerun's source
//! must pass ([`rerun_source`]), and the ops server every process serves
//! ([`ops`]: metrics, health, leader election, logging).
//!
//! Admission (`coxswain-admission`, which judges requests), the controller
//! (`coxswain-k8s`, which reconciles) and the person-side readers build on
//! this crate; it depends on none of them.

pub mod guard;
pub mod names;
pub mod ops;
pub mod rerun_source;
pub mod snapshot;
