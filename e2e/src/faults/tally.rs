//! Counting what the controller asks of the API server through the proxy:
//! per verb and resource, per second, and how soon a request that got a
//! fault is sent again — the evidence that a client backs off.

use std::collections::BTreeMap;
use std::sync::Mutex;
use std::time::{Duration, Instant};

use super::plan::Fault;

/// What one request was, in the API server's own terms.
#[derive(Clone, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct Kind {
    /// `get`, `list`, `watch`, `create`, `update`, `patch`, `delete`,
    /// `deletecollection`, or the lower-case HTTP method for anything else.
    pub verb: String,
    /// `pods`, `runs`, `runs/status`, `leases`…; `discovery` for `/api`,
    /// `/apis` and `/version`.
    pub resource: String,
}

/// One request as the proxy saw it.
#[derive(Clone, Debug)]
pub struct Seen {
    /// When it arrived.
    pub at: Instant,
    /// Its verb and resource.
    pub kind: Kind,
    /// Method and path without the query (and for a create, a digest of
    /// its body): the same object asked the same way.
    pub target: String,
    /// The fault it got, if any.
    pub fault: Option<Fault>,
}

/// Classifies a request by method, path and query, as the API server's
/// audit log and `apiserver_request_total` do.
pub fn classify(method: &str, path: &str, query: Option<&str>) -> Kind {
    let method = method.to_ascii_lowercase();
    let segments: Vec<&str> = path.split('/').filter(|s| !s.is_empty()).collect();
    // Past the group and version: /api/v1/… or /apis/GROUP/VERSION/….
    let rest: &[&str] = match segments.as_slice() {
        ["api", _version, rest @ ..] => rest,
        ["apis", _group, _version, rest @ ..] => rest,
        _ => {
            return Kind {
                verb: method,
                resource: "discovery".into(),
            };
        }
    };
    let rest = match rest {
        ["namespaces", _ns, more @ ..] if !more.is_empty() => more,
        other => other,
    };
    let (resource, named) = match rest {
        [] => ("discovery".to_string(), false),
        [resource] => (resource.to_string(), false),
        [resource, _name] => (resource.to_string(), true),
        [resource, _name, sub, ..] => (format!("{resource}/{sub}"), true),
    };
    let watch = query.is_some_and(|q| {
        q.split('&')
            .any(|pair| pair == "watch=true" || pair == "watch=1")
    });
    let verb = match (method.as_str(), named) {
        ("get", _) if watch => "watch",
        ("get", true) => "get",
        ("get", false) => "list",
        ("post", _) => "create",
        ("put", _) => "update",
        ("patch", _) => "patch",
        ("delete", true) => "delete",
        ("delete", false) => "deletecollection",
        (other, _) => other,
    };
    Kind {
        verb: verb.to_string(),
        resource,
    }
}

/// Every request the proxy saw.
#[derive(Debug)]
pub struct Tally {
    start: Instant,
    seen: Mutex<Vec<Seen>>,
}

impl Default for Tally {
    fn default() -> Self {
        Self {
            start: Instant::now(),
            seen: Mutex::new(Vec::new()),
        }
    }
}

