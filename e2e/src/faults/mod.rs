//! A fault-injecting HTTPS proxy between a client (the controller) and the
//! test cluster's API server: it answers some requests with 409, 429
//! (`Retry-After: 1`), 500 and 503 `Status` errors, delays others, cuts
//! watch streams, and loses the answers of some writes after the API server
//! applied them (a 500, a 503 or a closed connection in their place), with
//! a seeded generator (the seed is printed), and counts
//! every request so a test can prove the client backs off instead of
//! hammering. A real API server misbehaves like this under load, behind a
//! flaky load balancer, or while it restarts.
//!
//! The proxy listens on 127.0.0.1 with a certificate of its own and writes
//! a kubeconfig pointing at itself with the cluster's credentials (the
//! client's bearer token is passed through to the API server).

mod forward;
mod plan;
mod tally;

use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use base64::Engine;
use base64::engine::general_purpose::STANDARD;
use hyper::service::service_fn;
use hyper_util::rt::{TokioExecutor, TokioIo};
use kube::config::Kubeconfig;
use rustls::pki_types::pem::PemObject;
use rustls::pki_types::{CertificateDer, PrivateKeyDer, PrivatePkcs8KeyDer};
use tokio::sync::watch;

pub use plan::{Decision, Dice, Fault, FaultPlan, Loss, Request};
pub use tally::{Kind, Seen, Tally, classify};

use crate::{Error, Result, kubeconfig, workspace_root};

/// A running fault proxy; it stops (and closes every connection through
/// it) when dropped.
pub struct FaultProxy {
    forwarder: Arc<forward::Forwarder>,
    addr: SocketAddr,
    kubeconfig: PathBuf,
    stop: watch::Sender<bool>,
}

impl FaultProxy {
    /// Starts a proxy to the test cluster (started on first use) that
    /// follows `plan`, and prints the plan's seed on stderr.
    pub async fn start(plan: FaultPlan) -> Result<Self> {
        crate::cluster::install_crypto_provider();
        let admin = tokio::task::spawn_blocking(kubeconfig)
            .await
            .map_err(|e| Error::Start(e.to_string()))??;
        let config = Kubeconfig::read_from(&admin)?;
        let (upstream, upstream_ca) = upstream(&config)?;
        let client = upstream_client(&upstream_ca)?;
        let (ca_pem, tls) = own_tls()?;
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await?;
        let addr = listener.local_addr()?;
        eprintln!(
            "fault proxy on {addr} → {upstream}: seed {} (E2E_FAULT_SEED={} repeats its draws)",
            plan.seed, plan.seed
        );
        let forwarder = Arc::new(forward::Forwarder {
            client,
            upstream: upstream
                .parse()
                .map_err(|e| Error::Start(format!("the API server URL {upstream}: {e}")))?,
            dice: Dice::new(plan),
            tally: Tally::default(),
        });
        let kubeconfig = write_kubeconfig(config, addr, &ca_pem)?;
        let (stop, stopped) = watch::channel(false);
        tokio::spawn(accept(listener, tls, forwarder.clone(), stopped));
        Ok(Self {
            forwarder,
            addr,
            kubeconfig,
            stop,
        })
    }

    /// A kubeconfig that points at the proxy (give it to the controller).
    pub fn kubeconfig(&self) -> &Path {
        &self.kubeconfig
    }

    /// Where the proxy listens.
    pub fn addr(&self) -> SocketAddr {
        self.addr
    }

    /// The plan it follows (with its seed).
    pub fn plan(&self) -> &FaultPlan {
        self.forwarder.dice.plan()
    }

    /// Every request counted so far.
    pub fn tally(&self) -> &Tally {
        &self.forwarder.tally
    }
}

impl Drop for FaultProxy {
    fn drop(&mut self) {
        let _ = self.stop.send(true);
        let _ = std::fs::remove_file(&self.kubeconfig);
    }
}

/// The API server's URL and CA (PEM) from the admin kubeconfig.
fn upstream(config: &Kubeconfig) -> Result<(String, Vec<u8>)> {
    let cluster = config
        .clusters
        .first()
        .and_then(|c| c.cluster.as_ref())
        .ok_or_else(|| Error::Start("the cluster's kubeconfig names no cluster".into()))?;
    let server = cluster
        .server
        .clone()
        .ok_or_else(|| Error::Start("the cluster's kubeconfig has no server".into()))?;
    let ca = match (
        &cluster.certificate_authority_data,
        &cluster.certificate_authority,
    ) {
        (Some(data), _) => STANDARD
            .decode(data.trim())
            .map_err(|e| Error::Start(format!("certificate-authority-data: {e}")))?,
        (None, Some(path)) => std::fs::read(path)?,
        (None, None) => {
            return Err(Error::Start(
                "the cluster's kubeconfig has no certificate authority".into(),
            ));
        }
    };
    Ok((server, ca))
}

