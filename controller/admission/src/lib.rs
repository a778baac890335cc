//! Admission: the checks the API server makes us do before it stores a
//! Flow, a Run or an Approval, served over HTTPS by every replica of the
//! controller (not only the leader), or by `coxswain webhook` alone.
//!
//! - Flow: the validator `coxswain lint` runs, and the Secret rule (the
//!   applier may read every Secret the flow binds) — [`flows`].
//! - Run: its Flow exists and is valid, its input fits, its spec never
//!   changes but `cancel`, its creator is stamped — [`runs`].
//! - Approval: created by the controller only; answered once, by an
//!   approver who did not create the run, with an answer that fits; who and
//!   when stamped from the request — [`approvals`].
//!
//! Each kind implements one trait, [`Admit`] ([`admit`]): `review` (the
//! validating check) and `stamp` (the mutating stamps), refusing with a
//! typed [`Refusal`] whose text is what the user reads. Admission judges
//! requests and never reconciles: it uses nothing of the reconcilers
//! (`run`, `jobs`, `offload`), only `names` and `ops`.
//!
//! TLS is self-managed by default ([`tls`]): a CA and a certificate kept in
//! a Secret shared by the replicas, renewed before they end, the caBundle
//! written into our webhook configurations ([`register`]). With
//! `--webhook-cert-dir` the certificate comes from files instead (such as a
//! cert-manager Secret mounted in the pod). With `--webhook-client-ca` only
//! callers with a client certificate from that CA (the API server) get an
//! answer ([`serving`]).
//!
//! Writes only the controller makes — the status of all three kinds, the
//! `coxswain.dev/` labels and annotations of Runs and Approvals — are
//! refused from anyone else ([`reserved`]), and so is a Run whose input
//! nests deeper than the controller can keep reading.

pub mod admit;
mod alone;
pub mod approvals;
mod error;
pub mod flows;
pub mod refusal;
pub mod register;
pub mod reserved;
pub mod review;
pub mod runs;
pub mod serving;
mod settings;
#[cfg(test)]
mod test_support;
pub mod tls;

use std::path::Path;
use std::sync::Arc;
use std::time::Duration;

use axum_server::Handle;
use axum_server::tls_rustls::RustlsConfig;
use k8s_openapi::api::authentication::v1::SelfSubjectReview;
use k8s_openapi::api::core::v1::Secret;
use kube::api::PostParams;
use kube::{Api, Client};

pub use admit::{Admit, Refusal};
pub use alone::{WebhookSettings, run_alone};
pub use error::AdmissionError;
pub use register::Endpoint;
pub use settings::{
    AdmissionSettings, DEFAULT_PORT, DEFAULT_SECRET, RecordsDatabase, WebhookUrl, parse_url,
};

/// The running webhook server; dropping it leaves it running until the
/// process ends, [`Admission::stop`] ends it.
pub struct Admission {
    handle: Handle<std::net::SocketAddr>,
    /// The address it listens on.
    pub addr: std::net::SocketAddr,
}

impl Admission {
    /// Stops serving; requests in flight get a few seconds to finish.
    pub fn stop(&self) {
        self.handle.graceful_shutdown(Some(Duration::from_secs(5)));
    }
}

/// Where the certificate comes from and what the webhook is called.
struct Plan {
    endpoint: Endpoint,
    names: Vec<String>,
    home: String,
}

fn plan(
    settings: &AdmissionSettings,
    namespace: Option<&str>,
    client: &Client,
) -> Result<Plan, AdmissionError> {
    let home = settings
        .webhook_namespace
        .clone()
        .or_else(|| namespace.map(String::from))
        .or_else(|| {
            std::env::var("POD_NAMESPACE")
                .ok()
                .filter(|n| !n.is_empty())
        })
        .unwrap_or_else(|| client.default_namespace().to_string());
    match (&settings.webhook_url, &settings.webhook_service) {
        (Some(url), _) => Ok(Plan {
            endpoint: Endpoint::Url(url.base.clone()),
            names: vec![url.host.clone()],
            home,
        }),
        (None, Some(service)) => Ok(Plan {
            endpoint: Endpoint::Service {
                namespace: home.clone(),
                name: service.clone(),
                port: settings.webhook_service_port,
            },
            names: vec![
                format!("{service}.{home}.svc"),
                service.clone(),
                format!("{service}.{home}"),
                format!("{service}.{home}.svc.cluster.local"),
            ],
            home,
        }),
        (None, None) => Err(AdmissionError::Setting(
            "admission needs --webhook-url or --webhook-service".into(),
        )),
    }
}

/// How many times a start-up question to the API server is asked before
/// its failure stops the process.
const WHOAMI_TRIES: u32 = 8;

/// The user this process authenticates as (a SelfSubjectReview). Asked
/// again, with growing pauses, when the API server failed or its answer was
/// lost (the review stores nothing, so asking twice is harmless); a refusal
/// (such as 403) is final.
pub async fn whoami(client: &Client) -> Result<String, AdmissionError> {
    let api: Api<SelfSubjectReview> = Api::all(client.clone());
    let mut pause = Duration::from_millis(100);
    let mut tries = 0;
    let review = loop {
        tries += 1;
        match api
            .create(&PostParams::default(), &SelfSubjectReview::default())
            .await
        {
            Ok(review) => break review,
            Err(e) if tries < WHOAMI_TRIES && transient(&e) => {
                tracing::warn!(error = %e, "asking the API server who this process is; asking again");
                tokio::time::sleep(pause).await;
                pause = (pause * 2).min(Duration::from_secs(5));
            }
            Err(e) => {
                return Err(AdmissionError::kube(
                    "asking the API server who this process is",
                    e,
                ));
            }
        }
    };
    review
        .status
        .and_then(|s| s.user_info)
        .and_then(|u| u.username)
        .ok_or_else(|| {
            AdmissionError::Setting(
                "the API server did not say who this process is; set --webhook-controller-user"
                    .into(),
            )
        })
}

