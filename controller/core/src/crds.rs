//! The CustomResourceDefinitions, generated from the API types so `crds/`
//! can never drift from what the controller reads (a test checks it).

use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition;
use kube::CustomResourceExt;

use crate::{
    api::{Approval, Flow, Run},
    portable_yaml,
};

/// The three CRDs, in a stable order.
pub fn all() -> [CustomResourceDefinition; 3] {
    [Flow::crd(), Run::crd(), Approval::crd()]
}

/// Each CRD as `(file name, YAML)`, in a stable order. The YAML reads the
/// same to kubectl and Argo CD (YAML 1.1) as to serde_yaml (YAML 1.2): see
/// [`portable_yaml`].
pub fn render_all() -> Result<Vec<(String, String)>, serde_json::Error> {
    all()
        .iter()
        .map(|crd| {
            let yaml = portable_yaml::to_string(crd)?;
            Ok((format!("{}.yaml", crd.spec.names.plural), yaml))
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use serde_json::Value;

    use crate::portable_yaml::YAML_1_1_BOOLEANS;

    /// Every field name in `schema` (the keys of each `properties`), with the
    /// path that leads to it.
    fn field_names(schema: &Value, path: &str, found: &mut Vec<(String, String)>) {
        match schema {
            Value::Object(map) => {
                for (key, value) in map {
                    if key == "properties"
                        && let Value::Object(fields) = value
                    {
                        found.extend(fields.keys().map(|name| (path.to_owned(), name.clone())));
                    }
                    field_names(value, &format!("{path}.{key}"), found);
                }
            }
            Value::Array(items) => {
                for (i, item) in items.iter().enumerate() {
                    field_names(item, &format!("{path}[{i}]"), found);
                }
            }
            _ => {}
        }
    }

    /// kubectl and Argo CD read YAML 1.1, where a bare `on`, `yes` or `n` key
    /// is a boolean: a field with such a name cannot be written bare in a
    /// flow, and broke `kubectl apply` of our own CRD.
    #[test]
    fn no_field_name_is_a_yaml_1_1_boolean() {
        let mut found = Vec::new();
        for crd in super::all() {
            let value = serde_json::to_value(&crd).expect("a CRD serializes");
            field_names(&value, &crd.spec.names.kind, &mut found);
        }
        assert!(
            found.len() > 100,
            "the walk found only {} fields",
            found.len()
        );
        let booleans: Vec<_> = found
            .iter()
            .filter(|(_, name)| YAML_1_1_BOOLEANS.contains(&name.as_str()))
            .collect();
        assert!(
            booleans.is_empty(),
            "fields named like YAML 1.1 booleans: {booleans:?}"
        );
    }
}
