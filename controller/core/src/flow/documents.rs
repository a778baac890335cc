//! Reading flows out of YAML text as people keep it in Git: several
//! documents per file, other kinds mixed in.

use serde::Deserialize;

use super::{FlowError, check_nesting};
use crate::api::Flow;

/// One `kind: Flow` document found in a YAML stream.
#[derive(Debug)]
pub struct FlowDocument {
    /// `metadata.name`, or `?` when the document has none.
    pub name: String,
    /// The flow, or why it could not be read as one (with line and column).
    pub flow: Result<Flow, FlowError>,
    /// Which document of the stream it is, counting from 0.
    pub document: usize,
}

/// Every Flow in a YAML stream, in order. Documents of other kinds and empty
/// documents are skipped; a stream that is not YAML at all is an error, and
/// so is one whose brackets nest absurdly deep (refused before serde_yaml
/// spends minutes on it, see [`check_nesting`]).
pub fn flows_in_yaml(text: &str) -> Result<Vec<FlowDocument>, FlowError> {
    let kinds: Vec<Option<String>> = yaml_documents(text)?
        .into_iter()
        .map(|(_, name)| name)
        .collect();
    // Read the Flow documents a second time, straight from the text, so an
    // error carries the line and column where the YAML went wrong.
    let mut flows = Vec::new();
    for (index, (document, name)) in serde_yaml::Deserializer::from_str(text)
        .zip(kinds)
        .enumerate()
    {
        let Some(name) = name else { continue };
        let flow = Flow::deserialize(document).map_err(FlowError::from);
        flows.push(FlowDocument {
            name,
            flow,
            document: index,
        });
    }
    Ok(flows)
}

/// Each document of a YAML stream as a value, with its `metadata.name` (`?`
/// when it has none) when it is a Flow (`kind: Flow` of a `coxswain.dev/`
/// API version). Refuses what [`flows_in_yaml`] refuses.
pub(super) fn yaml_documents(
    text: &str,
) -> Result<Vec<(serde_yaml::Value, Option<String>)>, FlowError> {
    check_nesting(text)?;
    let mut documents = Vec::new();
    for document in serde_yaml::Deserializer::from_str(text) {
        let value = serde_yaml::Value::deserialize(document)?;
        let is_flow = value.get("kind").and_then(|k| k.as_str()) == Some("Flow")
            && value
                .get("apiVersion")
                .and_then(|v| v.as_str())
                .is_some_and(|v| v.starts_with("coxswain.dev/"));
        let name = value
            .get("metadata")
            .and_then(|m| m.get("name"))
            .and_then(|n| n.as_str())
            .unwrap_or("?")
            .to_string();
        documents.push((value, is_flow.then_some(name)));
    }
    Ok(documents)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn finds_flows_among_other_documents() {
        let text = "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: x}\n---\napiVersion: coxswain.dev/v1alpha1\nkind: Flow\nmetadata: {name: hello}\nspec:\n  steps:\n  - key: a\n    join: {}\n";
        let flows = flows_in_yaml(text).unwrap();
        assert_eq!(flows.len(), 1);
        assert_eq!(flows[0].name, "hello");
        assert_eq!(flows[0].flow.as_ref().unwrap().spec.steps[0].key, "a");
    }

    #[test]
    fn a_misspelt_field_names_itself_and_its_line() {
        let text = "apiVersion: coxswain.dev/v1alpha1\nkind: Flow\nmetadata: {name: typo}\nspec:\n  steps:\n  - key: a\n    atempts: 2\n    join: {}\n";
        let flows = flows_in_yaml(text).unwrap();
        let err = flows[0].flow.as_ref().unwrap_err().to_string();
        assert!(err.contains("atempts"), "{err}");
        assert!(err.contains("line 7"), "{err}");
    }

    /// 100,000 levels of `{a:` kept serde_yaml busy for more than 30 s.
    #[test]
    fn deeply_nested_brackets_are_refused_before_parsing() {
        let text = format!(
            "kind: Flow\nspec: {}1{}\n",
            "{a: ".repeat(100_000),
            "}".repeat(100_000)
        );
        let err = flows_in_yaml(&text).unwrap_err().to_string();
        assert!(
            err.starts_with("line 2, column 519: `{` nests brackets more than 128 levels deep"),
            "{err}"
        );
    }

    #[test]
    fn text_that_is_not_yaml_is_an_error() {
        assert!(flows_in_yaml("a: [1, 2\n").is_err());
    }
}
