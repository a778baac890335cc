//! What the network executors (`http`, `message`, `agent`) share: where
//! they may send requests ([`NetPolicy`]), the HTTP client, bounded reading
//! of answers, keeping secrets out of records ([`Redactor`]), and filling in
//! placeholders.
//!
//! Network steps run with the controller's network identity, so a flow
//! author could otherwise point a step at the cloud metadata service and read
//! the controller's credentials. Destinations are checked twice: before the
//! request (for a clear error) and in the client's resolver and redirect
//! policy (so a DNS answer that changes, or a redirect, cannot get around it).

mod policy;
mod post;
mod redact;

use std::net::{IpAddr, SocketAddr};
use std::sync::Arc;
use std::time::Duration;

use reqwest::Url;
use reqwest::dns::{Addrs, Name, Resolve, Resolving};

pub use self::policy::{NetMode, NetPolicy, Refusal, forms, parse_block};
pub use self::post::{PostError, exchange};
pub use self::redact::Redactor;
use coxswain_core::api::StepError;
use coxswain_core::engine::{DataView, codes, step_error};
use coxswain_core::template::{self, Place};

/// The most redirects one request follows.
pub const MAX_REDIRECTS: usize = 5;

/// Why a destination could not be used or the client could not be built.
#[derive(Debug, thiserror::Error)]
pub enum NetError {
    /// The address is in a denied block.
    #[error("refused to connect to {host} ({ip}{}): the address is in the denied range {} ({mode})",
        if refusal.form == *ip { String::new() } else { format!(", which reaches {}", refusal.form) },
        refusal.block)]
    Refused {
        /// The host as written.
        host: String,
        /// The address it resolved to.
        ip: IpAddr,
        /// Which form of the address was denied, by which block.
        refusal: Refusal,
        /// The defaults the policy started from, for the hint.
        mode: NetMode,
    },
    /// A redirect left the origin a Secret was bound to.
    #[error(
        "refused to follow the redirect to {to}: the request carries a secret bound to {origin}, and a bound secret goes only to the origin it was bound to"
    )]
    CrossOrigin {
        /// The origin the request started at (scheme, host, port).
        origin: String,
        /// Where the redirect pointed (without user info and query).
        to: String,
    },
    /// Too many redirects in a row.
    #[error("more than {MAX_REDIRECTS} redirects")]
    TooManyRedirects,
    /// The URL names no host.
    #[error("the URL {url} has no host")]
    NoHost {
        /// The URL, without user info and query.
        url: String,
    },
    /// The host name could not be resolved.
    #[error("cannot resolve {host}: {reason}")]
    Resolve {
        /// The host.
        host: String,
        /// The resolver's answer.
        reason: String,
    },
    /// A configured block could not be read.
    #[error("`{text}` is not an IP address or a block like 10.0.0.0/8")]
    BadBlock {
        /// What was written.
        text: String,
    },
    /// No TLS crypto provider was installed before the client was built.
    #[error(
        "no TLS crypto provider is installed: call coxswain_steps::net::install_crypto_provider() once at start"
    )]
    NoCryptoProvider,
    /// reqwest could not build the client.
    #[error("cannot build the HTTP client: {0}")]
    Client(String),
}

/// Installs rustls' ring provider as the process default, once; later calls
/// do nothing. The binary calls it at start; tests and other library callers
/// call it before building executors. reqwest is built without a provider so
/// the whole process (kube's client too) shares this one.
pub fn install_crypto_provider() {
    if rustls::crypto::CryptoProvider::get_default().is_none() {
        // Losing a race to another thread installing it is fine.
        let _ = rustls::crypto::ring::default_provider().install_default();
    }
}

/// Which redirects a client follows, each checked by the network policy.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Redirects {
    /// Any origin: for requests that carry no Secret.
    AnyOrigin,
    /// Only the origin the request started at: for requests that carry a
    /// Secret (a header bound to it, an API key), which may go nowhere else.
    SameOrigin,
}

