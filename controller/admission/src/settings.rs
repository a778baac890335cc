//! Flags of admission: where the API server reaches the webhook, where it
//! listens, and where its certificate comes from. Each flag has a
//! `COXSWAIN_WEBHOOK_*` variable for Deployments. Admission is off unless
//! `--webhook-url` or `--webhook-service` says how the API server calls it.

use std::net::{IpAddr, Ipv4Addr, SocketAddr};
use std::path::PathBuf;
use std::time::Duration;

/// The default name of the Secret holding the self-managed CA and certificate.
pub const DEFAULT_SECRET: &str = "coxswain-webhook-tls";

/// The port served in a cluster when neither `--webhook-listen` nor a URL
/// with a port says otherwise.
pub const DEFAULT_PORT: u16 = 9443;

/// How the admission webhook is served and registered.
#[derive(clap::Args, Debug, Clone, Default)]
pub struct AdmissionSettings {
    /// The HTTPS address the API server calls, such as `https://127.0.0.1:9443`
    /// (outside a cluster); the webhook listens on its port and its host is
    /// the certificate's name. `/validate` and `/mutate` are added to it.
    #[arg(long, env = "COXSWAIN_WEBHOOK_URL", value_name = "URL", value_parser = parse_url)]
    pub webhook_url: Option<WebhookUrl>,
    /// In a cluster: the Service in front of the replicas; the API server
    /// calls it and the certificate names its DNS names.
    #[arg(
        long,
        env = "COXSWAIN_WEBHOOK_SERVICE",
        value_name = "NAME",
        conflicts_with = "webhook_url"
    )]
    pub webhook_service: Option<String>,
    /// The Service's port the API server calls.
    #[arg(
        long,
        env = "COXSWAIN_WEBHOOK_SERVICE_PORT",
        value_name = "PORT",
        default_value_t = 443
    )]
    pub webhook_service_port: u16,
    /// The address the webhook listens on (default: the port of
    /// `--webhook-url` on 127.0.0.1 when its host is a loopback address,
    /// else on every address; 0.0.0.0:9443 behind a Service).
    #[arg(long, env = "COXSWAIN_WEBHOOK_LISTEN", value_name = "ADDR")]
    pub webhook_listen: Option<SocketAddr>,
    /// Namespace of the certificate's Secret and of the Service (default:
    /// `--namespace`, else the pod's or the kubeconfig's namespace).
    #[arg(long, env = "COXSWAIN_WEBHOOK_NAMESPACE", value_name = "NS")]
    pub webhook_namespace: Option<String>,
    /// The Secret holding the self-managed CA and serving certificate,
    /// shared by every replica.
    #[arg(
        long,
        env = "COXSWAIN_WEBHOOK_SECRET",
        value_name = "NAME",
        default_value = DEFAULT_SECRET
    )]
    pub webhook_secret: String,
    /// Serve `tls.crt` and `tls.key` from this directory instead (such as a
    /// cert-manager Certificate's Secret mounted there), re-read when they
    /// change (looked at every five minutes); no Secret is managed. Its `ca.crt`, when present, is the
    /// caBundle registered.
    #[arg(long, env = "COXSWAIN_WEBHOOK_CERT_DIR", value_name = "DIR")]
    pub webhook_cert_dir: Option<PathBuf>,
    /// A PEM file of the CA (or CAs) whose client certificates the webhook
    /// requires: a caller without one (anyone but the API server, once it
    /// is configured to present one) gets no answer. Re-read with the
    /// certificate. Default: no client certificate is asked for.
    #[arg(long, env = "COXSWAIN_WEBHOOK_CLIENT_CA", value_name = "FILE")]
    pub webhook_client_ca: Option<PathBuf>,
    /// Create and keep up to date the Validating- and
    /// MutatingWebhookConfiguration (`--webhook-register=false` when they
    /// are installed otherwise, such as by a chart with cert-manager).
    #[arg(
        long,
        env = "COXSWAIN_WEBHOOK_REGISTER",
        value_name = "BOOL",
        default_value_t = true,
        num_args = 0..=1,
        require_equals = true,
        default_missing_value = "true",
        action = clap::ArgAction::Set
    )]
    pub webhook_register: bool,
    /// Name of both webhook configurations (default: `coxswain`, or
    /// `coxswain-NS` when `--namespace` limits the controller to one).
    #[arg(long, env = "COXSWAIN_WEBHOOK_CONFIG_NAME", value_name = "NAME")]
    pub webhook_config_name: Option<String>,
    /// The user whose writes are the controller's (it alone creates
    /// Approvals); default: the user this process authenticates as.
    #[arg(long, env = "COXSWAIN_WEBHOOK_CONTROLLER_USER", value_name = "USER")]
    pub webhook_controller_user: Option<String>,
    /// How often the served certificate is compared with its source (the
    /// Secret, or `--webhook-cert-dir`) and the caBundle written again, such
    /// as `5m` (the default) or `30s`: a certificate renewed by another
    /// replica or by cert-manager is served within this long.
    #[arg(long, env = "COXSWAIN_WEBHOOK_CERT_CHECK", value_name = "DURATION", value_parser = parse_check)]
    pub webhook_cert_check: Option<Duration>,
}

