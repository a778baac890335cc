//! Where network steps may connect: a list of denied address blocks, holes
//! punched in it by an allow list, and the two defaults (a laptop and a
//! cluster).
//!
//! An IPv6 address can carry an IPv4 address inside it (`::ffff:a.b.c.d`,
//! `::a.b.c.d`, NAT64 `64:ff9b::a.b.c.d`, 6to4 `2002:AABB:CCDD::`, Teredo),
//! and the network may deliver it to that IPv4 address. So every address is
//! checked in each of its forms, and refused when any form is denied.

use std::fmt;
use std::net::{IpAddr, Ipv4Addr, Ipv6Addr};

use ipnet::IpNet;

use super::NetError;

/// Which defaults a policy starts from.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum NetMode {
    /// `coxswain run` on a laptop: local services and private networks are
    /// the point of many local flows, so only link-local and cloud metadata
    /// addresses are denied.
    Local,
    /// The controller inside a cluster: an http step could otherwise reach
    /// the controller's own ports, the API server or anything else in the
    /// cluster network, so loopback and private ranges are denied too.
    Cluster,
}

/// Which destinations network steps (http, message, agent) may reach.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct NetPolicy {
    mode: NetMode,
    deny: Vec<IpNet>,
    allow: Vec<IpNet>,
}

/// Why an address was refused: the form of it that was denied, and the block.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Refusal {
    /// The address as the check saw it (an IPv4 address embedded in an IPv6
    /// one is reported as the IPv4 address).
    pub form: IpAddr,
    /// The denied block holding it.
    pub block: IpNet,
}

impl Default for NetPolicy {
    /// The local defaults: what `coxswain run` uses.
    fn default() -> Self {
        NetPolicy::local()
    }
}

/// Link-local (where cloud metadata services live), the metadata addresses
/// that are not link-local, and the "this host" addresses that some systems
/// route to loopback services nobody meant to expose.
const ALWAYS_DENIED: &[&str] = &[
    "169.254.0.0/16",
    "fe80::/10",
    "fd00:ec2::254/128",  // AWS metadata over IPv6
    "100.100.100.200/32", // Alibaba Cloud metadata
    "0.0.0.0/8",
    "::/128",
];

/// What a controller denies on top: loopback, private ranges (RFC 1918,
/// unique local IPv6) and the shared address space some clusters use for pods.
const CLUSTER_DENIED: &[&str] = &[
    "127.0.0.0/8",
    "::1/128",
    "10.0.0.0/8",
    "172.16.0.0/12",
    "192.168.0.0/16",
    "fc00::/7",
    "100.64.0.0/10",
];

fn blocks(list: &[&str]) -> Vec<IpNet> {
    // The lists above are constants written in CIDR form; a typo in them is
    // caught by the unit tests, and skipped rather than panicking.
    list.iter().filter_map(|b| b.parse().ok()).collect()
}

impl NetPolicy {
    /// The laptop defaults: link-local and cloud metadata addresses denied,
    /// loopback and private ranges allowed.
    pub fn local() -> Self {
        NetPolicy {
            mode: NetMode::Local,
            deny: blocks(ALWAYS_DENIED),
            allow: Vec::new(),
        }
    }

    /// The controller defaults: loopback, private, shared, link-local,
    /// metadata and unspecified addresses all denied. Open holes for
    /// in-cluster services a flow may call with [`NetPolicy::allowing`].
    pub fn cluster() -> Self {
        let mut deny = blocks(CLUSTER_DENIED);
        deny.extend(blocks(ALWAYS_DENIED));
        NetPolicy {
            mode: NetMode::Cluster,
            deny,
            allow: Vec::new(),
        }
    }

    /// A policy denying exactly `deny` (an empty list allows everything).
    pub fn only_denying(mode: NetMode, deny: Vec<IpNet>) -> Self {
        NetPolicy {
            mode,
            deny,
            allow: Vec::new(),
        }
    }

    /// The same policy with `blocks` allowed even where a denied block holds
    /// them, e.g. the address range of an in-cluster service.
    pub fn allowing(mut self, blocks: impl IntoIterator<Item = IpNet>) -> Self {
        self.allow.extend(blocks.into_iter().map(|b| b.trunc()));
        self
    }

    /// The same policy with `blocks` denied as well.
    pub fn denying(mut self, blocks: impl IntoIterator<Item = IpNet>) -> Self {
        self.deny.extend(blocks.into_iter().map(|b| b.trunc()));
        self
    }

    /// Which defaults this policy started from.
    pub fn mode(&self) -> NetMode {
        self.mode
    }

