//! What the network executors (`http`, `message`) share: where they may
//! send requests, the HTTP client, bounded reading of answers, and filling
//! in placeholders.
//!
//! Network steps run with the controller's network identity, so a flow
//! author could otherwise point a step at the cloud metadata service and read
//! the controller's credentials. Destinations are checked twice: before the
//! request (for a clear error) and in the client's resolver and redirect
//! policy (so a DNS answer that changes, or a redirect, cannot get around it).

use std::fmt;
use std::net::{IpAddr, Ipv4Addr, Ipv6Addr, SocketAddr};
use std::sync::Arc;
use std::time::Duration;

use reqwest::Url;
use reqwest::dns::{Addrs, Name, Resolve, Resolving};

use crate::api::StepError;
use crate::engine::{DataView, codes, step_error};
use crate::template::{self, Place};

/// A block of IP addresses, written like `169.254.0.0/16`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct IpBlock {
    addr: IpAddr,
    prefix: u8,
}

impl IpBlock {
    /// The block of `prefix` leading bits of `addr` (clamped to the address size).
    pub fn new(addr: IpAddr, prefix: u8) -> Self {
        let max = if addr.is_ipv4() { 32 } else { 128 };
        IpBlock {
            addr,
            prefix: prefix.min(max),
        }
    }

    /// Whether `ip` is in the block. IPv4 addresses written as IPv6
    /// (`::ffff:169.254.169.254`) count as the IPv4 address.
    pub fn contains(&self, ip: IpAddr) -> bool {
        match (self.addr, ip.to_canonical()) {
            (IpAddr::V4(net), IpAddr::V4(ip)) => {
                let mask = u32::MAX
                    .checked_shl(32 - u32::from(self.prefix))
                    .unwrap_or(0);
                u32::from(net) & mask == u32::from(ip) & mask
            }
            (IpAddr::V6(net), IpAddr::V6(ip)) => {
                let mask = u128::MAX
                    .checked_shl(128 - u32::from(self.prefix))
                    .unwrap_or(0);
                u128::from(net) & mask == u128::from(ip) & mask
            }
            _ => false,
        }
    }
}

impl fmt::Display for IpBlock {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}/{}", self.addr, self.prefix)
    }
}

impl std::str::FromStr for IpBlock {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, String> {
        let (addr, prefix) = match s.split_once('/') {
            Some((a, p)) => (a, Some(p)),
            None => (s, None),
        };
        let addr: IpAddr = addr
            .parse()
            .map_err(|_| format!("`{s}` is not an IP address or block"))?;
        let max = if addr.is_ipv4() { 32 } else { 128 };
        let prefix = match prefix {
            Some(p) => p
                .parse::<u8>()
                .ok()
                .filter(|p| *p <= max)
                .ok_or_else(|| format!("`{s}` has a prefix length outside 0–{max}"))?,
            None => max,
        };
        Ok(IpBlock::new(addr, prefix))
    }
}

/// Addresses network steps may not reach. Loopback is not in the default
/// list: a local run talks to local services, and tests use it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DenyList {
    blocks: Vec<IpBlock>,
}

impl Default for DenyList {
    /// Link-local addresses (where cloud metadata services live) and the
    /// metadata addresses that are not link-local.
    fn default() -> Self {
        DenyList {
            blocks: vec![
                IpBlock::new(IpAddr::V4(Ipv4Addr::new(169, 254, 0, 0)), 16),
                IpBlock::new(IpAddr::V6(Ipv6Addr::new(0xfe80, 0, 0, 0, 0, 0, 0, 0)), 10),
                // AWS metadata over IPv6.
                IpBlock::new(
                    IpAddr::V6(Ipv6Addr::new(0xfd00, 0xec2, 0, 0, 0, 0, 0, 0x254)),
                    128,
                ),
                // Alibaba Cloud metadata.
                IpBlock::new(IpAddr::V4(Ipv4Addr::new(100, 100, 100, 200)), 32),
                // "This host" addresses, which some systems route to loopback
                // services the operator did not mean to expose.
                IpBlock::new(IpAddr::V4(Ipv4Addr::UNSPECIFIED), 8),
                IpBlock::new(IpAddr::V6(Ipv6Addr::UNSPECIFIED), 128),
            ],
        }
    }
}

impl DenyList {
    /// A list with exactly these blocks (an empty list allows everything).
    pub fn new(blocks: Vec<IpBlock>) -> Self {
        DenyList { blocks }
    }

    /// The blocks, for showing the configuration.
    pub fn blocks(&self) -> &[IpBlock] {
        &self.blocks
    }

    /// The block that refuses `ip`, if any.
    pub fn refuses(&self, ip: IpAddr) -> Option<IpBlock> {
        self.blocks.iter().copied().find(|b| b.contains(ip))
    }

