//! A flow's fingerprint. A run keeps the flow it started with; its status
//! names that flow by digest, so a status is never resumed with a flow that
//! changed since (Kubernetes keeps no old generations of a Flow).

use serde_json::{Map, Value};
use sha2::{Digest, Sha256};

use crate::api::FlowSpec;

/// `sha256:` and the hex SHA-256 of the flow's canonical JSON (object keys
/// sorted, no spaces): the same for the same flow however it was written.
pub fn flow_digest(spec: &FlowSpec) -> String {
    let value = serde_json::to_value(spec).unwrap_or(Value::Null);
    let text = canonical(value).to_string();
    let hash = Sha256::digest(text.as_bytes());
    let hex: String = hash.iter().map(|b| format!("{b:02x}")).collect();
    format!("sha256:{hex}")
}

/// The value with every object's keys in sorted order, whatever order the
/// JSON map keeps them in.
fn canonical(value: Value) -> Value {
    match value {
        Value::Object(map) => {
            let mut entries: Vec<(String, Value)> = map.into_iter().collect();
            entries.sort_by(|a, b| a.0.cmp(&b.0));
            Value::Object(
                entries
                    .into_iter()
                    .map(|(k, v)| (k, canonical(v)))
                    .collect::<Map<_, _>>(),
            )
        }
        Value::Array(items) => Value::Array(items.into_iter().map(canonical).collect()),
        other => other,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn spec(yaml: &str) -> FlowSpec {
        serde_yaml::from_str(yaml).expect("flow")
    }

    #[test]
    fn the_same_flow_written_two_ways_has_one_digest() {
        let a = spec("steps: [{key: a, script: {source: x}, input: {p: 1, q: 2}}]");
        let b = spec("steps:\n  - input: {q: 2, p: 1}\n    script: {source: x}\n    key: a\n");
        assert_eq!(flow_digest(&a), flow_digest(&b));
        assert!(flow_digest(&a).starts_with("sha256:"));
        assert_eq!(flow_digest(&a).len(), "sha256:".len() + 64);
    }

    #[test]
    fn a_changed_flow_has_another_digest() {
        let a = spec("steps: [{key: a, script: {source: x}}]");
        let b = spec("steps: [{key: a, script: {source: y}}]");
        assert_ne!(flow_digest(&a), flow_digest(&b));
    }
}
