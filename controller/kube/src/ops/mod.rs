//! Running the controller as a service: metrics, health, logs, leader
//! election and shutdown. The reconcilers call into these; nothing here
//! knows about Runs beyond the labels of its metrics.
//!
//! How `controller::run` puts them together (the reconcile loop stands in
//! for the kube-runtime `Controller`s, which take the shutdown future with
//! `graceful_shutdown_on` rather than installing their own handlers):
//!
//! ```no_run
//! use std::future::Future;
//! use coxswain_kube::ops::{self, Health, Leadership, Metrics, OpsError, OpsSettings, Readiness};
//!
//! async fn run(
//!     settings: OpsSettings,
//!     client: kube::Client,
//!     reconcile: impl Future<Output = ()>,
//! ) -> Result<(), OpsError> {
//!     ops::init_tracing(&settings.log)?;
//!     let stop = ops::shutdown_signal()?;
//!     let (metrics, health) = (Metrics::new(), Health::new());
//!     ops::serve(&settings, metrics.clone(), health.clone()).await?;
//!     health.set(Readiness::Standby);
//!     let leadership = if settings.leader_election {
//!         Some(Leadership::acquire(client, &settings).await?)
//!     } else {
//!         None
//!     };
//!     metrics.set_leader(true);
//!     health.set(Readiness::Syncing); // Ready once the stores are ready
//!     let lost = async {
//!         match &leadership {
//!             Some(leadership) => leadership.lost().await,
//!             None => std::future::pending().await,
//!         }
//!     };
//!     tokio::select! {
//!         () = reconcile => {}
//!         signal = stop => tracing::info!(%signal, "shutting down"),
//!         err = lost => {
//!             health.set(Readiness::Stopping);
//!             return Err(err); // exit non-zero: restarted as a standby
//!         }
//!     }
//!     health.set(Readiness::Stopping);
//!     metrics.set_leader(false);
//!     if let Some(leadership) = leadership {
//!         leadership.release().await?; // a standby takes over at once
//!     }
//!     Ok(())
//! }
//! ```

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
pub use settings::{LogFormat, LogSettings, OpsSettings};
pub use signal::shutdown_signal;
