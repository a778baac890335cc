//! A namespace per test, so tests run in parallel without seeing each other's
//! objects; it is deleted when the test ends (even on panic).

use std::{
    collections::hash_map::RandomState,
    hash::{BuildHasher, Hasher},
    time::Duration,
};

use k8s_openapi::api::core::v1::{Namespace, ServiceAccount};
use kube::{
    Api, Client, Resource,
    api::{DeleteParams, PostParams},
};
use serde_json::json;

use crate::{Result, client, wait_for};

/// A fresh `ns-<random>` namespace with its default ServiceAccount ready.
pub struct TestNamespace {
    client: Client,
    name: String,
}

fn random_suffix() -> String {
    let mut h = RandomState::new().build_hasher();
    h.write_u128(
        std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map(|d| d.as_nanos())
            .unwrap_or_default(),
    );
    format!("{:08x}", h.finish() as u32)
}

impl TestNamespace {
    /// Creates the namespace and waits for its `default` ServiceAccount (made
    /// by kube-controller-manager), without which pods are refused.
    pub async fn new() -> Result<Self> {
        let client = client().await?;
        let name = format!("ns-{}", random_suffix());
        let ns: Namespace = serde_json::from_value(json!({
            "apiVersion": "v1", "kind": "Namespace",
            "metadata": {"name": name, "labels": {"coxswain.dev/e2e": "true"}}
        }))
        .expect("valid namespace");
        Api::<Namespace>::all(client.clone())
            .create(&PostParams::default(), &ns)
            .await?;
        let sas: Api<ServiceAccount> = Api::namespaced(client.clone(), &name);
        wait_for(
            &format!("serviceaccount {name}/default"),
            Duration::from_secs(60),
            || async { Ok(sas.get_opt("default").await?.map(|_| ())) },
        )
        .await?;
        Ok(Self { client, name })
    }

    /// The namespace's name.
    pub fn name(&self) -> &str {
        &self.name
    }

    /// A client for the cluster.
    pub fn client(&self) -> Client {
        self.client.clone()
    }

    /// Creates in this namespace the `K` that `manifest` describes (JSON,
    /// or a `K` already) and returns it as the API server stored it; panics
    /// if it does not parse or is refused, so a test's set-up reads as the
    /// objects it makes.
    pub async fn create<K>(&self, manifest: impl k8s_openapi::serde::Serialize) -> K
    where
        K: Resource<Scope = k8s_openapi::NamespaceResourceScope>
            + Clone
            + std::fmt::Debug
            + k8s_openapi::serde::de::DeserializeOwned
            + k8s_openapi::serde::Serialize,
        <K as Resource>::DynamicType: Default,
    {
        let manifest = serde_json::to_value(manifest).expect("a manifest is JSON");
        let object: K = serde_json::from_value(manifest.clone())
            .unwrap_or_else(|e| panic!("not a valid object: {e}: {manifest}"));
        self.api::<K>()
            .create(&PostParams::default(), &object)
            .await
            .unwrap_or_else(|e| panic!("creating {manifest}: {e}"))
    }

    /// An API for namespaced resources of kind `K` in this namespace.
    pub fn api<K>(&self) -> Api<K>
    where
        K: Resource<Scope = k8s_openapi::NamespaceResourceScope>,
        <K as Resource>::DynamicType: Default,
    {
        Api::namespaced(self.client.clone(), &self.name)
    }
}

impl Drop for TestNamespace {
    fn drop(&mut self) {
        let name = self.name.clone();
        // The test's runtime may be gone or busy: delete from a thread with its own.
        let _ = std::thread::spawn(move || {
            let rt = tokio::runtime::Builder::new_current_thread()
                .enable_all()
                .build()
                .ok()?;
            rt.block_on(async {
                let c = client().await.ok()?;
                Api::<Namespace>::all(c)
                    .delete(&name, &DeleteParams::background())
                    .await
                    .ok()
            })
        })
        .join();
    }
}
