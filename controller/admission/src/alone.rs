//! `coxswain webhook`: admission without the reconcilers, for clusters that
//! run the webhook apart from the controller (its own Deployment, or next
//! to a controller started with admission off).

use coxswain_kube::ops::{self, LogFormat, OpsSettings};

use super::{AdmissionError, AdmissionSettings};

/// Everything `coxswain webhook` is told.
#[derive(clap::Args, Debug, Clone)]
pub struct WebhookSettings {
    /// Check Flows, Runs and Approvals in this namespace only (default: all).
    #[arg(long, env = "COXSWAIN_NAMESPACE", value_name = "NS")]
    pub namespace: Option<String>,
    /// How log lines are written on stderr.
    #[arg(long, env = "COXSWAIN_LOG_FORMAT", value_enum, default_value_t = LogFormat::Text)]
    pub log_format: LogFormat,
    /// Which logs are written, as a tracing filter.
    #[arg(
        long,
        env = "COXSWAIN_LOG_LEVEL",
        value_name = "FILTER",
        default_value = "info"
    )]
    pub log_level: String,
    /// Where and how admission is served.
    #[command(flatten)]
    pub admission: AdmissionSettings,
    /// The controller's records database (only whether one is set matters
    /// here: without one, flows that save or look up are refused).
    #[arg(
        long = "records-database",
        env = "COXSWAIN_RECORDS_DATABASE",
        value_name = "URL",
        hide_env_values = true
    )]
    pub records_database: Option<String>,
}

/// Serves admission until SIGTERM or SIGINT.
pub async fn run_alone(settings: WebhookSettings) -> Result<(), AdmissionError> {
    let ops_settings = OpsSettings {
        log_format: settings.log_format,
        log_level: settings.log_level.clone(),
        ..OpsSettings::default()
    };
    let setting = |e: ops::OpsError| AdmissionError::Setting(e.to_string());
    ops::init_tracing(&ops_settings).map_err(setting)?;
    if !settings.admission.enabled() {
        return Err(AdmissionError::Setting(
            "coxswain webhook needs --webhook-url (outside a cluster) or --webhook-service (in one)"
                .into(),
        ));
    }
    let stop = ops::shutdown_signal().map_err(setting)?;
    let client = kube::Client::try_default().await.map_err(|e| {
        AdmissionError::kube("connecting to the cluster (KUBECONFIG or in-cluster)", e)
    })?;
    let records = settings
        .records_database
        .as_deref()
        .is_some_and(|d| !d.trim().is_empty());
    let admission = super::start(
        client,
        &settings.admission,
        settings.namespace.as_deref(),
        records,
    )
    .await?;
    let signal = stop.await;
    tracing::info!(%signal, "stopping the webhook");
    admission.stop();
    Ok(())
}
