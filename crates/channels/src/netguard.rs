//! Outbound requests to addresses that someone else chose (a feed URL and where it
//! redirects, a reader's webhook or robot) never reach this machine or its private network
//! unless the operator allows it: loopback, private (RFC 1918), carrier-grade NAT,
//! link-local (the cloud metadata service at 169.254.169.254 among them), unique-local,
//! unspecified, multicast and broadcast addresses are refused, in every spelling (IPv4
//! written as one number, in hex or shortened, IPv4-mapped IPv6), after DNS resolution
//! and on every redirect hop.
//!
//! Two checks, because reqwest resolves names but never IP literals: [`Guard::check_url`]
//! before a request and on each redirect, and [`Guard::resolver`] for names (so a name that
//! resolves to 127.0.0.1 is refused too, and a name resolving to both kinds connects to
//! the public addresses only). The operator's own endpoints (the LLM's base_url, the
//! Telegram and Discord API URLs) are not guarded: the config chose them.

use std::net::{IpAddr, Ipv4Addr, Ipv6Addr, SocketAddr};
use std::sync::Arc;

/// Refuses private targets unless `allowed`; `key` is the setting that allows them, named
/// in every refusal.
#[derive(Debug, Clone, Copy)]
pub struct Guard {
    pub allowed: bool,
    pub key: &'static str,
}

impl Guard {
    pub fn new(allowed: bool, key: &'static str) -> Guard {
        Guard { allowed, key }
    }

    /// For feeds, their redirects and discovery.
    pub fn fetch(config: &kdigest_core::settings::FetchConfig) -> Guard {
        Guard::new(
            config.allow_private_networks,
            "fetch.allow_private_networks",
        )
    }

    /// For readers' webhooks and robots.
    pub fn delivery(allow_private_networks: bool) -> Guard {
        Guard::new(allow_private_networks, "delivery.allow_private_networks")
    }

    /// Refuses a URL whose host is a private address written as an IP or as `localhost`
    /// (names are checked when they resolve, see [`Guard::resolver`]).
    pub fn check_url(&self, url: &url::Url) -> Result<(), String> {
        if self.allowed {
            return Ok(());
        }
        let ip = match url.host() {
            Some(url::Host::Ipv4(ip)) => IpAddr::V4(ip),
            Some(url::Host::Ipv6(ip)) => IpAddr::V6(ip),
            Some(url::Host::Domain(name)) => {
                let name = name.trim_end_matches('.').to_ascii_lowercase();
                if name == "localhost" || name.ends_with(".localhost") {
                    return Err(self.refusal(&name, "a loopback name"));
                }
                return Ok(());
            }
            None => return Ok(()),
        };
        match kind(ip) {
            Some(kind) => Err(self.refusal(&ip.to_string(), kind)),
            None => Ok(()),
        }
    }

    /// A DNS resolver for reqwest that drops private addresses (all of them allowed when
    /// the guard allows them).
    pub fn resolver(&self) -> Arc<Resolver> {
        Arc::new(Resolver { guard: *self })
    }

    fn refusal(&self, target: &str, kind: &str) -> String {
        format!(
            "{target} is {kind}: kdigest does not contact private networks unless {} = true",
            self.key
        )
    }
}

/// What kind of private address `ip` is; None when it is a public one.
pub fn kind(ip: IpAddr) -> Option<&'static str> {
    match ip {
        IpAddr::V4(v4) => kind_v4(v4),
        IpAddr::V6(v6) => {
            if let Some(v4) = v6.to_ipv4_mapped() {
                return kind_v4(v4);
            }
            let first = v6.segments()[0];
            if v6.is_loopback() {
                Some("a loopback address")
            } else if v6.is_unspecified() {
                Some("the unspecified address")
            } else if first & 0xfe00 == 0xfc00 {
                Some("a unique-local address")
            } else if first & 0xffc0 == 0xfe80 {
                Some("a link-local address")
            } else if v6.is_multicast() {
                Some("a multicast address")
            } else if is_nat64_or_compatible(v6) {
                // ::a.b.c.d (deprecated IPv4-compatible) and 64:ff9b::a.b.c.d (NAT64) reach
                // the IPv4 address they carry.
                let [.., a, b] = v6.segments();
                kind_v4(Ipv4Addr::from((u32::from(a) << 16) | u32::from(b)))
            } else {
                None
            }
        }
    }
}

fn is_nat64_or_compatible(v6: Ipv6Addr) -> bool {
    let s = v6.segments();
    s[..6] == [0; 6] || s[..6] == [0x64, 0xff9b, 0, 0, 0, 0]
}

