//! A person's answer to an Approval, written where the Approval wants it:
//! `spec.decision`/`feedback`/`response` when one person decides, an entry
//! appended to `spec.answers` when several must agree. Written with the
//! person's own client (the plugin, the run viewer), so admission judges
//! the write as it judges their own `kubectl patch`.

use kube::api::{Patch, PatchParams};
use kube::{Api, ResourceExt};
use serde_json::{Map, Value, json};

use coxswain_core::api::Approval;

/// What a person answers; empty fields are left out.
#[derive(Debug, Clone, Default)]
pub struct Answer {
    /// One of the step's decisions.
    pub decision: Option<String>,
    /// Instructions for whoever redoes the work.
    pub feedback: Option<String>,
    /// An entry's fields.
    pub response: Option<Value>,
}

impl Answer {
    /// Whether it holds nothing an Approval could take.
    pub fn is_empty(&self) -> bool {
        self.decision.is_none() && self.response.is_none()
    }

    fn fields(&self) -> Map<String, Value> {
        let mut fields = Map::new();
        if let Some(decision) = &self.decision {
            fields.insert("decision".into(), json!(decision));
        }
        if let Some(feedback) = self.feedback.as_ref().filter(|f| !f.is_empty()) {
            fields.insert("feedback".into(), json!(feedback));
        }
        if let Some(response) = &self.response {
            fields.insert("response".into(), response.clone());
        }
        fields
    }
}

/// Writes `answer` on `approval` (as read just before) through `api`;
/// returns the Approval as stored, stamped by admission.
pub async fn write(
    api: &Api<Approval>,
    approval: &Approval,
    answer: &Answer,
) -> Result<Approval, kube::Error> {
    let name = approval.name_any();
    let fields = Value::Object(answer.fields());
    let params = PatchParams::default();
    if approval.spec.required_approvals() <= 1 {
        return api
            .patch(&name, &params, &Patch::Merge(json!({ "spec": fields })))
            .await;
    }
    match &approval.spec.answers {
        // Appended where the list ends when the API server applies it, so
        // two people answering at once both count.
        Some(_) => {
            let patch: json_patch::Patch = serde_json::from_value(json!([
                {"op": "add", "path": "/spec/answers/-", "value": fields}
            ]))
            .map_err(kube::Error::SerdeError)?;
            api.patch(&name, &params, &Patch::<()>::Json(patch)).await
        }
        // No list yet: this one, written only over the version read.
        None => {
            let patch = json!({
                "metadata": {"resourceVersion": approval.resource_version()},
                "spec": {"answers": [fields]},
            });
            api.patch(&name, &params, &Patch::Merge(patch)).await
        }
    }
}