/// The default of `--webhook-cert-check`.
pub const DEFAULT_CERT_CHECK: Duration = Duration::from_secs(300);

/// Reads `--webhook-cert-check` as flows write durations; at least a second.
fn parse_check(text: &str) -> Result<Duration, String> {
    let duration = coxswain_core::flow::parse_duration(text).map_err(|e| e.to_string())?;
    if duration < Duration::from_secs(1) {
        return Err("must be at least 1s".into());
    }
    Ok(duration)
}

impl AdmissionSettings {
    /// How often the certificate is looked at: `--webhook-cert-check`.
    pub fn cert_check(&self) -> Duration {
        self.webhook_cert_check.unwrap_or(DEFAULT_CERT_CHECK)
    }

    /// Whether admission is served at all.
    pub fn enabled(&self) -> bool {
        self.webhook_url.is_some() || self.webhook_service.is_some()
    }

    /// Where the webhook listens.
    pub fn listen(&self) -> SocketAddr {
        if let Some(addr) = self.webhook_listen {
            return addr;
        }
        let any = IpAddr::V4(Ipv4Addr::UNSPECIFIED);
        match &self.webhook_url {
            Some(url) => {
                let ip = match url.host.parse::<IpAddr>() {
                    Ok(ip) if ip.is_loopback() => ip,
                    _ if url.host == "localhost" => IpAddr::V4(Ipv4Addr::LOCALHOST),
                    _ => any,
                };
                SocketAddr::new(ip, url.port)
            }
            None => SocketAddr::new(any, DEFAULT_PORT),
        }
    }

    /// The name of both webhook configurations.
    pub fn config_name(&self, namespace: Option<&str>) -> String {
        match (&self.webhook_config_name, namespace) {
            (Some(name), _) => name.clone(),
            (None, Some(ns)) => format!("coxswain-{ns}"),
            (None, None) => "coxswain".to_string(),
        }
    }
}

/// An `https://HOST[:PORT][/PATH]` address of the webhook.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct WebhookUrl {
    /// The URL as given, without a trailing `/`.
    pub base: String,
    /// The host (an IP address or a DNS name), without brackets.
    pub host: String,
    /// The port (443 when not written).
    pub port: u16,
}

