//! API writes counted by the API server itself: `apiserver_request_total`
//! scraped from kube-apiserver's `/metrics` before and after a workload.
//!
//! A controller's own request counters miss what others do on its behalf
//! (the garbage collector deleting children, the job controller writing Pod
//! and Job status); the API server's counter sees every write from every
//! client, so two engines compared on the same server are counted alike.
//!
//! ```no_run
//! # async fn demo(client: kube::Client) -> coxswain_e2e::Result<()> {
//! use coxswain_e2e::apimetrics;
//! let before = apimetrics::scrape(&client).await?;
//! // … run the workload …
//! let after = apimetrics::scrape(&client).await?;
//! let writes = after.since(&before);
//! println!("{} writes, {} to runs/status", writes.total(), writes.resource("runs", "status"));
//! # Ok(()) }
//! ```

use std::collections::BTreeMap;

use crate::{Error, Result};

/// The HTTP verbs (as the API server labels them) that change something.
pub const WRITE_VERBS: [&str; 6] = [
    "POST",
    "PUT",
    "PATCH",
    "DELETE",
    "DELETECOLLECTION",
    "APPLY",
];

/// Which resource a count is about: `(resource, subresource, verb)`, e.g.
/// `("runs", "status", "PUT")`; `subresource` is empty for the object itself.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct WriteKey {
    /// The resource's plural name (`runs`, `events`, `configmaps`, `leases`).
    pub resource: String,
    /// The subresource (`status`, `binding`), or empty.
    pub subresource: String,
    /// The verb (`POST`, `PUT`, `PATCH`, `DELETE`, …).
    pub verb: String,
}

/// Write requests the API server counted, by resource and verb (every
/// response code: a 409 Conflict is a write the server had to handle too).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct WriteCounts(pub BTreeMap<WriteKey, u64>);

impl WriteCounts {
    /// What was counted after `before` was taken (counters only grow; a
    /// restarted API server starts again from 0, which counts as 0 here).
    pub fn since(&self, before: &WriteCounts) -> WriteCounts {
        let mut out = BTreeMap::new();
        for (key, &now) in &self.0 {
            let then = before.0.get(key).copied().unwrap_or(0);
            let delta = now.saturating_sub(then);
            if delta > 0 {
                out.insert(key.clone(), delta);
            }
        }
        WriteCounts(out)
    }

    /// Every write.
    pub fn total(&self) -> u64 {
        self.0.values().sum()
    }

    /// The writes to one resource (`subresource` empty for the object),
    /// all verbs together.
    pub fn resource(&self, resource: &str, subresource: &str) -> u64 {
        self.0
            .iter()
            .filter(|(k, _)| k.resource == resource && k.subresource == subresource)
            .map(|(_, n)| n)
            .sum()
    }

    /// The writes by `resource[/subresource]`, all verbs together, largest
    /// first: what a report lists.
    pub fn by_resource(&self) -> Vec<(String, u64)> {
        let mut sums: BTreeMap<String, u64> = BTreeMap::new();
        for (k, n) in &self.0 {
            let name = if k.subresource.is_empty() {
                k.resource.clone()
            } else {
                format!("{}/{}", k.resource, k.subresource)
            };
            *sums.entry(name).or_default() += n;
        }
        let mut list: Vec<(String, u64)> = sums.into_iter().collect();
        list.sort_by(|a, b| b.1.cmp(&a.1).then_with(|| a.0.cmp(&b.0)));
        list
    }
}

/// Reads kube-apiserver's `/metrics` with `client` (the admin kubeconfig's
/// client may read it) and returns its write counters.
pub async fn scrape(client: &kube::Client) -> Result<WriteCounts> {
    let request = http::Request::get("/metrics")
        .body(Vec::new())
        .map_err(|e| Error::Metrics(format!("building the /metrics request: {e}")))?;
    let text = client
        .request_text(request)
        .await
        .map_err(|e| Error::Metrics(format!("reading the API server's /metrics: {e}")))?;
    Ok(parse(&text))
}