    /// Checks a URL's host, resolving a name, so the step fails with a
    /// message naming the address rather than with a connection error.
    pub async fn check_url(&self, url: &Url) -> Result<(), String> {
        if let Some(ip) = host_ip(url) {
            return self.check_ip(url, ip);
        }
        let Some(host) = url.host_str() else {
            return Err(format!("the URL {} has no host", redact(url)));
        };
        let port = url.port_or_known_default().unwrap_or(0);
        let addrs = tokio::net::lookup_host((host, port))
            .await
            .map_err(|e| format!("cannot resolve {host}: {e}"))?;
        for addr in addrs {
            self.check_ip(url, addr.ip())?;
        }
        Ok(())
    }

    fn check_ip(&self, url: &Url, ip: IpAddr) -> Result<(), String> {
        match self.refuses(ip) {
            Some(block) => Err(refused_message(url.host_str().unwrap_or(""), ip, block)),
            None => Ok(()),
        }
    }
}

fn refused_message(host: &str, ip: IpAddr, block: IpBlock) -> String {
    format!(
        "refused to connect to {host} ({ip}): the address is in the denied range {block} \
         (link-local and cloud metadata addresses are denied by default)"
    )
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

/// Resolves names like the system does, dropping nothing but refusing a
/// name when any of its addresses is denied.
#[derive(Debug, Clone)]
struct GuardedResolver {
    deny: Arc<DenyList>,
}

impl Resolve for GuardedResolver {
    fn resolve(&self, name: Name) -> Resolving {
        let deny = self.deny.clone();
        Box::pin(async move {
            let host = name.as_str().to_string();
            let addrs: Vec<SocketAddr> =
                tokio::net::lookup_host((host.as_str(), 0)).await?.collect();
            for addr in &addrs {
                if let Some(block) = deny.refuses(addr.ip()) {
                    return Err(refused_message(&host, addr.ip(), block).into());
                }
            }
            let addrs: Addrs = Box::new(addrs.into_iter());
            Ok(addrs)
        })
    }
}

/// Builds the HTTP client the network executors use: rustls with the ring
/// provider, no proxy (a proxy would resolve names where the deny list cannot
/// see them), names checked by the deny list, redirects (at most 5) checked too.
pub fn client(deny: Arc<DenyList>) -> Result<reqwest::Client, String> {
    // reqwest is built without a default crypto provider; ring is the one the
    // workspace compiles. Installing twice is harmless, so the error is ignored.
    let _ = rustls::crypto::ring::default_provider().install_default();
    let redirect_deny = deny.clone();
    let policy = reqwest::redirect::Policy::custom(move |attempt| {
        if attempt.previous().len() >= 5 {
            return attempt.error("more than 5 redirects");
        }
        let refused =
            host_ip(attempt.url()).and_then(|ip| redirect_deny.refuses(ip).map(|b| (ip, b)));
        match refused {
            Some((ip, block)) => {
                let host = attempt.url().host_str().unwrap_or("").to_string();
                attempt.error(refused_message(&host, ip, block))
            }
            None => attempt.follow(),
        }
    });
    reqwest::Client::builder()
        .no_proxy()
        .redirect(policy)
        .dns_resolver(GuardedResolver { deny })
        .build()
        .map_err(|e| format!("cannot build the HTTP client: {}", chain(&e)))
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
#[derive(Debug)]
pub enum ReadError {
    /// The body is larger than the limit.
    TooLarge(usize),
    /// The connection failed while reading.
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
    match crate::text::cut(text, max) {
        Some(start) => format!("{start}… (cut)"),
        None => text.to_string(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn default_deny_list_refuses_metadata_and_allows_loopback() {
        let deny = DenyList::default();
        for refused in [
            "169.254.169.254",
            "fd00:ec2::254",
            "::ffff:169.254.169.254",
            "fe80::1",
            "100.100.100.200",
        ] {
            assert!(
                deny.refuses(refused.parse().unwrap()).is_some(),
                "{refused}"
            );
        }
        for allowed in ["127.0.0.1", "::1", "10.0.0.1", "93.184.216.34"] {
            assert!(
                deny.refuses(allowed.parse().unwrap()).is_none(),
                "{allowed}"
            );
        }
    }

    #[test]
    fn blocks_parse() {
        let block: IpBlock = "10.0.0.0/8".parse().unwrap();
        assert!(block.contains("10.1.2.3".parse().unwrap()));
        assert!(!block.contains("11.0.0.1".parse().unwrap()));
        assert!("10.0.0.0/33".parse::<IpBlock>().is_err());
        let all: IpBlock = "0.0.0.0/0".parse().unwrap();
        assert!(all.contains("8.8.8.8".parse().unwrap()));
    }

    #[test]
    fn previews_cut_on_characters() {
        assert_eq!(preview("héllo", 2), "hé… (cut)");
        assert_eq!(preview("hi", 2), "hi");
    }
}
