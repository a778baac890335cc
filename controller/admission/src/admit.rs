//! The one shape of admission's rules: each kind (Flow, Run, Approval)
//! implements [`Admit`] with the same two entries — [`Admit::review`], the
//! validating check, and [`Admit::stamp`], the mutating stamps — so the
//! HTTP side ([`super::review`]) hands every request to its kind the same
//! way, and a rule refuses with a typed [`Refusal`] whose text is the
//! message the user reads.

use std::future::Future;

use k8s_openapi::api::authentication::v1::UserInfo;
use k8s_openapi::api::authorization::v1::{
    ResourceAttributes, SubjectAccessReview, SubjectAccessReviewSpec,
};
use kube::Api;
use kube::api::PostParams;
use kube::core::DynamicObject;
use kube::core::admission::{AdmissionRequest, Operation};
use serde::de::DeserializeOwned;
use serde_json::Value;

pub use super::refusal::{CannotAsk, Refusal};

/// What every request is judged with.
pub struct Reviewer {
    /// A client with the controller's identity (Flows, Runs, access reviews).
    pub client: kube::Client,
    /// The user whose writes are the controller's (it creates Approvals).
    pub controller_user: String,
    /// Whether the controller has a records database: without one, flows
    /// that save or look up are refused.
    pub records: bool,
}

/// One request as a kind's rules read it: who asks, what for, and the
/// object (and the old one, on update), read as the kind's type when the
/// rule asks for it — a rule that needs no object never fails on one that
/// does not read.
pub struct Request<'a>(&'a AdmissionRequest<DynamicObject>);

impl<'a> Request<'a> {
    /// The request the API server sent.
    pub fn new(request: &'a AdmissionRequest<DynamicObject>) -> Self {
        Request(request)
    }

    /// Create or update (the only operations the webhooks are registered
    /// for).
    pub fn operation(&self) -> &Operation {
        &self.0.operation
    }

    /// The object's name (empty for `generateName`).
    pub fn name(&self) -> &str {
        &self.0.name
    }

    /// The object's namespace.
    pub fn namespace(&self) -> String {
        self.0.namespace.clone().unwrap_or_default()
    }

    /// Who asks.
    pub fn user_info(&self) -> &UserInfo {
        &self.0.user_info
    }

    /// Who asks, by user name (empty when the API server gave none).
    pub fn user(&self) -> &str {
        self.0.user_info.username.as_deref().unwrap_or("")
    }

    /// The object being written, as `K`.
    pub fn object<K: DeserializeOwned>(&self) -> Result<Option<K>, Refusal> {
        typed(self.0.object.as_ref())
    }

    /// The object as stored before this update, as `K`.
    pub fn old_object<K: DeserializeOwned>(&self) -> Result<Option<K>, Refusal> {
        typed(self.0.old_object.as_ref())
    }

    /// The object and the old one (on update) as `K`, the old one read
    /// only when there is an object; `None` when there is none.
    pub fn objects<K: DeserializeOwned>(&self) -> Result<Option<(K, Option<K>)>, Refusal> {
        let Some(new) = self.object::<K>()? else {
            return Ok(None);
        };
        Ok(Some((new, self.old_object::<K>()?)))
    }
}

/// `object` as `K`.
pub fn typed<K: DeserializeOwned>(object: Option<&DynamicObject>) -> Result<Option<K>, Refusal> {
    object
        .map(|o| {
            serde_json::to_value(o)
                .and_then(serde_json::from_value)
                .map_err(Refusal::Unreadable)
        })
        .transpose()
}

/// Whether `user` may `get` the object `name` of `resource` (a plural of
/// the core group or of `coxswain.dev`) in `namespace`: one
/// SubjectAccessReview, so the API server's RBAC (and any other
/// authorizer) answers, not a rule of ours.
pub async fn may_get(
    client: &kube::Client,
    user: &UserInfo,
    resource: &str,
    namespace: &str,
    name: &str,
) -> Result<bool, kube::Error> {
    let group = match resource {
        "runs" | "flows" | "approvals" => Some("coxswain.dev".to_string()),
        _ => None,
    };
    let review = SubjectAccessReview {
        spec: SubjectAccessReviewSpec {
            user: user.username.clone(),
            groups: user.groups.clone(),
            uid: user.uid.clone(),
            extra: user.extra.clone(),
            resource_attributes: Some(ResourceAttributes {
                namespace: Some(namespace.to_string()),
                verb: Some("get".into()),
                group,
                resource: Some(resource.into()),
                name: Some(name.to_string()),
                ..Default::default()
            }),
            ..Default::default()
        },
        ..Default::default()
    };
    let api: Api<SubjectAccessReview> = Api::all(client.clone());
    let answer = api.create(&PostParams::default(), &review).await?;
    Ok(answer.status.is_some_and(|s| s.allowed))
}

/// The admission rules of one kind. Implemented by [`coxswain_core::api::Flow`],
/// [`coxswain_core::api::Run`] and [`coxswain_core::api::Approval`], each in
/// the module of its kind.
pub trait Admit {
    /// The validating check of a create or update (a status write is
    /// judged before, by the kind-blind rule of [`super::reserved`]).
    fn review(
        reviewer: &Reviewer,
        request: &Request<'_>,
    ) -> impl Future<Output = Result<(), Refusal>> + Send;

    /// The mutating stamps, as a JSON patch (empty: nothing to stamp).
    fn stamp(
        reviewer: &Reviewer,
        request: &Request<'_>,
    ) -> impl Future<Output = Result<Vec<Value>, Refusal>> + Send;

    /// Warnings on an admitted write, which kubectl prints as `Warning:`:
    /// what is allowed but most likely not what the user typed. None by
    /// default.
    fn warnings(_request: &Request<'_>) -> Vec<String> {
        Vec::new()
    }
}