fn kind_v4(ip: Ipv4Addr) -> Option<&'static str> {
    let [a, b, ..] = ip.octets();
    if ip.is_loopback() {
        Some("a loopback address")
    } else if a == 0 {
        Some("the unspecified address")
    } else if ip.is_private() {
        Some("a private address")
    } else if ip.is_link_local() {
        Some("a link-local address (the cloud metadata service lives there)")
    } else if a == 100 && (64..128).contains(&b) {
        Some("a carrier-grade NAT address")
    } else if ip.is_multicast() || ip.is_broadcast() || a >= 240 {
        Some("a multicast, broadcast or reserved address")
    } else {
        None
    }
}

/// The guard's refusal inside a request's error, if that is why it failed (a name that
/// resolves to private addresses only): a refusal is final, not a fault to retry.
pub fn refusal(error: &reqwest::Error) -> Option<String> {
    let mut source = std::error::Error::source(error);
    while let Some(cause) = source {
        if let Some(refused) = cause.downcast_ref::<Refused>() {
            return Some(refused.0.clone());
        }
        source = cause.source();
    }
    None
}

/// See [`Guard::resolver`].
pub struct Resolver {
    guard: Guard,
}

/// The refusal of a name that resolves to private addresses only.
#[derive(Debug, thiserror::Error)]
#[error("{0}")]
struct Refused(String);

impl reqwest::dns::Resolve for Resolver {
    fn resolve(&self, name: reqwest::dns::Name) -> reqwest::dns::Resolving {
        let guard = self.guard;
        Box::pin(async move {
            let host = name.as_str().to_string();
            let found: Vec<SocketAddr> =
                tokio::net::lookup_host((host.as_str(), 0)).await?.collect();
            if guard.allowed {
                return Ok(Box::new(found.into_iter()) as reqwest::dns::Addrs);
            }
            let (public, private): (Vec<SocketAddr>, Vec<SocketAddr>) =
                found.into_iter().partition(|a| kind(a.ip()).is_none());
            match (public.is_empty(), private.first()) {
                (true, Some(first)) => {
                    let kind = kind(first.ip()).unwrap_or("a private address");
                    Err(Box::new(Refused(
                        guard.refusal(&format!("{host} (resolves to {})", first.ip()), kind),
                    ))
                        as Box<dyn std::error::Error + Send + Sync>)
                }
                _ => Ok(Box::new(public.into_iter()) as reqwest::dns::Addrs),
            }
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn refused(url: &str) -> bool {
        let url = url::Url::parse(url).unwrap();
        Guard::new(false, "fetch.allow_private_networks")
            .check_url(&url)
            .is_err()
    }

    #[test]
    fn every_spelling_of_a_private_address_is_refused() {
        for url in [
            "http://127.0.0.1:22/",
            "http://[::1]/",
            "http://[::ffff:127.0.0.1]/",
            "http://2130706433/",
            "http://0x7f.0.0.1/",
            "http://127.1/",
            "http://0.0.0.0/",
            "http://localhost./",
            "http://LOCALHOST/",
            "http://10.0.0.1/",
            "http://169.254.169.254/latest/meta-data/",
            "http://172.16.0.1/",
            "http://192.168.1.1/",
            "http://[fd00::1]/",
            "http://[fe80::1]/",
            "http://100.64.0.1/",
            "http://[64:ff9b::a9fe:a9fe]/",
            "http://[::127.0.0.1]/",
        ] {
            assert!(refused(url), "{url} was allowed");
        }
        for url in [
            "https://github.com/triton-lang/triton/releases.atom",
            "http://8.8.8.8/",
            "http://[2606:4700::1111]/",
            "http://172.32.0.1/",
            "http://100.128.0.1/",
        ] {
            assert!(!refused(url), "{url} was refused");
        }
    }

    #[test]
    fn the_refusal_names_the_key_that_allows_it_and_the_key_allows_it() {
        let url = url::Url::parse("http://[::ffff:7f00:1]/hook").unwrap();
        let error = Guard::new(false, "delivery.allow_private_networks")
            .check_url(&url)
            .unwrap_err();
        assert!(
            error.contains("127.0.0.1 is a loopback address")
                && error.contains("delivery.allow_private_networks = true"),
            "{error}"
        );
        assert!(
            Guard::new(true, "delivery.allow_private_networks")
                .check_url(&url)
                .is_ok()
        );
    }

    #[tokio::test]
    async fn a_name_that_resolves_to_loopback_is_refused() {
        use reqwest::dns::Resolve;
        let resolver = Guard::new(false, "fetch.allow_private_networks").resolver();
        let error = match resolver.resolve("localhost".parse().unwrap()).await {
            Ok(addrs) => panic!("resolved to {:?}", addrs.collect::<Vec<_>>()),
            Err(e) => e.to_string(),
        };
        assert!(
            error.contains("localhost (resolves to")
                && error.contains("fetch.allow_private_networks"),
            "{error}"
        );
        let allowed = Guard::new(true, "fetch.allow_private_networks").resolver();
        assert!(allowed.resolve("localhost".parse().unwrap()).await.is_ok());
    }
}
