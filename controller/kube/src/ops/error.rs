//! What can stop the controller from running as a service: the metrics
//! address cannot be bound, logging or signal handlers cannot be set up, or
//! the Lease cannot be read or written. Each message names what was being
//! done and the setting (flag or variable) that chose it.

use std::net::SocketAddr;

/// The controller cannot start or keep running as a service.
#[derive(Debug, thiserror::Error)]
pub enum OpsError {
    /// `--metrics-addr` could not be listened on.
    #[error(
        "cannot serve metrics and health on {addr} (--metrics-addr, COXSWAIN_METRICS_ADDR): {source}"
    )]
    Bind {
        /// The address asked for.
        addr: SocketAddr,
        /// Why the operating system refused it.
        #[source]
        source: std::io::Error,
    },
    /// `--log-level` is not a filter `tracing` understands.
    #[error(
        "--log-level (COXSWAIN_LOG_LEVEL) {text:?} is not a log filter such as `info` or `coxswain_k8s=debug,info`: {source}"
    )]
    LogLevel {
        /// The filter as given.
        text: String,
        /// What the parser found wrong.
        #[source]
        source: tracing_subscriber::filter::ParseError,
    },
    /// Logging was already set up in this process.
    #[error("cannot start logging: {0}")]
    Logging(#[source] tracing_subscriber::util::TryInitError),
    /// SIGTERM or SIGINT could not be caught.
    #[error("cannot listen for {signal}: {source}")]
    Signal {
        /// The signal's name.
        signal: &'static str,
        /// Why the handler could not be installed.
        #[source]
        source: std::io::Error,
    },
    /// The Lease used for leader election could not be read or written.
    #[error("leader election on Lease {namespace}/{name}: {action}: {source}")]
    Lease {
        /// The Lease's namespace.
        namespace: String,
        /// The Lease's name.
        name: String,
        /// What was being done, such as `taking the lease`.
        action: &'static str,
        /// The lease manager's error (boxed: it is large and rare).
        #[source]
        source: Box<kube_lease_manager::LeaseManagerError>,
    },
    /// `--lease-duration` is too short for the lease manager.
    #[error("--lease-duration (COXSWAIN_LEASE_DURATION) must be at least {min}s, not {given}s")]
    LeaseDuration {
        /// The duration given, in seconds.
        given: u64,
        /// The shortest accepted, in seconds.
        min: u64,
    },
    /// This replica no longer holds the Lease: another may be reconciling,
    /// so this one must stop and be restarted.
    #[error("lost the Lease {namespace}/{name}: {reason}")]
    LeaseLost {
        /// The Lease's namespace.
        namespace: String,
        /// The Lease's name.
        name: String,
        /// Why: another replica took it, or it could not be renewed in time.
        reason: String,
    },
}
