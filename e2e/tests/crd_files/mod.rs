//! Installs this repository's own CRDs (`crds/*.yaml`) on the test cluster
//! and waits until each is established.

use std::time::Duration;

use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition;
use kube::api::{Api, Patch, PatchParams};

/// Applies `crds/FILE` for each of `files` (server-side, forced) and waits,
/// up to `bound` each, until it is established.
pub async fn install(client: kube::Client, files: &[&str], bound: Duration) {
    let crds: Api<CustomResourceDefinition> = Api::all(client);
    let dir = coxswain_e2e::workspace_root().join("crds");
    for file in files {
        let text = std::fs::read_to_string(dir.join(file)).expect("crds/ file");
        let crd: CustomResourceDefinition = serde_yaml::from_str(&text).expect("CRD YAML");
        let name = crd.metadata.name.clone().expect("named");
        let params = PatchParams::apply("coxswain-e2e").force();
        crds.patch(&name, &params, &Patch::Apply(&crd))
            .await
            .unwrap_or_else(|e| panic!("install {file}: {e}"));
        coxswain_e2e::wait_crd_established(&crds, &name, bound)
            .await
            .expect("established");
    }
}