    /// The denied blocks, for showing the configuration.
    pub fn denied(&self) -> &[IpNet] {
        &self.deny
    }

    /// The allowed blocks, for showing the configuration.
    pub fn allowed(&self) -> &[IpNet] {
        &self.allow
    }

    /// Why `ip` may not be reached, if it may not. An address is allowed only
    /// when every form of it is (see the module documentation).
    pub fn refuses(&self, ip: IpAddr) -> Option<Refusal> {
        forms(ip).into_iter().find_map(|form| {
            if self.allow.iter().any(|b| b.contains(&form)) {
                return None;
            }
            self.deny
                .iter()
                .find(|b| b.contains(&form))
                .map(|block| Refusal {
                    form,
                    block: *block,
                })
        })
    }

    /// Checks one address of `host`, with an error naming both.
    pub fn check(&self, host: &str, ip: IpAddr) -> Result<(), NetError> {
        match self.refuses(ip) {
            Some(refusal) => Err(NetError::Refused {
                host: host.to_string(),
                ip,
                refusal,
                mode: self.mode,
            }),
            None => Ok(()),
        }
    }
}

/// Reads a block written like `10.0.0.0/8` or a single address (`10.1.2.3`,
/// `fd00::1`), for configuration files and flags.
pub fn parse_block(text: &str) -> Result<IpNet, NetError> {
    let text = text.trim();
    if let Ok(net) = text.parse::<IpNet>() {
        return Ok(net.trunc());
    }
    text.parse::<IpAddr>()
        .map(IpNet::from)
        .map_err(|_| NetError::BadBlock {
            text: text.to_string(),
        })
}

/// The address and every IPv4 address embedded in it.
pub fn forms(ip: IpAddr) -> Vec<IpAddr> {
    let mut all = vec![ip];
    if let IpAddr::V6(v6) = ip {
        all.extend(embedded_v4(v6).into_iter().map(IpAddr::V4));
    }
    all
}

/// The IPv4 addresses an IPv6 address may be delivered to.
fn embedded_v4(ip: Ipv6Addr) -> Vec<Ipv4Addr> {
    let bits = u128::from(ip);
    let o = ip.octets();
    let low = Ipv4Addr::new(o[12], o[13], o[14], o[15]);
    let mut found = Vec::new();
    match bits >> 32 {
        // IPv4-mapped, ::ffff:a.b.c.d
        0xffff => found.push(low),
        // IPv4-compatible (deprecated), ::a.b.c.d — but :: and ::1 are the
        // IPv6 unspecified and loopback addresses, not IPv4 ones.
        0 if bits > 1 => found.push(low),
        // NAT64 well-known prefix, 64:ff9b::/96
        0x0064_ff9b_0000_0000_0000_0000 => found.push(low),
        _ => {}
    }
    let s = ip.segments();
    // Local-use NAT64, 64:ff9b:1::/48: the IPv4 address sits at the end with
    // a /96 translator prefix, or in bits 48–87 (around the reserved octet)
    // with a /48 one; both are checked.
    if s[0] == 0x64 && s[1] == 0xff9b && s[2] == 1 {
        found.push(Ipv4Addr::new(o[6], o[7], o[9], o[10]));
        found.push(low);
    }
    // 6to4, 2002:AABB:CCDD::/48
    if s[0] == 0x2002 {
        found.push(Ipv4Addr::new(o[2], o[3], o[4], o[5]));
    }
    // Teredo, 2001:0::/32: the client's address, inverted, in the last 32 bits.
    if s[0] == 0x2001 && s[1] == 0 {
        found.push(Ipv4Addr::from(!u32::from(low)));
    }
    found
}

impl fmt::Display for NetMode {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            NetMode::Local => "link-local and cloud metadata addresses are denied",
            NetMode::Cluster => {
                "in a cluster, loopback, private, link-local and metadata addresses are denied unless the controller's network policy allows them"
            }
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ip(s: &str) -> IpAddr {
        s.parse().expect("test address")
    }

    #[test]
    fn the_constant_lists_all_parse() {
        assert_eq!(blocks(ALWAYS_DENIED).len(), ALWAYS_DENIED.len());
        assert_eq!(blocks(CLUSTER_DENIED).len(), CLUSTER_DENIED.len());
    }

