//! Flags of the service side of the controller: where metrics and health are
//! served, how logs are written, and the Lease that picks the one replica
//! that reconciles. Each flag has a `COXSWAIN_*` variable for Deployments.

use std::{net::SocketAddr, time::Duration};

use tracing_subscriber::EnvFilter;

use coxswain_core::flow::parse_duration;

/// Shortest `--lease-duration`: the holder renews a third of the duration
/// before it ends, and a Lease counts whole seconds.
pub const MIN_LEASE_DURATION: Duration = Duration::from_secs(3);

/// How logs are written: shared by the controller and the webhook alone.
#[derive(clap::Args, Debug, Clone)]
pub struct LogSettings {
    /// How log lines are written on stderr.
    #[arg(
        long = "log-format",
        env = "COXSWAIN_LOG_FORMAT",
        value_enum,
        default_value_t = LogFormat::Text
    )]
    pub format: LogFormat,
    /// Which logs are written, as a tracing filter (`info`, `debug`, `coxswain_k8s=debug,info`).
    #[arg(
        long = "log-level",
        env = "COXSWAIN_LOG_LEVEL",
        value_name = "FILTER",
        default_value = "info",
        value_parser = parse_log_level
    )]
    pub level: String,
}

impl Default for LogSettings {
    /// The flags' defaults: text at `info`.
    fn default() -> Self {
        LogSettings {
            format: LogFormat::Text,
            level: "info".into(),
        }
    }
}

/// Where metrics and health are served, how logs are written, and the Lease.
#[derive(clap::Args, Debug, Clone)]
pub struct OpsSettings {
    /// Address serving /metrics, /healthz and /readyz (`127.0.0.1:0` picks a free port; the bound address is logged).
    #[arg(
        long,
        env = "COXSWAIN_METRICS_ADDR",
        value_name = "ADDR",
        default_value = "0.0.0.0:8080"
    )]
    pub metrics_addr: SocketAddr,
    /// How logs are written.
    #[command(flatten)]
    pub log: LogSettings,
    /// Reconcile only while holding the Lease, so one replica of several works and the others wait (`--leader-election=false` to run alone).
    #[arg(
        long,
        env = "COXSWAIN_LEADER_ELECTION",
        value_name = "BOOL",
        default_value_t = true,
        num_args = 0..=1,
        require_equals = true,
        default_missing_value = "true",
        action = clap::ArgAction::Set
    )]
    pub leader_election: bool,
    /// Share the Runs among every replica by bucket (a hash of each Run's
    /// uid) instead of one replica reconciling them all: each replica acts
    /// on the Runs of the buckets it holds in the `<lease-name>-buckets`
    /// Lease; schedules, chat commands, the archive and removing unused
    /// snapshots stay with the replica holding the Lease. Needs leader
    /// election.
    #[arg(
        long,
        env = "COXSWAIN_SHARDED",
        value_name = "BOOL",
        default_value_t = false,
        num_args = 0..=1,
        require_equals = true,
        default_missing_value = "true",
        action = clap::ArgAction::Set
    )]
    pub sharded: bool,
    /// Name of the Lease the replicas share.
    #[arg(
        long,
        env = "COXSWAIN_LEASE_NAME",
        value_name = "NAME",
        default_value = "coxswain-controller"
    )]
    pub lease_name: String,
    /// Namespace of the Lease (default: $POD_NAMESPACE, else the kubeconfig's namespace).
    #[arg(long, env = "COXSWAIN_LEASE_NAMESPACE", value_name = "NS")]
    pub lease_namespace: Option<String>,
    /// How long the Lease holds without renewal: a replica that dies is replaced after at most this long.
    #[arg(
        long,
        env = "COXSWAIN_LEASE_DURATION",
        value_name = "DURATION",
        default_value = "15s",
        value_parser = parse_lease_duration
    )]
    pub lease_duration: Duration,
    /// This replica's name in the Lease (default: $POD_NAME, else the host name, then `-` and the process id).
    #[arg(long, env = "COXSWAIN_IDENTITY", value_name = "NAME")]
    pub identity: Option<String>,
}

impl Default for OpsSettings {
    /// The flags' defaults, for tests and embedders.
    fn default() -> Self {
        OpsSettings {
            metrics_addr: SocketAddr::from(([0, 0, 0, 0], 8080)),
            log: LogSettings::default(),
            leader_election: true,
            sharded: false,
            lease_name: "coxswain-controller".into(),
            lease_namespace: None,
            lease_duration: Duration::from_secs(15),
            identity: None,
        }
    }
}

impl OpsSettings {
    /// This replica's identity in the Lease: `--identity`, else `$POD_NAME`
    /// or the host name followed by the process id, so two controllers on one
    /// host never share one.
    pub fn identity(&self) -> String {
        if let Some(identity) = &self.identity {
            return identity.clone();
        }
        let host = std::env::var("POD_NAME")
            .ok()
            .filter(|name| !name.is_empty())
            .or_else(host_name)
            .unwrap_or_else(|| "coxswain".into());
        format!("{host}-{}", std::process::id())
    }

