//! How script Jobs are made: the image, the executable the pods borrow from
//! it, the user they run as, the largest result they may hand back, and how
//! long finished Jobs stay.

use std::path::PathBuf;

/// Where the `coxswain` executable lives in the controller's image, for a
/// controller running in the cluster.
pub const IN_IMAGE_EXECUTABLE: &str = "/usr/local/bin/coxswain";

/// The user step pods run as unless told otherwise: not root, and the
/// "nonroot" user of distroless images.
pub const DEFAULT_RUN_AS_USER: i64 = 65532;

/// The largest script stdout a Job may hand back by default. Bigger than a
/// record's 256 KiB cap on purpose: the controller moves large values out
/// of the Run's status into ConfigMaps (`coxswain run` keeps
/// `api::MAX_VALUE_BYTES`). A result this big travels through the pod's
/// log, which holds the output and the raw text, so the kubelet's
/// `containerLogMaxSize` (10 MiB by default) must hold about twice the cap;
/// a log rotated or cut under the result is detected and fails the attempt.
pub const DEFAULT_MAX_OUTPUT: usize = 4 << 20;

/// The image used when `COXSWAIN_IMAGE` is not set: the controller's own,
/// by the name its release is published under.
const DEFAULT_IMAGE: &str = concat!("coxswain:", env!("CARGO_PKG_VERSION"));

/// How script Jobs are made.
#[derive(clap::Args, Debug, Clone)]
pub struct JobSettings {
    /// Image of the init container that brings `coxswain step-exec` into a
    /// step's pod, and of steps that name no `image`: the controller's own.
    #[arg(long = "job-image", env = "COXSWAIN_IMAGE", default_value = DEFAULT_IMAGE)]
    pub image: String,
    /// Path of the `coxswain` executable in that image, which the init
    /// container copies into the pod. Default: this process's own executable
    /// when it runs outside a cluster (`KUBERNETES_SERVICE_HOST` unset, as on
    /// a development cluster whose node uses the host's files for images),
    /// else /usr/local/bin/coxswain.
    #[arg(
        long = "job-executable",
        env = "COXSWAIN_JOB_EXECUTABLE",
        value_name = "PATH"
    )]
    pub executable: Option<PathBuf>,
    /// The user id step pods run as (never root).
    #[arg(
        long = "job-run-as-user",
        env = "COXSWAIN_JOB_RUN_AS_USER",
        default_value_t = DEFAULT_RUN_AS_USER,
        value_parser = clap::value_parser!(i64).range(1..)
    )]
    pub run_as_user: i64,
    /// The most bytes a script may print on stdout; more fails the attempt.
    #[arg(
        long = "job-max-output",
        env = "COXSWAIN_JOB_MAX_OUTPUT",
        default_value_t = DEFAULT_MAX_OUTPUT,
        value_name = "BYTES"
    )]
    pub max_output: usize,
    /// Seconds a finished Job (and its pod and log) is kept, once its
    /// result is in the Run's status, before Kubernetes deletes it; `never`
    /// keeps it until its Run is deleted. The status keeps the last lines
    /// of each attempt's stderr either way.
    #[arg(
        long = "job-ttl-after-finished",
        env = "COXSWAIN_JOB_TTL_AFTER_FINISHED",
        value_name = "SECONDS|never",
        default_value = DEFAULT_TTL_AFTER_FINISHED,
        value_parser = parse_ttl
    )]
    pub ttl_after_finished: Ttl,
    /// Runs' workspaces: their volumes and git Jobs.
    #[command(flatten)]
    pub workspace: WorkspaceSettings,
}

/// How a run's workspace is made on a cluster.
#[derive(clap::Args, Debug, Clone)]
pub struct WorkspaceSettings {
    /// Image of the Jobs that check out and push a workspace's repos: it
    /// must have `git`. Default: the `--job-image`.
    #[arg(
        id = "workspace-image",
        long = "workspace-image",
        env = "COXSWAIN_WORKSPACE_IMAGE"
    )]
    pub image: Option<String>,
    /// Size of a run's volume when its flow gives none (a Kubernetes
    /// quantity such as `1Gi`).
    #[arg(
        id = "workspace-size", long = "workspace-size",
        env = "COXSWAIN_WORKSPACE_SIZE",
        default_value = DEFAULT_WORKSPACE_SIZE,
        value_name = "QUANTITY"
    )]
    pub size: String,
    /// The volumes' access mode: `ReadWriteOnce` places every pod of a run
    /// on the node that holds its volume; `ReadWriteMany` (a class that
    /// offers it) places them anywhere.
    #[arg(
        id = "workspace-access-mode",
        long = "workspace-access-mode",
        env = "COXSWAIN_WORKSPACE_ACCESS_MODE",
        default_value = "ReadWriteOnce",
        value_enum
    )]
    pub access_mode: AccessMode,
    /// Seconds a run's volume may take to bind and its checkout pod to
    /// start; past them the run fails with the reason Kubernetes gives
    /// (no such storage class, no volume, a volume attached elsewhere).
    #[arg(
        id = "workspace-bind-timeout", long = "workspace-bind-timeout",
        env = "COXSWAIN_WORKSPACE_BIND_TIMEOUT",
        default_value_t = DEFAULT_BIND_TIMEOUT_SECONDS,
        value_name = "SECONDS"
    )]
    pub bind_timeout_seconds: u64,
}

