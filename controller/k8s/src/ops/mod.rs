//! Running the controller as a service: metrics, health, logs, leader
//! election and shutdown. The reconcilers call into these; nothing here
//! knows about Runs beyond the labels of its metrics.

mod error;
mod health;
mod leader;
mod logging;
mod metrics;
mod server;
mod settings;
mod signal;

pub use error::OpsError;
pub use health::{Health, Readiness};
pub use leader::Leadership;
pub use logging::init_tracing;
pub use metrics::{Metrics, ReconcileTimer};
pub use server::serve;
pub use settings::{LogFormat, OpsSettings};
pub use signal::shutdown_signal;
