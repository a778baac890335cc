//! `coxswain webhook`: admission without the reconcilers, for clusters that
//! run the webhook apart from the controller (its own Deployment, or next
//! to a controller started with admission off).

use coxswain_kube::ops::{self, LogSettings};

use super::{AdmissionError, AdmissionSettings, RecordsDatabase};

/// Everything `coxswain webhook` is told.
#[derive(clap::Args, Debug, Clone)]
pub struct WebhookSettings {
    /// Check Flows, Runs and Approvals in this namespace only (default: all).
    #[arg(long, env = "COXSWAIN_NAMESPACE", value_name = "NS")]
    pub namespace: Option<String>,
    /// How logs are written.
    #[command(flatten)]
    pub log: LogSettings,
    /// Where and how admission is served.
    #[command(flatten)]
    pub admission: AdmissionSettings,
    /// The controller's records database (only whether one is set matters
    /// here).
    #[command(flatten)]
    pub records: RecordsDatabase,
}

/// Serves admission until SIGTERM or SIGINT.
pub async fn run_alone(settings: WebhookSettings) -> Result<(), AdmissionError> {
    let setting = |e: ops::OpsError| AdmissionError::Setting(e.to_string());
    ops::init_tracing(&settings.log).map_err(setting)?;
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
    let records = settings.records.named().is_some();
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