impl Default for WorkspaceSettings {
    fn default() -> Self {
        WorkspaceSettings {
            image: None,
            size: DEFAULT_WORKSPACE_SIZE.to_string(),
            access_mode: AccessMode::ReadWriteOnce,
            bind_timeout_seconds: DEFAULT_BIND_TIMEOUT_SECONDS,
        }
    }
}

/// A run's volume when its flow names no size.
pub const DEFAULT_WORKSPACE_SIZE: &str = "1Gi";

/// How long a run's volume may take to bind by default.
pub const DEFAULT_BIND_TIMEOUT_SECONDS: u64 = 120;

/// A volume's access mode, as Kubernetes spells it.
#[derive(clap::ValueEnum, Debug, Clone, Copy, PartialEq, Eq)]
pub enum AccessMode {
    /// One node mounts it: the run's pods are placed there.
    #[value(name = "ReadWriteOnce")]
    ReadWriteOnce,
    /// Any node mounts it.
    #[value(name = "ReadWriteMany")]
    ReadWriteMany,
}

impl AccessMode {
    /// As the claim's `accessModes` spells it.
    pub fn as_str(self) -> &'static str {
        match self {
            AccessMode::ReadWriteOnce => "ReadWriteOnce",
            AccessMode::ReadWriteMany => "ReadWriteMany",
        }
    }
}

impl Default for JobSettings {
    fn default() -> Self {
        JobSettings {
            image: DEFAULT_IMAGE.to_string(),
            executable: None,
            run_as_user: DEFAULT_RUN_AS_USER,
            max_output: DEFAULT_MAX_OUTPUT,
            ttl_after_finished: parse_ttl(DEFAULT_TTL_AFTER_FINISHED).unwrap_or(Ttl(None)),
            workspace: WorkspaceSettings::default(),
        }
    }
}

/// How long a finished Job stays by default: a day, for `kubectl logs`.
pub const DEFAULT_TTL_AFTER_FINISHED: &str = "86400";

/// How long a finished Job stays once its result is recorded: seconds, or
/// `None` for as long as its Run.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Ttl(pub Option<i32>);

/// A TTL in seconds (0 or more), or `never`.
fn parse_ttl(text: &str) -> Result<Ttl, String> {
    if text == "never" {
        return Ok(Ttl(None));
    }
    match text.parse::<i32>() {
        Ok(seconds) if seconds >= 0 => Ok(Ttl(Some(seconds))),
        _ => Err(format!(
            "expected a number of seconds (0 or more) or `never`, not `{text}`"
        )),
    }
}

impl JobSettings {
    /// Whether a run's pods go to its volume's node (a ReadWriteOnce volume).
    pub fn pins_pods(&self) -> bool {
        self.workspace.access_mode == AccessMode::ReadWriteOnce
    }

    /// The executable the init container copies: as set, else this
    /// process's own outside a cluster, else [`IN_IMAGE_EXECUTABLE`].
    pub fn executable(&self) -> PathBuf {
        if let Some(path) = &self.executable {
            return path.clone();
        }
        if std::env::var_os("KUBERNETES_SERVICE_HOST").is_none()
            && let Ok(own) = std::env::current_exe()
        {
            return own;
        }
        PathBuf::from(IN_IMAGE_EXECUTABLE)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use clap::Parser;

    #[derive(Parser)]
    struct Cli {
        #[command(flatten)]
        jobs: JobSettings,
    }

    #[test]
    fn flags_read_as_documented() {
        let cli = Cli::try_parse_from([
            "x",
            "--job-image",
            "registry.example/coxswain:1",
            "--job-executable",
            "/opt/coxswain",
            "--job-max-output",
            "1024",
            "--job-ttl-after-finished",
            "600",
        ])
        .expect("valid flags");
        assert_eq!(cli.jobs.image, "registry.example/coxswain:1");
        assert_eq!(cli.jobs.executable(), PathBuf::from("/opt/coxswain"));
        assert_eq!(cli.jobs.max_output, 1024);
        assert_eq!(cli.jobs.ttl_after_finished, Ttl(Some(600)));
        assert_eq!(cli.jobs.run_as_user, DEFAULT_RUN_AS_USER);
    }

    #[test]
    fn finished_jobs_stay_a_day_unless_told() {
        let cli = Cli::try_parse_from(["x"]).expect("defaults");
        assert_eq!(cli.jobs.ttl_after_finished, Ttl(Some(86_400)));
        assert_eq!(JobSettings::default().ttl_after_finished, Ttl(Some(86_400)));
        let never = Cli::try_parse_from(["x", "--job-ttl-after-finished", "never"])
            .expect("never is a value");
        assert_eq!(never.jobs.ttl_after_finished, Ttl(None));
        let err = Cli::try_parse_from(["x", "--job-ttl-after-finished=-5"])
            .err()
            .expect("a negative time is refused")
            .to_string();
        assert!(err.contains("or `never`"), "{err}");
    }

    #[test]
    fn root_is_refused() {
        let err = Cli::try_parse_from(["x", "--job-run-as-user", "0"])
            .err()
            .expect("root refused")
            .to_string();
        assert!(err.contains("--job-run-as-user"), "{err}");
    }
}