impl Tally {
    /// Records one request.
    pub fn record(&self, seen: Seen) {
        self.lock().push(seen);
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, Vec<Seen>> {
        self.seen.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Every request so far, in arrival order.
    pub fn requests(&self) -> Vec<Seen> {
        self.lock().clone()
    }

    /// How many requests so far.
    pub fn total(&self) -> usize {
        self.lock().len()
    }

    /// Requests per verb and resource.
    pub fn by_kind(&self) -> BTreeMap<Kind, usize> {
        let mut out = BTreeMap::new();
        for s in self.lock().iter() {
            *out.entry(s.kind.clone()).or_insert(0) += 1;
        }
        out
    }

    /// Faults injected, per kind.
    pub fn faults(&self) -> BTreeMap<Fault, usize> {
        let mut out = BTreeMap::new();
        for s in self.lock().iter() {
            if let Some(f) = s.fault {
                *out.entry(f).or_insert(0) += 1;
            }
        }
        out
    }

    /// Requests in each whole second since the proxy started.
    pub fn per_second(&self) -> Vec<usize> {
        let mut out = Vec::new();
        for s in self.lock().iter() {
            let second = s.at.duration_since(self.start).as_secs() as usize;
            if out.len() <= second {
                out.resize(second + 1, 0);
            }
            out[second] += 1;
        }
        out
    }

    /// The most times any request that got an error (409, 429, 500, 503,
    /// or a write's answer lost) was sent again — same method, same path — within `window` after
    /// that error, and which request it was. A client that retries at once
    /// and without end shows here as a large count.
    pub fn most_repeats_after_error(&self, window: Duration) -> (usize, String) {
        let seen = self.lock();
        let mut worst = (0, String::new());
        for (i, s) in seen.iter().enumerate() {
            if !s.fault.is_some_and(Fault::is_error) {
                continue;
            }
            let again = seen[i + 1..]
                .iter()
                .take_while(|later| later.at.duration_since(s.at) <= window)
                .filter(|later| later.target == s.target)
                .count();
            if again > worst.0 {
                worst = (again, s.target.clone());
            }
        }
        worst
    }

    /// A short human report: totals, faults per kind, the busiest second
    /// and the requests per verb and resource.
    pub fn report(&self) -> String {
        let mut out = format!("requests: {}\nfaults:", self.total());
        for (fault, n) in self.faults() {
            out.push_str(&format!(" {fault:?}={n}"));
        }
        let per_second = self.per_second();
        let busiest = per_second.iter().copied().max().unwrap_or(0);
        out.push_str(&format!(
            "\nseconds: {}, busiest second: {busiest} requests\n",
            per_second.len()
        ));
        for (kind, n) in self.by_kind() {
            out.push_str(&format!("  {:>5} {} {}\n", n, kind.verb, kind.resource));
        }
        for s in self.lock().iter() {
            if s.fault == Some(Fault::LostResponse) {
                out.push_str(&format!("  answer lost: {}\n", s.target));
            }
        }
        out
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn kind(method: &str, path: &str, query: Option<&str>) -> (String, String) {
        let k = classify(method, path, query);
        (k.verb, k.resource)
    }

    #[test]
    fn requests_are_named_as_the_api_server_names_them() {
        let cases = [
            ("GET", "/api/v1/namespaces/a/pods", None, ("list", "pods")),
            (
                "GET",
                "/api/v1/namespaces/a/pods",
                Some("watch=true&resourceVersion=5"),
                ("watch", "pods"),
            ),
            (
                "GET",
                "/api/v1/namespaces/a/pods/p/log",
                Some("tailLines=5"),
                ("get", "pods/log"),
            ),
            (
                "PUT",
                "/apis/coxswain.dev/v1alpha1/namespaces/a/runs/r/status",
                None,
                ("update", "runs/status"),
            ),
            (
                "PATCH",
                "/apis/coordination.k8s.io/v1/namespaces/a/leases/l",
                None,
                ("patch", "leases"),
            ),
            (
                "POST",
                "/apis/batch/v1/namespaces/a/jobs",
                None,
                ("create", "jobs"),
            ),
            (
                "DELETE",
                "/apis/batch/v1/namespaces/a/jobs/j",
                None,
                ("delete", "jobs"),
            ),
            (
                "DELETE",
                "/api/v1/namespaces/a/configmaps",
                Some("labelSelector=x"),
                ("deletecollection", "configmaps"),
            ),
            ("GET", "/api/v1/namespaces/a", None, ("get", "namespaces")),
            ("GET", "/apis", None, ("get", "discovery")),
            ("GET", "/version", None, ("get", "discovery")),
        ];
        for (method, path, query, (verb, resource)) in cases {
            assert_eq!(
                kind(method, path, query),
                (verb.into(), resource.into()),
                "{method} {path}"
            );
        }
    }

    fn seen(tally: &Tally, after: Duration, target: &str, fault: Option<Fault>) {
        tally.record(Seen {
            at: tally.start + after,
            kind: classify("PUT", target, None),
            target: target.into(),
            fault,
        });
    }

    #[test]
    fn repeats_after_an_error_are_counted_within_the_window_only() {
        let tally = Tally::default();
        let ms = Duration::from_millis;
        seen(&tally, ms(0), "/a", Some(Fault::Internal));
        for i in 1..=4 {
            seen(&tally, ms(100 * i), "/a", None);
            seen(&tally, ms(100 * i + 1), "/b", None);
        }
        seen(&tally, ms(1500), "/a", None);
        // A delay is not an error: what follows it is not counted.
        seen(&tally, ms(2000), "/b", Some(Fault::Delay));
        seen(&tally, ms(2001), "/b", None);
        assert_eq!(tally.most_repeats_after_error(ms(1000)), (4, "/a".into()));
        assert_eq!(tally.per_second(), vec![9, 1, 2]);
        assert_eq!(tally.faults().get(&Fault::Internal), Some(&1));
        // A lost answer is an error the client saw: what follows counts.
        seen(&tally, ms(3000), "/c", Some(Fault::LostResponse));
        for i in 1..=5 {
            seen(&tally, ms(3000 + 100 * i), "/c", None);
        }
        assert_eq!(tally.most_repeats_after_error(ms(1000)), (5, "/c".into()));
        assert_eq!(tally.faults().get(&Fault::LostResponse), Some(&1));
        let report = tally.report();
        assert!(report.contains("LostResponse=1"), "{report}");
        assert!(report.contains("answer lost: /c\n"), "{report}");
    }
}