/// The write counters in a Prometheus text exposition; other lines are
/// skipped, and so is a line that cannot be read (metrics are best effort).
pub fn parse(text: &str) -> WriteCounts {
    let mut counts = BTreeMap::new();
    for line in text.lines() {
        let Some(rest) = line.strip_prefix("apiserver_request_total{") else {
            continue;
        };
        let Some((labels, value)) = rest.rsplit_once('}') else {
            continue;
        };
        let Ok(value) = value.trim().parse::<f64>() else {
            continue;
        };
        let labels = parse_labels(labels);
        let get = |name: &str| labels.get(name).cloned().unwrap_or_default();
        let verb = get("verb");
        if !WRITE_VERBS.contains(&verb.as_str()) {
            continue;
        }
        let key = WriteKey {
            resource: get("resource"),
            subresource: get("subresource"),
            verb,
        };
        *counts.entry(key).or_insert(0) += value as u64;
    }
    WriteCounts(counts)
}

/// `a="x",b="y"` → {a: x, b: y}, with `\"` and `\\` unescaped.
fn parse_labels(text: &str) -> BTreeMap<String, String> {
    let mut labels = BTreeMap::new();
    let mut chars = text.chars().peekable();
    loop {
        let name: String = chars.by_ref().take_while(|&c| c != '=').collect();
        if name.is_empty() || chars.next() != Some('"') {
            break;
        }
        let mut value = String::new();
        while let Some(c) = chars.next() {
            match c {
                '\\' => match chars.next() {
                    Some('n') => value.push('\n'),
                    Some(other) => value.push(other),
                    None => break,
                },
                '"' => break,
                c => value.push(c),
            }
        }
        labels.insert(name.trim().to_string(), value);
        if chars.next() != Some(',') {
            break;
        }
    }
    labels
}

#[cfg(test)]
mod tests {
    use super::*;

    const SAMPLE: &str = r#"# HELP apiserver_request_total [STABLE] Counter of apiserver requests
# TYPE apiserver_request_total counter
apiserver_request_total{code="200",component="apiserver",dry_run="",group="coxswain.dev",resource="runs",scope="resource",subresource="status",verb="PUT",version="v1alpha1"} 7
apiserver_request_total{code="409",component="apiserver",dry_run="",group="coxswain.dev",resource="runs",scope="resource",subresource="status",verb="PUT",version="v1alpha1"} 2
apiserver_request_total{code="201",component="apiserver",dry_run="",group="",resource="events",scope="namespace",subresource="",verb="POST",version="v1"} 3
apiserver_request_total{code="200",component="apiserver",dry_run="",group="",resource="pods",scope="namespace",subresource="",verb="LIST",version="v1"} 40
apiserver_request_total{code="200",component="apiserver",dry_run="",group="",resource="weird",scope="namespace",subresource="",verb="PATCH",version="v1"} 1e+00
apiserver_request_total_other{verb="PUT"} 9
"#;

    #[test]
    fn only_writes_are_counted_by_resource_and_every_code_adds_up() {
        let counts = parse(SAMPLE);
        assert_eq!(counts.resource("runs", "status"), 9);
        assert_eq!(counts.resource("events", ""), 3);
        assert_eq!(counts.resource("pods", ""), 0, "LIST is not a write");
        assert_eq!(counts.resource("weird", ""), 1);
        assert_eq!(counts.total(), 13);
        assert_eq!(counts.by_resource()[0], ("runs/status".to_string(), 9));
    }

    #[test]
    fn since_gives_the_growth_only() {
        let before = parse(SAMPLE);
        let later = SAMPLE.replace("\"v1alpha1\"} 7", "\"v1alpha1\"} 12");
        let after = parse(&later);
        let delta = after.since(&before);
        assert_eq!(delta.total(), 5);
        assert_eq!(delta.resource("runs", "status"), 5);
        assert_eq!(before.since(&after).total(), 0, "never negative");
    }

    #[test]
    fn escaped_quotes_in_values_do_not_end_the_value() {
        let labels = parse_labels(r#"a="x\"y",b="z""#);
        assert_eq!(labels.get("a").map(String::as_str), Some("x\"y"));
        assert_eq!(labels.get("b").map(String::as_str), Some("z"));
    }
}
