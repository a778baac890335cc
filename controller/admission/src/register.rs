//! The webhook configurations that make the API server call us: one
//! Validating- and one MutatingWebhookConfiguration, for `coxswain.dev`
//! resources (and their status, written by the controller alone) only,
//! never a core kind (with `failurePolicy: Fail` a stopped webhook would
//! block every ConfigMap write of the cluster), failing closed, with a short timeout, limited to one
//! namespace when the controller is. Written with server-side apply, so a
//! replica that renews the CA moves the caBundle and nothing else fights it.
//! The Helm chart templates the same two objects (so `helm uninstall`
//! removes them); they carry no labels of ours, so the chart's stay its own.

use k8s_openapi::api::admissionregistration::v1::{
    MutatingWebhookConfiguration, ValidatingWebhookConfiguration,
};
use kube::Api;
use kube::api::{Patch, PatchParams};
use serde_json::{Value, json};

use super::AdmissionError;

/// How long the API server waits for an answer, in seconds.
pub const TIMEOUT_SECONDS: i32 = 5;

/// The field manager of the configurations.
const MANAGER: &str = "coxswain-admission";

/// How the API server reaches the webhook.
#[derive(Debug, Clone)]
pub enum Endpoint {
    /// An address (`--webhook-url`), without the path.
    Url(String),
    /// A Service in the cluster (`--webhook-service`).
    Service {
        /// Its namespace.
        namespace: String,
        /// Its name.
        name: String,
        /// Its port.
        port: u16,
    },
}

impl Endpoint {
    fn client_config(&self, path: &str, ca_bundle: &str) -> Value {
        let ca = k8s_openapi::ByteString(ca_bundle.as_bytes().to_vec());
        match self {
            Endpoint::Url(base) => json!({"url": format!("{base}{path}"), "caBundle": ca}),
            Endpoint::Service {
                namespace,
                name,
                port,
            } => json!({
                "service": {"namespace": namespace, "name": name, "path": path, "port": port},
                "caBundle": ca
            }),
        }
    }
}

/// One webhook of a configuration.
fn webhook(
    name: &str,
    resources: &[&str],
    operations: &[&str],
    client_config: Value,
    namespace: Option<&str>,
) -> Value {
    let mut hook = json!({
        "name": name,
        "clientConfig": client_config,
        "rules": [{
            "apiGroups": ["coxswain.dev"],
            "apiVersions": ["*"],
            "operations": operations,
            "resources": resources,
            "scope": "Namespaced"
        }],
        "failurePolicy": "Fail",
        "sideEffects": "None",
        "admissionReviewVersions": ["v1"],
        "timeoutSeconds": TIMEOUT_SECONDS,
        "matchPolicy": "Equivalent"
    });
    if let Some(ns) = namespace {
        hook["namespaceSelector"] = json!({"matchLabels": {"kubernetes.io/metadata.name": ns}});
    }
    hook
}

/// The statuses only the controller writes.
pub const STATUSES: [&str; 3] = ["flows/status", "runs/status", "approvals/status"];

/// The webhook refusing status writes by anyone but `controller_user`. The
/// API server does not even call it for the controller's own writes (a
/// `matchConditions` expression on the user), so the status is written at
/// the same speed as without it, and a webhook that is down does not stop
/// the controller; the webhook checks the user again.
fn status_webhook(client_config: Value, namespace: Option<&str>, controller_user: &str) -> Value {
    let mut hook = webhook(
        "status.coxswain.dev",
        &STATUSES,
        &["UPDATE"],
        client_config,
        namespace,
    );
    hook["matchConditions"] = json!([{
        "name": "not-the-controller",
        "expression": not_the_controller(controller_user),
    }]);
    hook
}

/// The CEL expression true for every user but `controller_user` (its name
/// as a JSON string, which is a CEL string literal too).
pub fn not_the_controller(controller_user: &str) -> String {
    let quoted = serde_json::to_string(controller_user).unwrap_or_else(|_| "\"\"".into());
    format!("request.userInfo.username != {quoted}")
}

/// The ValidatingWebhookConfiguration: Flows, Runs and Approvals, created
/// and updated, and writes to their status by anyone but the controller.
pub fn validating(
    config: &str,
    endpoint: &Endpoint,
    ca_bundle: &str,
    namespace: Option<&str>,
    controller_user: &str,
) -> Value {
    let cc = endpoint.client_config("/validate", ca_bundle);
    let both = ["CREATE", "UPDATE"];
    json!({
        "apiVersion": "admissionregistration.k8s.io/v1",
        "kind": "ValidatingWebhookConfiguration",
        "metadata": {"name": config},
        "webhooks": [
            webhook("flows.coxswain.dev", &["flows"], &both, cc.clone(), namespace),
            webhook("runs.coxswain.dev", &["runs"], &both, cc.clone(), namespace),
            webhook("approvals.coxswain.dev", &["approvals"], &both, cc.clone(), namespace),
            status_webhook(cc, namespace, controller_user),
        ]
    })
}

