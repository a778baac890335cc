//! API writes as the kube-apiserver counts them (`apiserver_request_total`
//! on its `/metrics`), by resource and verb, so a benchmark can say what a
//! controller spent. The smallest scrape the Argo comparison needs; the
//! benchmark's `coxswain_e2e::apimetrics` (branch wip/bench) is meant to
//! replace it.

use std::collections::BTreeMap;

use kube::Client;

use crate::{Error, Result};

/// The verbs that write (`APPLY` is server-side apply).
const WRITE_VERBS: [&str; 6] = [
    "POST",
    "PUT",
    "PATCH",
    "APPLY",
    "DELETE",
    "DELETECOLLECTION",
];

/// Write counts keyed by (`resource[/subresource]`, verb).
pub type Writes = BTreeMap<(String, String), u64>;

/// The API server's write counters now.
pub async fn scrape(client: &Client) -> Result<Writes> {
    let request = http::Request::get("/metrics")
        .body(Vec::new())
        .map_err(|e| Error::Argo(format!("building the /metrics request: {e}")))?;
    let text = client.request_text(request).await?;
    Ok(parse(&text))
}

/// Writes counted in `text` (Prometheus exposition format).
pub fn parse(text: &str) -> Writes {
    let mut writes = Writes::new();
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
        let verb = labels.get("verb").cloned().unwrap_or_default();
        if !WRITE_VERBS.contains(&verb.as_str()) {
            continue;
        }
        let mut resource = labels.get("resource").cloned().unwrap_or_default();
        if let Some(sub) = labels.get("subresource").filter(|s| !s.is_empty()) {
            resource = format!("{resource}/{sub}");
        }
        *writes.entry((resource, verb)).or_default() += value as u64;
    }
    writes
}

/// `after − before`, dropping what did not change.
pub fn delta(before: &Writes, after: &Writes) -> Writes {
    after
        .iter()
        .filter_map(|(k, v)| {
            let d = v.saturating_sub(before.get(k).copied().unwrap_or(0));
            (d > 0).then(|| (k.clone(), d))
        })
        .collect()
}

/// The sum of `writes`, leaving out `excluded` resources (e.g. `leases`,
/// which every controller renews on a clock, not per workflow).
pub fn total(writes: &Writes, excluded: &[&str]) -> u64 {
    writes
        .iter()
        .filter(|((resource, _), _)| !excluded.contains(&resource.as_str()))
        .map(|(_, v)| v)
        .sum()
}

fn parse_labels(text: &str) -> BTreeMap<String, String> {
    let mut labels = BTreeMap::new();
    let mut rest = text;
    while let Some((key, after)) = rest.split_once("=\"") {
        let mut value = String::new();
        let mut chars = after.char_indices();
        let mut end = after.len();
        while let Some((i, c)) = chars.next() {
            match c {
                '\\' => {
                    if let Some((_, e)) = chars.next() {
                        value.push(e);
                    }
                }
                '"' => {
                    end = i + 1;
                    break;
                }
                c => value.push(c),
            }
        }
        labels.insert(key.trim_start_matches(',').trim().to_string(), value);
        rest = &after[end..];
    }
    labels
}

#[cfg(test)]
mod tests {
    use super::*;

    const SAMPLE: &str = r#"# HELP apiserver_request_total Counter of apiserver requests
apiserver_request_total{code="201",component="apiserver",dry_run="",group="argoproj.io",resource="workflows",scope="resource",subresource="",verb="POST",version="v1alpha1"} 200
apiserver_request_total{code="200",component="apiserver",dry_run="",group="argoproj.io",resource="workflows",scope="resource",subresource="",verb="PUT",version="v1alpha1"} 210
apiserver_request_total{code="200",component="apiserver",dry_run="",group="argoproj.io",resource="workflows",scope="resource",subresource="",verb="GET",version="v1alpha1"} 999
apiserver_request_total{code="200",component="apiserver",dry_run="",group="",resource="pods",scope="resource",subresource="status",verb="PATCH",version="v1"} 3
apiserver_request_total{code="409",component="apiserver",dry_run="",group="",resource="pods",scope="resource",subresource="status",verb="PATCH",version="v1"} 1
apiserver_request_total{code="200",component="apiserver",dry_run="",group="coordination.k8s.io",resource="leases",scope="resource",subresource="",verb="PUT",version="v1"} 50
"#;

    fn key(r: &str, v: &str) -> (String, String) {
        (r.to_string(), v.to_string())
    }

    #[test]
    fn writes_are_summed_over_codes_by_resource_and_verb_and_reads_ignored() {
        let w = parse(SAMPLE);
        assert_eq!(w.get(&key("workflows", "POST")), Some(&200));
        assert_eq!(w.get(&key("workflows", "PUT")), Some(&210));
        assert_eq!(w.get(&key("workflows", "GET")), None);
        assert_eq!(w.get(&key("pods/status", "PATCH")), Some(&4));
        assert_eq!(total(&w, &["leases"]), 414);
        assert_eq!(total(&w, &[]), 464);
    }

    #[test]
    fn delta_keeps_only_what_changed() {
        let before = parse(SAMPLE);
        let mut after = before.clone();
        *after.get_mut(&key("workflows", "PUT")).unwrap() += 5;
        after.insert(key("events", "POST"), 2);
        let d = delta(&before, &after);
        assert_eq!(d.len(), 2);
        assert_eq!(d[&key("workflows", "PUT")], 5);
        assert_eq!(d[&key("events", "POST")], 2);
    }
}