/// Whether `error` may pass when asked again: the API server failed (5xx),
/// asked to wait (429), or could not be reached.
fn transient(error: &kube::Error) -> bool {
    match error {
        kube::Error::Api(status) => status.code >= 500 || status.code == 429,
        _ => true,
    }
}

/// The certificate served, the CA bundle registered, and the CA whose
/// client certificates are required (`--webhook-client-ca`).
#[derive(Clone, PartialEq, Eq)]
struct Material {
    cert: String,
    key: String,
    ca_bundle: String,
    client_ca: Option<String>,
}

impl Material {
    fn server_config(&self) -> Result<Arc<rustls::ServerConfig>, AdmissionError> {
        serving::server_config(&self.cert, &self.key, self.client_ca.as_deref())
    }
}

async fn material(
    client: &Client,
    settings: &AdmissionSettings,
    plan: &Plan,
) -> Result<Material, AdmissionError> {
    let client_ca = match &settings.webhook_client_ca {
        Some(path) => {
            Some(
                std::fs::read_to_string(path).map_err(|source| AdmissionError::CertFile {
                    path: path.clone(),
                    source,
                })?,
            )
        }
        None => None,
    };
    if let Some(dir) = &settings.webhook_cert_dir {
        let read = |name: &str| {
            let path = dir.join(name);
            std::fs::read_to_string(&path)
                .map_err(|source| AdmissionError::CertFile { path, source })
        };
        return Ok(Material {
            cert: read("tls.crt")?,
            key: read("tls.key")?,
            ca_bundle: if Path::new(&dir.join("ca.crt")).exists() {
                read("ca.crt")?
            } else {
                String::new()
            },
            client_ca,
        });
    }
    let secrets: Api<Secret> = Api::namespaced(client.clone(), &plan.home);
    let stored = tls::ensure(&secrets, &settings.webhook_secret, &plan.home, &plan.names).await?;
    Ok(Material {
        cert: stored.cert,
        key: stored.key,
        ca_bundle: stored.ca_bundle,
        client_ca,
    })
}

/// Starts serving admission and registers it; returns once the API server
/// can call it. `namespace` is the controller's `--namespace`: the webhook
/// then checks that namespace only.
pub async fn start(
    client: Client,
    settings: &AdmissionSettings,
    namespace: Option<&str>,
    records: bool,
) -> Result<Admission, AdmissionError> {
    let plan = plan(settings, namespace, &client)?;
    let controller_user = match &settings.webhook_controller_user {
        Some(user) => user.clone(),
        None => whoami(&client).await?,
    };
    let first = material(&client, settings, &plan).await?;
    let config = RustlsConfig::from_config(first.server_config()?);
    let addr = settings.listen();
    let listener = std::net::TcpListener::bind(addr)
        .and_then(|l| l.set_nonblocking(true).map(|()| l))
        .map_err(|source| AdmissionError::Listen { addr, source })?;
    let addr = listener.local_addr().unwrap_or(addr);
    let handle = Handle::new();
    let server = axum_server::from_tcp_rustls(listener, config.clone())
        .map_err(|source| AdmissionError::Listen { addr, source })?
        .handle(handle.clone());
    let app = review::router(Arc::new(admit::Reviewer {
        client: client.clone(),
        controller_user: controller_user.clone(),
        records,
    }));
    tokio::spawn(async move {
        if let Err(e) = server.serve(app.into_make_service()).await {
            tracing::error!(error = %e, "the admission server stopped");
        }
    });
    tracing::info!(
        %addr,
        client_certificates = if first.client_ca.is_some() { "required" } else { "not asked" },
        "serving admission"
    );
    let config_name = settings.config_name(namespace);
    if settings.webhook_register {
        register::apply(
            &client,
            &config_name,
            &plan.endpoint,
            &first.ca_bundle,
            namespace,
            &controller_user,
        )
        .await?;
        tracing::info!(configuration = %config_name, "webhook configurations registered");
    }
    let keeper = Keeper {
        client,
        settings: settings.clone(),
        plan,
        namespace: namespace.map(String::from),
        config_name,
        config,
        served: first,
        controller_user,
    };
    tokio::spawn(keeper.run());
    Ok(Admission { handle, addr })
}

/// Keeps the served certificate and the registered caBundle current.
struct Keeper {
    client: Client,
    settings: AdmissionSettings,
    plan: Plan,
    namespace: Option<String>,
    config_name: String,
    config: RustlsConfig,
    served: Material,
    controller_user: String,
}

impl Keeper {
    async fn run(mut self) {
        loop {
            // A certificate renewed by another replica, by cert-manager or
            // near its end, and the configurations' caBundle.
            tokio::time::sleep(self.settings.cert_check()).await;
            if let Err(e) = self.refresh().await {
                tracing::warn!(error = %e, "keeping the webhook certificate current");
            }
        }
    }

    async fn refresh(&mut self) -> Result<(), AdmissionError> {
        let now = material(&self.client, &self.settings, &self.plan).await?;
        if (&now.cert, &now.key, &now.client_ca)
            != (&self.served.cert, &self.served.key, &self.served.client_ca)
        {
            self.config.reload_from_config(now.server_config()?);
            tracing::info!("webhook certificate reloaded");
        }
        if self.settings.webhook_register {
            register::apply(
                &self.client,
                &self.config_name,
                &self.plan.endpoint,
                &now.ca_bundle,
                self.namespace.as_deref(),
                &self.controller_user,
            )
            .await?;
        }
        self.served = now;
        Ok(())
    }
}