type Upstream = hyper_util::client::legacy::Client<
    hyper_rustls::HttpsConnector<hyper_util::client::legacy::connect::HttpConnector>,
    forward::ProxyBody,
>;

/// An HTTPS client that trusts only the API server's CA.
fn upstream_client(ca_pem: &[u8]) -> Result<Upstream> {
    let mut roots = rustls::RootCertStore::empty();
    for cert in CertificateDer::pem_slice_iter(ca_pem) {
        let cert = cert.map_err(|e| Error::Start(format!("the API server's CA: {e}")))?;
        roots
            .add(cert)
            .map_err(|e| Error::Start(format!("the API server's CA: {e}")))?;
    }
    let tls = rustls::ClientConfig::builder()
        .with_root_certificates(roots)
        .with_no_client_auth();
    let connector = hyper_rustls::HttpsConnectorBuilder::new()
        .with_tls_config(tls)
        .https_only()
        .enable_http1()
        .build();
    Ok(hyper_util::client::legacy::Client::builder(TokioExecutor::new()).build(connector))
}

/// A CA (PEM, for the kubeconfig) and the server config of a leaf it signed
/// for 127.0.0.1.
fn own_tls() -> Result<(String, tokio_rustls::TlsAcceptor)> {
    let made = crate::tls::loopback_cert("coxswain e2e fault proxy CA")
        .map_err(|e| Error::Start(format!("the proxy's certificate: {e}")))?;
    let key = PrivateKeyDer::Pkcs8(PrivatePkcs8KeyDer::from(made.key_der));
    let mut config = rustls::ServerConfig::builder()
        .with_no_client_auth()
        .with_single_cert(vec![CertificateDer::from(made.cert_der)], key)
        .map_err(|e| Error::Start(format!("the proxy's TLS config: {e}")))?;
    config.alpn_protocols = vec![b"http/1.1".to_vec()];
    Ok((
        made.ca_pem,
        tokio_rustls::TlsAcceptor::from(Arc::new(config)),
    ))
}

/// The admin kubeconfig with every cluster pointed at the proxy.
fn write_kubeconfig(mut config: Kubeconfig, addr: SocketAddr, ca_pem: &str) -> Result<PathBuf> {
    for named in &mut config.clusters {
        if let Some(cluster) = named.cluster.as_mut() {
            cluster.server = Some(format!("https://{addr}"));
            cluster.certificate_authority = None;
            cluster.certificate_authority_data = Some(STANDARD.encode(ca_pem));
            cluster.tls_server_name = None;
        }
    }
    let dir = workspace_root().join("target/e2e/fault-proxy");
    std::fs::create_dir_all(&dir)?;
    let path = dir.join(format!("{}-{}.kubeconfig", std::process::id(), addr.port()));
    let text = serde_json::to_string_pretty(&config)
        .map_err(|e| Error::Start(format!("writing the proxy's kubeconfig: {e}")))?;
    std::fs::write(&path, text)?;
    Ok(path)
}

/// Accepts connections until told to stop; each connection is served
/// until it closes or the proxy stops.
async fn accept(
    listener: tokio::net::TcpListener,
    tls: tokio_rustls::TlsAcceptor,
    forwarder: Arc<forward::Forwarder>,
    mut stopped: watch::Receiver<bool>,
) {
    loop {
        let (stream, _) = tokio::select! {
            accepted = listener.accept() => match accepted {
                Ok(s) => s,
                Err(_) => continue,
            },
            _ = stopped.wait_for(|s| *s) => return,
        };
        let (tls, forwarder, mut stopped) = (tls.clone(), forwarder.clone(), stopped.clone());
        tokio::spawn(async move {
            let Ok(stream) = tls.accept(stream).await else {
                return;
            };
            let service = service_fn(move |req| forwarder.clone().serve(req));
            let connection = hyper::server::conn::http1::Builder::new()
                .serve_connection(TokioIo::new(stream), service);
            tokio::select! {
                _ = connection => {}
                _ = stopped.wait_for(|s| *s) => {}
            }
        });
    }
}