impl NetPolicy {
    /// Checks a URL's host, resolving a name, so the step fails with a
    /// message naming the address rather than with a connection error.
    pub async fn check_url(&self, url: &Url) -> Result<(), NetError> {
        let Some(host) = url.host_str() else {
            return Err(NetError::NoHost { url: redact(url) });
        };
        if let Some(ip) = host_ip(url) {
            return self.check(host, ip);
        }
        let port = url.port_or_known_default().unwrap_or(0);
        let addrs = tokio::net::lookup_host((host, port))
            .await
            .map_err(|e| NetError::Resolve {
                host: host.to_string(),
                reason: e.to_string(),
            })?;
        for addr in addrs {
            self.check(host, addr.ip())?;
        }
        Ok(())
    }
}

/// The host of a URL when it is written as an IP address.
fn host_ip(url: &Url) -> Option<IpAddr> {
    let host = url.host_str()?;
    let host = host
        .strip_prefix('[')
        .and_then(|h| h.strip_suffix(']'))
        .unwrap_or(host);
    host.parse().ok()
}

/// Resolves names like the system does, refusing a name when any of its
/// addresses is denied.
#[derive(Debug, Clone)]
struct GuardedResolver {
    policy: Arc<NetPolicy>,
}

impl Resolve for GuardedResolver {
    fn resolve(&self, name: Name) -> Resolving {
        let policy = self.policy.clone();
        Box::pin(async move {
            let host = name.as_str().to_string();
            let addrs: Vec<SocketAddr> =
                tokio::net::lookup_host((host.as_str(), 0)).await?.collect();
            for addr in &addrs {
                policy.check(&host, addr.ip())?;
            }
            let addrs: Addrs = Box::new(addrs.into_iter());
            Ok(addrs)
        })
    }
}

/// The redirect policy: at most [`MAX_REDIRECTS`], each destination checked
/// by `policy`, and with [`Redirects::SameOrigin`] none to another origin.
fn redirect_policy(policy: Arc<NetPolicy>, redirects: Redirects) -> reqwest::redirect::Policy {
    reqwest::redirect::Policy::custom(move |attempt| {
        if attempt.previous().len() > MAX_REDIRECTS {
            return attempt.error(NetError::TooManyRedirects);
        }
        let next = attempt.url();
        if let Some(ip) = host_ip(next)
            && let Err(refused) = policy.check(next.host_str().unwrap_or(""), ip)
        {
            return attempt.error(refused);
        }
        if redirects == Redirects::SameOrigin
            && let Some(first) = attempt.previous().first()
            && first.origin() != next.origin()
        {
            let error = NetError::CrossOrigin {
                origin: first.origin().ascii_serialization(),
                to: redact(next),
            };
            return attempt.error(error);
        }
        attempt.follow()
    })
}

/// A client builder with everything the network executors share: rustls
/// (the process's provider), no proxy (a proxy would resolve names where
/// the policy cannot see them), names resolved through the policy, redirects
/// checked by it, and no `Referer` (it would carry the first URL, query and
/// all, to wherever a redirect points). Callers add their own timeouts.
pub fn builder(
    policy: Arc<NetPolicy>,
    redirects: Redirects,
) -> Result<reqwest::ClientBuilder, NetError> {
    if rustls::crypto::CryptoProvider::get_default().is_none() {
        return Err(NetError::NoCryptoProvider);
    }
    Ok(reqwest::Client::builder()
        .no_proxy()
        .referer(false)
        .redirect(redirect_policy(policy.clone(), redirects))
        .dns_resolver(GuardedResolver { policy }))
}

/// The client [`builder`] describes, as it is.
pub fn client(policy: Arc<NetPolicy>, redirects: Redirects) -> Result<reqwest::Client, NetError> {
    builder(policy, redirects)?
        .build()
        .map_err(|e| NetError::Client(chain(&e)))
}

/// A URL as it may appear in a message: without user info and query, which
/// are the parts that sometimes carry credentials.
pub fn redact(url: &Url) -> String {
    let mut shown = url.clone();
    let _ = shown.set_username("");
    let _ = shown.set_password(None);
    shown.set_query(None);
    shown.set_fragment(None);
    shown.to_string()
}