/// The MutatingWebhookConfiguration: a Run's creator, an Approval's decider.
pub fn mutating(
    config: &str,
    endpoint: &Endpoint,
    ca_bundle: &str,
    namespace: Option<&str>,
) -> Value {
    let cc = endpoint.client_config("/mutate", ca_bundle);
    let mut runs = webhook(
        "runs.coxswain.dev",
        &["runs"],
        &["CREATE"],
        cc.clone(),
        namespace,
    );
    let mut approvals = webhook(
        "approvals.coxswain.dev",
        &["approvals"],
        &["UPDATE"],
        cc,
        namespace,
    );
    for hook in [&mut runs, &mut approvals] {
        hook["reinvocationPolicy"] = json!("Never");
    }
    json!({
        "apiVersion": "admissionregistration.k8s.io/v1",
        "kind": "MutatingWebhookConfiguration",
        "metadata": {"name": config},
        "webhooks": [runs, approvals]
    })
}

/// Writes both configurations.
pub async fn apply(
    client: &kube::Client,
    config: &str,
    endpoint: &Endpoint,
    ca_bundle: &str,
    namespace: Option<&str>,
    controller_user: &str,
) -> Result<(), AdmissionError> {
    let params = PatchParams::apply(MANAGER).force();
    let validating_api: Api<ValidatingWebhookConfiguration> = Api::all(client.clone());
    validating_api
        .patch(
            config,
            &params,
            &Patch::Apply(validating(
                config,
                endpoint,
                ca_bundle,
                namespace,
                controller_user,
            )),
        )
        .await
        .map_err(|e| {
            AdmissionError::kube(
                format!("writing the ValidatingWebhookConfiguration {config}"),
                e,
            )
        })?;
    let mutating_api: Api<MutatingWebhookConfiguration> = Api::all(client.clone());
    mutating_api
        .patch(
            config,
            &params,
            &Patch::Apply(mutating(config, endpoint, ca_bundle, namespace)),
        )
        .await
        .map_err(|e| {
            AdmissionError::kube(
                format!("writing the MutatingWebhookConfiguration {config}"),
                e,
            )
        })?;
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn configurations_fail_closed_for_our_group_only() {
        let endpoint = Endpoint::Url("https://127.0.0.1:9443".into());
        let v: ValidatingWebhookConfiguration = serde_json::from_value(validating(
            "coxswain-ns",
            &endpoint,
            "PEM",
            Some("ns"),
            "system:serviceaccount:coxswain:coxswain",
        ))
        .expect("valid configuration");
        assert_eq!(v.webhooks.as_ref().map(Vec::len), Some(4));
        for hook in v.webhooks.iter().flatten() {
            assert_eq!(hook.failure_policy.as_deref(), Some("Fail"));
            assert_eq!(hook.side_effects, "None");
            assert_eq!(hook.timeout_seconds, Some(TIMEOUT_SECONDS));
            let rules = hook.rules.as_ref().expect("rules");
            assert_eq!(
                rules[0].api_groups.as_deref(),
                Some(&["coxswain.dev".to_string()][..])
            );
            assert_eq!(
                hook.client_config.url.as_deref(),
                Some("https://127.0.0.1:9443/validate")
            );
            assert_eq!(
                hook.client_config
                    .ca_bundle
                    .as_ref()
                    .map(|b| b.0.as_slice()),
                Some(&b"PEM"[..])
            );
            assert!(hook.namespace_selector.is_some());
        }
        let status = &v.webhooks.as_ref().expect("webhooks")[3];
        assert_eq!(status.name, "status.coxswain.dev");
        let rules = &status.rules.as_ref().expect("rules")[0];
        assert_eq!(
            rules.resources.as_deref(),
            Some(&STATUSES.map(String::from)[..])
        );
        assert_eq!(
            rules.operations.as_deref(),
            Some(&["UPDATE".to_string()][..])
        );
        let conditions = status.match_conditions.as_ref().expect("matchConditions");
        assert_eq!(
            conditions[0].expression,
            r#"request.userInfo.username != "system:serviceaccount:coxswain:coxswain""#
        );
        assert_eq!(
            not_the_controller(r#"odd "name" \ here"#),
            r#"request.userInfo.username != "odd \"name\" \\ here""#
        );
        let m: MutatingWebhookConfiguration =
            serde_json::from_value(mutating("coxswain", &endpoint, "PEM", None)).expect("valid");
        let names: Vec<&str> = m
            .webhooks
            .iter()
            .flatten()
            .map(|w| w.name.as_str())
            .collect();
        assert_eq!(names, ["runs.coxswain.dev", "approvals.coxswain.dev"]);
        assert!(
            m.webhooks
                .iter()
                .flatten()
                .all(|w| w.namespace_selector.is_none())
        );
    }
}