    /// The Lease's namespace: `--lease-namespace`, else `$POD_NAMESPACE`,
    /// else `fallback` (the client's default namespace from the kubeconfig).
    pub fn lease_namespace(&self, fallback: &str) -> String {
        self.lease_namespace
            .clone()
            .or_else(|| {
                std::env::var("POD_NAMESPACE")
                    .ok()
                    .filter(|ns| !ns.is_empty())
            })
            .unwrap_or_else(|| fallback.to_string())
    }
}

/// How log lines look.
#[derive(clap::ValueEnum, Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum LogFormat {
    /// One readable line per event.
    #[default]
    Text,
    /// One JSON object per line, for log collectors.
    Json,
}

/// The host's name, as the kernel knows it.
fn host_name() -> Option<String> {
    std::fs::read_to_string("/proc/sys/kernel/hostname")
        .ok()
        .map(|name| name.trim().to_string())
        .filter(|name| !name.is_empty())
}

/// Checks `--log-level` when it is read, so a typo is reported with the flag.
fn parse_log_level(text: &str) -> Result<String, String> {
    EnvFilter::try_new(text)
        .map(|_| text.to_string())
        .map_err(|e| format!("not a log filter such as `info` or `coxswain_k8s=debug,info`: {e}"))
}

/// Reads `--lease-duration` as flows write durations; whole seconds, at least
/// [`MIN_LEASE_DURATION`].
fn parse_lease_duration(text: &str) -> Result<Duration, String> {
    let duration = parse_duration(text).map_err(|e| e.to_string())?;
    if duration.subsec_nanos() != 0 {
        return Err(format!(
            "a Lease counts whole seconds; write {}s",
            (duration.as_secs() + 1).max(MIN_LEASE_DURATION.as_secs())
        ));
    }
    if duration < MIN_LEASE_DURATION {
        return Err(format!(
            "must be at least {}s: the holder renews a third of it before it ends",
            MIN_LEASE_DURATION.as_secs()
        ));
    }
    Ok(duration)
}

#[cfg(test)]
mod tests {
    use clap::Parser;

    use super::*;

    #[derive(Parser, Debug)]
    struct Cli {
        #[command(flatten)]
        ops: OpsSettings,
    }

    fn parse(args: &[&str]) -> Result<OpsSettings, clap::Error> {
        Cli::try_parse_from(std::iter::once("coxswain").chain(args.iter().copied()))
            .map(|cli| cli.ops)
    }

    #[test]
    fn defaults_match_the_documented_ones() {
        let parsed = parse(&[]).expect("no flags");
        let default = OpsSettings::default();
        assert_eq!(parsed.metrics_addr, default.metrics_addr);
        assert_eq!(parsed.log.format, LogFormat::Text);
        assert_eq!(parsed.log.level, "info");
        assert!(parsed.leader_election);
        assert_eq!(parsed.lease_name, "coxswain-controller");
        assert_eq!(parsed.lease_duration, Duration::from_secs(15));
        assert_eq!(parsed.lease_duration, default.lease_duration);
    }

    #[test]
    fn leader_election_can_be_turned_off() {
        let off = parse(&["--leader-election=false"]).expect("flag");
        assert!(!off.leader_election);
        let bare = parse(&["--leader-election"]).expect("flag");
        assert!(bare.leader_election);
    }

    #[test]
    fn flags_are_read() {
        let s = parse(&[
            "--metrics-addr",
            "127.0.0.1:0",
            "--log-format",
            "json",
            "--log-level",
            "coxswain_k8s=debug,warn",
            "--lease-name",
            "mine",
            "--lease-namespace",
            "ops",
            "--lease-duration",
            "1m",
            "--identity",
            "replica-a",
        ])
        .expect("valid flags");
        assert_eq!(s.metrics_addr.port(), 0);
        assert_eq!(s.log.format, LogFormat::Json);
        assert_eq!(s.lease_duration, Duration::from_secs(60));
        assert_eq!(s.identity(), "replica-a");
        assert_eq!(s.lease_namespace("default"), "ops");
    }

    #[test]
    fn bad_values_say_what_is_wrong() {
        let err = parse(&["--lease-duration", "1500ms"]).expect_err("fraction");
        assert!(err.to_string().contains("whole seconds; write 3s"), "{err}");
        let err = parse(&["--lease-duration", "1s"]).expect_err("too short");
        assert!(err.to_string().contains("at least 3s"), "{err}");
        let err = parse(&["--lease-duration", "soon"]).expect_err("not a duration");
        assert!(err.to_string().contains("--lease-duration"), "{err}");
        let err = parse(&["--log-level", "info,[oops"]).expect_err("bad filter");
        assert!(err.to_string().contains("--log-level"), "{err}");
        let err = parse(&["--metrics-addr", "localhost"]).expect_err("no port");
        assert!(err.to_string().contains("--metrics-addr"), "{err}");
    }

    #[test]
    fn the_default_identity_tells_processes_apart() {
        let s = OpsSettings::default();
        let identity = s.identity();
        assert!(
            identity.ends_with(&format!("-{}", std::process::id())),
            "{identity}"
        );
    }
}
