//! The CustomResourceDefinitions, generated from the API types so `crds/`
//! can never drift from what the controller reads (a test checks it).

use kube::CustomResourceExt;

use crate::api::{Approval, Flow, Run};

/// Each CRD as `(file name, YAML)`, in a stable order.
pub fn render_all() -> Result<Vec<(String, String)>, serde_yaml::Error> {
    let crds = [Flow::crd(), Run::crd(), Approval::crd()];
    crds.iter()
        .map(|crd| {
            let yaml = serde_yaml::to_string(crd)?;
            Ok((format!("{}.yaml", crd.spec.names.plural), yaml))
        })
        .collect()
}
