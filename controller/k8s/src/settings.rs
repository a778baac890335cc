//! The controller's settings: flags, each with an environment variable, so
//! a Deployment sets them with `env:` and a developer with flags. Each part
//! of the controller owns its group of settings.

use std::time::Duration;

/// Which Events the controller sends about a Run (`kubectl describe run`).
#[derive(clap::ValueEnum, Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum EventMode {
    /// One per status write, naming every step transition in it.
    #[default]
    PerWrite,
    /// One per step transition (StepStarted, StepCompleted, …).
    PerTransition,
    /// Only what a person may need to act on, one per status write: the
    /// run's end, a step failing or tried again, a step waiting for a
    /// person.
    Notable,
}

/// Everything `coxswain controller` is told.
#[derive(clap::Args, Debug, Clone)]
pub struct Settings {
    /// Watch Runs, Flows and their children in this namespace only (default: all).
    #[arg(long, env = "COXSWAIN_NAMESPACE", value_name = "NS")]
    pub namespace: Option<String>,
    /// Most agent, http and message attempts running at once in the controller.
    #[arg(long, env = "COXSWAIN_MAX_IN_CONTROLLER", default_value_t = 64)]
    pub max_in_controller: usize,
    /// Most Runs reconciled at once.
    #[arg(long, env = "COXSWAIN_RECONCILE_CONCURRENCY", default_value_t = 64)]
    pub reconcile_concurrency: u16,
    /// Address ranges (CIDR) http, message and agent steps may reach even
    /// though the controller's defaults deny them (loopback, private and
    /// link-local ranges), e.g. an in-cluster service or the model server.
    /// Repeat it for several.
    #[arg(
        long = "allow-net",
        env = "COXSWAIN_ALLOW_NET",
        value_name = "CIDR",
        value_delimiter = ','
    )]
    pub allow_net: Vec<String>,
    /// Which Events a Run gets. Each Event is an API write: per transition,
    /// a run of ten steps costs the API server about three times the
    /// writes of its own status; `notable` about one a run.
    #[arg(long, env = "COXSWAIN_EVENTS", value_enum, default_value_t = EventMode::PerWrite)]
    pub events: EventMode,
    /// Script steps as Jobs.
    #[command(flatten)]
    pub jobs: crate::jobs::JobSettings,
    /// Moving large values out of the Run.
    #[command(flatten)]
    pub offload: crate::offload::OffloadSettings,
    /// Metrics, health, logs and leader election.
    #[command(flatten)]
    pub ops: crate::ops::OpsSettings,
    /// Agent steps: the model server.
    #[command(flatten)]
    pub agent: AgentSettings,
    /// The admission webhook, served by every replica.
    #[command(flatten)]
    pub admission: crate::admission::AdmissionSettings,
    /// Conversation commands: flows started from chat rooms.
    #[command(flatten)]
    pub chat: ChatSettings,
    /// Stored records and the run archive: the PostgreSQL database.
    #[command(flatten)]
    pub records: crate::records::RecordsSettings,
    /// The flow snapshots runs share, removed once no Run names them.
    #[command(flatten)]
    pub snapshots: crate::snapshots::SnapshotSettings,
}

/// Conversation commands.
#[derive(clap::Args, Debug, Clone)]
pub struct ChatSettings {
    /// Follow the chat rooms that Flows' `command`s name and start their
    /// Runs (on the leader). `false` leaves chats alone.
    #[arg(
        long,
        env = "COXSWAIN_CHAT_COMMANDS",
        default_value_t = true,
        action = clap::ArgAction::Set,
        value_name = "BOOL"
    )]
    pub chat_commands: bool,
    /// Serve Slack's Events API at `POST /slack/events/{namespace}/{connection}`
    /// on this address (every replica): the Slack app's Request URL, behind
    /// an HTTPS ingress. Unset: Slack commands are not heard.
    #[arg(long, env = "COXSWAIN_SLACK_EVENTS_LISTEN", value_name = "ADDR")]
    pub slack_events_listen: Option<std::net::SocketAddr>,
}

/// Where agent steps go; each flag wins over its `COXSWAIN_AGENT_*` variable,
/// read as `coxswain run` reads them.
#[derive(clap::Args, Debug, Clone, Default)]
pub struct AgentSettings {
    /// The OpenAI-compatible endpoint for agent steps.
    #[arg(long, value_name = "URL")]
    pub agent_url: Option<String>,
    /// The model id that `model: default` stands for.
    #[arg(long, value_name = "ID")]
    pub agent_model: Option<String>,
}

/// How long a failed reconcile waits before it is tried again.
pub const ERROR_REQUEUE: Duration = Duration::from_secs(5);