/// Reads `--webhook-url`: HTTPS only (the API server calls webhooks over
/// TLS), no query or fragment, no user info.
pub fn parse_url(text: &str) -> Result<WebhookUrl, String> {
    let rest = text.strip_prefix("https://").ok_or_else(|| {
        format!("`{text}` must start with https:// (the API server calls webhooks over TLS)")
    })?;
    if rest.contains(['?', '#', '@']) {
        return Err(format!(
            "`{text}` may not have a query, a fragment or user info"
        ));
    }
    let (authority, _path) = rest.split_once('/').unwrap_or((rest, ""));
    let (host, port) =
        split_host_port(authority).ok_or_else(|| format!("`{text}` has no valid host and port"))?;
    Ok(WebhookUrl {
        base: text.trim_end_matches('/').to_string(),
        host,
        port,
    })
}

fn split_host_port(authority: &str) -> Option<(String, u16)> {
    let (host, port) = if let Some(inner) = authority.strip_prefix('[') {
        let (host, after) = inner.split_once(']')?;
        (host, after.strip_prefix(':'))
    } else {
        match authority.rsplit_once(':') {
            Some((h, p)) => (h, Some(p)),
            None => (authority, None),
        }
    };
    if host.is_empty() {
        return None;
    }
    let port = match port {
        Some(p) => p.parse().ok().filter(|p| *p != 0)?,
        None => 443,
    };
    Some((host.to_string(), port))
}

/// The controller's records database, as `--records-database` names it:
/// the controller connects to it, admission only asks whether there is one
/// (without it, flows that save or look up are refused).
#[derive(clap::Args, Debug, Clone, Default)]
pub struct RecordsDatabase {
    /// The controller's PostgreSQL database for stored records and the run
    /// archive, as a URL (`postgres://user:password@host:5432/coxswain`).
    /// Without it, flows that `save` or `lookup` are refused (and the
    /// controller archives no Run).
    #[arg(
        long = "records-database",
        env = "COXSWAIN_RECORDS_DATABASE",
        value_name = "URL",
        hide_env_values = true
    )]
    pub url: Option<String>,
}

impl RecordsDatabase {
    /// The URL, when one is given and not blank.
    pub fn named(&self) -> Option<&str> {
        self.url.as_deref().filter(|d| !d.trim().is_empty())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_webhook_url_gives_host_port_and_listen_address() {
        let url = parse_url("https://127.0.0.1:9555/").expect("url");
        assert_eq!((url.host.as_str(), url.port), ("127.0.0.1", 9555));
        assert_eq!(url.base, "https://127.0.0.1:9555");
        let settings = AdmissionSettings {
            webhook_url: Some(url),
            ..Default::default()
        };
        assert_eq!(settings.listen().to_string(), "127.0.0.1:9555");
        let named = parse_url("https://hooks.example.com").expect("url");
        assert_eq!(
            (named.host.as_str(), named.port),
            ("hooks.example.com", 443)
        );
        let v6 = parse_url("https://[::1]:8443/x").expect("url");
        assert_eq!((v6.host.as_str(), v6.port), ("::1", 8443));
    }

    #[test]
    fn the_certificate_is_looked_at_every_five_minutes_unless_told() {
        assert_eq!(
            AdmissionSettings::default().cert_check(),
            DEFAULT_CERT_CHECK
        );
        assert_eq!(parse_check("30s"), Ok(Duration::from_secs(30)));
        assert!(parse_check("500ms").is_err());
        assert!(parse_check("soon").is_err());
    }

    #[test]
    fn a_webhook_url_that_is_not_https_or_has_no_port_is_refused() {
        for (text, why) in [
            ("http://127.0.0.1:9443", "must start with https://"),
            ("https://127.0.0.1:x", "no valid host and port"),
            ("https://:9443", "no valid host and port"),
            ("https://h:9443/?a=b", "query"),
        ] {
            let error = parse_url(text).expect_err(text);
            assert!(error.contains(why), "{text}: {error}");
        }
    }

    #[test]
    fn config_names_follow_the_namespace() {
        let settings = AdmissionSettings::default();
        assert_eq!(settings.config_name(None), "coxswain");
        assert_eq!(settings.config_name(Some("team")), "coxswain-team");
    }
}