/// An error and its causes on one line; reqwest's own Display stops at the
/// outermost layer, which rarely says what went wrong.
pub fn chain(err: &(dyn std::error::Error + 'static)) -> String {
    let mut parts: Vec<String> = Vec::new();
    let mut next: Option<&(dyn std::error::Error + 'static)> = Some(err);
    while let Some(e) = next {
        let text = e.to_string();
        // reqwest's outer "error sending request for url (…)" repeats the
        // URL our own message already names; the causes say what happened.
        let generic = text.starts_with("error sending request for url");
        if !generic && !parts.iter().any(|p| p.contains(&text)) {
            parts.push(text);
        }
        next = e.source();
    }
    if parts.is_empty() {
        return err.to_string();
    }
    parts.join(": ")
}

/// Why reading an answer stopped.
#[derive(Debug, thiserror::Error)]
pub enum ReadError {
    /// The body is larger than the limit.
    #[error("the answer is larger than the {} limit", size(*.0))]
    TooLarge(usize),
    /// The connection failed while reading.
    #[error("reading the answer failed: {}", chain(.0))]
    Failed(reqwest::Error),
}

/// Reads a response body, refusing one larger than `limit` bytes without
/// holding more than that in memory.
pub async fn read_capped(
    mut response: reqwest::Response,
    limit: usize,
) -> Result<Vec<u8>, ReadError> {
    if let Some(len) = response.content_length()
        && len > limit as u64
    {
        return Err(ReadError::TooLarge(limit));
    }
    let mut body = Vec::new();
    while let Some(chunk) = response.chunk().await.map_err(ReadError::Failed)? {
        if body.len() + chunk.len() > limit {
            return Err(ReadError::TooLarge(limit));
        }
        body.extend_from_slice(&chunk);
    }
    Ok(body)
}

/// A byte count for messages: `10 MiB`, `64 KiB`, `300 bytes`.
pub fn size(bytes: usize) -> String {
    if bytes >= 1 << 20 && bytes.is_multiple_of(1 << 20) {
        format!("{} MiB", bytes >> 20)
    } else if bytes >= 1 << 10 && bytes.is_multiple_of(1 << 10) {
        format!("{} KiB", bytes >> 10)
    } else {
        format!("{bytes} bytes")
    }
}

/// Fills in a template written for `place` with the run's data. A template
/// the validator should have refused, or a value that is missing or cannot go
/// where it stands, fails the step with `workflow.placeholder_error` and the
/// message the author sees.
pub fn render(src: &str, place: Place, data: &DataView) -> Result<String, StepError> {
    let parsed = template::parse(src, place)
        .map_err(|e| step_error(codes::PLACEHOLDER, format!("cannot read `{src}`: {e}")))?;
    parsed
        .render(data)
        .map_err(|e| step_error(codes::PLACEHOLDER, e.to_string()))
}

/// The shortest of the timeouts that apply, so a step's own limit and the
/// attempt's limit both hold.
pub fn shortest(a: Duration, b: Option<Duration>) -> Duration {
    b.map_or(a, |b| a.min(b))
}

/// The first `max` characters of a text, saying when it was cut.
pub fn preview(text: &str, max: usize) -> String {
    match coxswain_core::text::cut(text, max) {
        Some(start) => format!("{start}… (cut)"),
        None => text.to_string(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn previews_cut_on_characters() {
        assert_eq!(preview("héllo", 2), "hé… (cut)");
        assert_eq!(preview("hi", 2), "hi");
    }

    #[test]
    fn refusals_name_the_embedded_address() {
        let err = NetPolicy::local()
            .check("[::a9fe:a9fe]", "::a9fe:a9fe".parse().unwrap())
            .unwrap_err()
            .to_string();
        assert!(
            err.starts_with(
                "refused to connect to [::a9fe:a9fe] (::a9fe:a9fe, which reaches 169.254.169.254)"
            ),
            "{err}"
        );
        assert!(err.contains("169.254.0.0/16"), "{err}");
    }
}
