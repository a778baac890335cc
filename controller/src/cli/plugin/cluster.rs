//! Reaching the cluster as kubectl does: `--kubeconfig`, else `KUBECONFIG`,
//! else `~/.kube/config`, else in-cluster settings; `--context` picks the
//! context and `-n` the namespace, else the context's own (`default`
//! without one). Every call is made as the kubeconfig's user, so RBAC and
//! admission apply to the plugin as to kubectl.

use std::path::PathBuf;
use std::time::Duration;

use kube::config::{KubeConfigOptions, Kubeconfig};
use kube::{Api, Config, ResourceExt};

use super::error::PluginError;
use coxswain_core::api::Run;

/// kubectl's own flags, read anywhere on the line as kubectl passes them.
#[derive(clap::Args, Debug, Clone, Default)]
pub struct Target {
    /// The namespace (default: the context's, else `default`).
    #[arg(long, short = 'n', global = true, value_name = "NAME")]
    pub namespace: Option<String>,
    /// The kubeconfig context to use.
    #[arg(long, global = true, value_name = "NAME")]
    pub context: Option<String>,
    /// The kubeconfig file (default: `KUBECONFIG`, else `~/.kube/config`).
    #[arg(long, global = true, value_name = "PATH")]
    pub kubeconfig: Option<PathBuf>,
}

/// A client and the namespace the command works in.
pub struct Cluster {
    /// Acts as the kubeconfig's user.
    pub client: kube::Client,
    /// The namespace of every object the command reads or writes.
    pub namespace: String,
}

impl Cluster {
    /// Reads the kubeconfig as kubectl would and makes a client.
    pub async fn connect(target: &Target) -> Result<Cluster, PluginError> {
        let options = KubeConfigOptions {
            context: target.context.clone(),
            ..KubeConfigOptions::default()
        };
        let config = match &target.kubeconfig {
            Some(path) => {
                let file = Kubeconfig::read_from(path).map_err(|e| {
                    PluginError::Config(format!("--kubeconfig {}: {e}", path.display()))
                })?;
                Config::from_custom_kubeconfig(file, &options)
                    .await
                    .map_err(|e| PluginError::Config(e.to_string()))?
            }
            None if target.context.is_some() => Config::from_kubeconfig(&options)
                .await
                .map_err(|e| PluginError::Config(e.to_string()))?,
            None => Config::infer()
                .await
                .map_err(|e| PluginError::Config(e.to_string()))?,
        };
        let mut config = config;
        config.connect_timeout = Some(Duration::from_secs(10));
        let namespace = target
            .namespace
            .clone()
            .unwrap_or_else(|| config.default_namespace.clone());
        let client =
            kube::Client::try_from(config).map_err(|e| PluginError::Config(e.to_string()))?;
        Ok(Cluster { client, namespace })
    }

    /// Runs of the namespace.
    pub fn runs(&self) -> Api<Run> {
        self.api()
    }

    /// Any namespaced kind of the namespace.
    pub fn api<K>(&self) -> Api<K>
    where
        K: kube::Resource<Scope = k8s_openapi::NamespaceResourceScope>,
        <K as kube::Resource>::DynamicType: Default,
    {
        Api::namespaced(self.client.clone(), &self.namespace)
    }

    /// The Run `name`, or why there is none.
    pub async fn run(&self, name: &str) -> Result<Run, PluginError> {
        self.runs()
            .get_opt(name)
            .await?
            .ok_or_else(|| PluginError::NoRun {
                run: name.to_string(),
                namespace: self.namespace.clone(),
            })
    }
}

/// The Run's uid: what the children it owns are checked against (labels
/// and names are anyone's to write).
pub fn uid(run: &Run) -> String {
    run.uid().unwrap_or_default()
}
