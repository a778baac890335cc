//! Running the controller as a service: metrics, health, logs, leader election.
//! (Being built: see the "ops" work item.)

/// Where metrics and health are served, how logs are written, and the Lease.
#[derive(clap::Args, Debug, Clone, Default)]
pub struct OpsSettings {}