    #[test]
    fn local_defaults_refuse_metadata_and_allow_loopback_and_private() {
        let local = NetPolicy::local();
        for refused in [
            "169.254.169.254",
            "fd00:ec2::254",
            "::ffff:169.254.169.254",
            "fe80::1",
            "100.100.100.200",
            "0.0.0.0",
            "::",
        ] {
            assert!(local.refuses(ip(refused)).is_some(), "{refused}");
        }
        for allowed in [
            "127.0.0.1",
            "::1",
            "10.0.0.1",
            "192.168.1.1",
            "fd12::1",
            "93.184.216.34",
        ] {
            assert!(local.refuses(ip(allowed)).is_none(), "{allowed}");
        }
    }

    #[test]
    fn cluster_defaults_refuse_loopback_private_and_metadata() {
        let cluster = NetPolicy::cluster();
        for refused in [
            "127.0.0.1",
            "::1",
            "10.96.0.1",
            "172.20.0.5",
            "192.168.0.10",
            "fd12:3456::1",
            "100.64.0.1",
            "169.254.169.254",
            "fe80::1",
            "0.0.0.0",
            "::",
            "::ffff:10.0.0.1",
        ] {
            assert!(cluster.refuses(ip(refused)).is_some(), "{refused}");
        }
        for allowed in ["93.184.216.34", "2606:2800:220:1::1", "172.32.0.1"] {
            assert!(cluster.refuses(ip(allowed)).is_none(), "{allowed}");
        }
    }

    #[test]
    fn an_allow_list_opens_holes_in_the_cluster_defaults() {
        let cluster = NetPolicy::cluster().allowing([parse_block("10.20.0.0/16").unwrap()]);
        assert!(cluster.refuses(ip("10.20.3.4")).is_none());
        assert!(cluster.refuses(ip("::ffff:10.20.3.4")).is_none());
        assert!(cluster.refuses(ip("10.21.0.1")).is_some());
        assert!(cluster.refuses(ip("169.254.169.254")).is_some());
    }

    #[test]
    fn ipv4_hidden_in_ipv6_is_checked_as_ipv4() {
        let local = NetPolicy::local();
        for (hidden, v4) in [
            ("::169.254.169.254", "169.254.169.254"), // IPv4-compatible
            ("::ffff:169.254.169.254", "169.254.169.254"), // IPv4-mapped
            ("64:ff9b::a9fe:a9fe", "169.254.169.254"), // NAT64
            ("2002:a9fe:a9fe::1", "169.254.169.254"), // 6to4
            ("2001:0:4136:e378:8000:63bf:5601:5601", "169.254.169.254"), // Teredo client
            ("::ffff:100.100.100.200", "100.100.100.200"),
        ] {
            let refusal = local.refuses(ip(hidden));
            assert_eq!(
                refusal.map(|r| r.form),
                Some(ip(v4)),
                "{hidden} should be refused as {v4}"
            );
        }
        // Local-use NAT64 is read both ways (/96 and /48 translator prefix);
        // either reading of these is refused.
        for hidden in ["64:ff9b:1::a9fe:a9fe", "64:ff9b:1:a9fe:a9:fe00::"] {
            let refusal = local.refuses(ip(hidden));
            assert!(
                refusal.is_some_and(|r| r.form.is_ipv4()),
                "{hidden}: {refusal:?}"
            );
        }
        let cluster = NetPolicy::cluster();
        assert_eq!(
            cluster.refuses(ip("64:ff9b:1:a00:1:100::")).map(|r| r.form),
            Some(ip("10.0.1.1")),
            "local-use NAT64 /48 of 10.0.1.1"
        );
        // The IPv6 loopback is not the IPv4 address 0.0.0.1.
        assert!(local.refuses(ip("::1")).is_none());
        assert!(local.refuses(ip("64:ff9b::808:808")).is_none());
        assert!(cluster.refuses(ip("::7f00:1")).is_some(), "::127.0.0.1");
        assert!(
            cluster.refuses(ip("64:ff9b::a00:1")).is_some(),
            "NAT64 10.0.0.1"
        );
    }

    #[test]
    fn blocks_parse_with_or_without_a_prefix() {
        let block = parse_block("10.1.2.3/8").unwrap();
        assert_eq!(block.to_string(), "10.0.0.0/8");
        assert!(block.contains(&ip("10.200.0.1")));
        assert_eq!(parse_block("10.0.0.1").unwrap().to_string(), "10.0.0.1/32");
        assert_eq!(parse_block("fd00::1").unwrap().to_string(), "fd00::1/128");
        let err = parse_block("10.0.0.0/33").unwrap_err();
        assert!(err.to_string().contains("10.0.0.0/33"), "{err}");
        assert!(parse_block("example.com").is_err());
    }
}
