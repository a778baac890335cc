//! The HTTP side of admission: `POST /validate` and `POST /mutate` take an
//! AdmissionReview, hand its object to the rules of its kind and answer
//! with the verdict (and, for `/mutate`, the stamps as a JSON patch).

use std::sync::Arc;

use axum::extract::State;
use axum::routing::{get, post};
use axum::{Json, Router};
use kube::core::DynamicObject;
use kube::core::admission::{AdmissionRequest, AdmissionResponse, AdmissionReview, Operation};
use serde::de::DeserializeOwned;
use serde_json::Value;

use crate::api::{Approval, Flow, Run};

use super::{approvals, flows, runs};

/// What the rules say about one request.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Verdict {
    /// Let it through.
    Allow,
    /// Refuse it, saying why.
    Deny(String),
}

impl From<Result<(), String>> for Verdict {
    fn from(result: Result<(), String>) -> Self {
        match result {
            Ok(()) => Verdict::Allow,
            Err(message) => Verdict::Deny(message),
        }
    }
}

/// What every request is judged with.
pub struct Reviewer {
    /// A client with the controller's identity (Flows, Runs, access reviews).
    pub client: kube::Client,
    /// The user whose writes are the controller's (it creates Approvals).
    pub controller_user: String,
}

/// The routes the API server calls.
pub fn router(reviewer: Arc<Reviewer>) -> Router {
    Router::new()
        .route("/validate", post(validate))
        .route("/mutate", post(mutate))
        .route("/healthz", get(|| async { "ok" }))
        .with_state(reviewer)
}

type Review = Json<AdmissionReview<DynamicObject>>;

async fn validate(State(reviewer): State<Arc<Reviewer>>, Json(review): Review) -> Review {
    answer(review, |request| async move {
        let verdict = judge(&reviewer, &request).await;
        respond(&request, verdict, Vec::new())
    })
    .await
}

async fn mutate(State(_reviewer): State<Arc<Reviewer>>, Json(review): Review) -> Review {
    answer(review, |request| async move {
        match stamps(&request) {
            Ok(patch) => respond(&request, Verdict::Allow, patch),
            Err(message) => respond(&request, Verdict::Deny(message), Vec::new()),
        }
    })
    .await
}

async fn answer<F, Fut>(review: AdmissionReview<DynamicObject>, judge: F) -> Review
where
    F: FnOnce(AdmissionRequest<DynamicObject>) -> Fut,
    Fut: std::future::Future<Output = AdmissionResponse>,
{
    let request: Result<AdmissionRequest<DynamicObject>, _> = review.try_into();
    let response = match request {
        Ok(request) => judge(request).await,
        Err(e) => AdmissionResponse::invalid(e.to_string()),
    };
    Json(response.into_review())
}

fn respond(
    request: &AdmissionRequest<DynamicObject>,
    verdict: Verdict,
    patch: Vec<Value>,
) -> AdmissionResponse {
    let response = AdmissionResponse::from(request);
    match verdict {
        Verdict::Allow if patch.is_empty() => response,
        Verdict::Allow => {
            let parsed: Result<json_patch::Patch, _> = serde_json::from_value(Value::Array(patch));
            match parsed.map(|p| response.clone().with_patch(p)) {
                Ok(Ok(patched)) => patched,
                _ => deny(response, "the webhook could not write its stamps".into()),
            }
        }
        Verdict::Deny(message) => {
            tracing::info!(
                kind = %request.kind.kind,
                name = %request.name,
                user = request.user_info.username.as_deref().unwrap_or(""),
                %message,
                "admission refused"
            );
            deny(response, message)
        }
    }
}

fn deny(response: AdmissionResponse, message: String) -> AdmissionResponse {
    let mut response = response.deny(message);
    response.result.code = 403;
    response.result.reason = "Forbidden".into();
    response
}

/// The request's object (or old object) as `K`.
fn typed<K: DeserializeOwned>(object: Option<&DynamicObject>) -> Result<Option<K>, String> {
    object
        .map(|o| {
            serde_json::to_value(o)
                .and_then(serde_json::from_value)
                .map_err(|e| format!("the object cannot be read: {e}"))
        })
        .transpose()
}

fn user(request: &AdmissionRequest<DynamicObject>) -> &str {
    request.user_info.username.as_deref().unwrap_or("")
}

/// The validating verdict.
async fn judge(reviewer: &Reviewer, request: &AdmissionRequest<DynamicObject>) -> Verdict {
    let outcome = match request.kind.kind.as_str() {
        "Flow" => judge_flow(reviewer, request).await,
        "Run" => judge_run(reviewer, request).await,
        "Approval" => judge_approval(reviewer, request).await,
        _ => Ok(Verdict::Allow),
    };
    outcome.unwrap_or_else(Verdict::Deny)
}

async fn judge_flow(
    reviewer: &Reviewer,
    request: &AdmissionRequest<DynamicObject>,
) -> Result<Verdict, String> {
    let (Some(new), old) = (
        typed::<Flow>(request.object.as_ref())?,
        typed::<Flow>(request.old_object.as_ref())?,
    ) else {
        return Ok(Verdict::Allow);
    };
    let namespace = request.namespace.clone().unwrap_or_default();
    Ok(flows::review(
        &reviewer.client,
        &namespace,
        &request.name,
        &new.spec,
        old.as_ref().map(|o| &o.spec),
        &request.user_info,
    )
    .await)
}

async fn judge_run(
    reviewer: &Reviewer,
    request: &AdmissionRequest<DynamicObject>,
) -> Result<Verdict, String> {
    let Some(new) = typed::<Run>(request.object.as_ref())? else {
        return Ok(Verdict::Allow);
    };
    Ok(
        match (
            &request.operation,
            typed::<Run>(request.old_object.as_ref())?,
        ) {
            (Operation::Create, _) => {
                runs::review_create(&reviewer.client, &new, user(request)).await
            }
            (Operation::Update, Some(old)) => Verdict::from(runs::check_update(&old, &new)),
            _ => Verdict::Allow,
        },
    )
}

async fn judge_approval(
    reviewer: &Reviewer,
    request: &AdmissionRequest<DynamicObject>,
) -> Result<Verdict, String> {
    let Some(new) = typed::<Approval>(request.object.as_ref())? else {
        return Ok(Verdict::Allow);
    };
    Ok(
        match (
            &request.operation,
            typed::<Approval>(request.old_object.as_ref())?,
        ) {
            (Operation::Create, _) => Verdict::from(approvals::check_create(
                user(request),
                &reviewer.controller_user,
            )),
            (Operation::Update, Some(old)) => {
                approvals::review_update(&reviewer.client, &old, &new, &request.user_info).await
            }
            _ => Verdict::Allow,
        },
    )
}

/// The mutating stamps: a Run's creator, an Approval's decider.
fn stamps(request: &AdmissionRequest<DynamicObject>) -> Result<Vec<Value>, String> {
    match (request.kind.kind.as_str(), &request.operation) {
        ("Run", Operation::Create) => match typed::<Run>(request.object.as_ref())? {
            Some(run) => runs::stamp_creator(&run, user(request)),
            None => Ok(Vec::new()),
        },
        ("Approval", Operation::Update) => {
            let new = typed::<Approval>(request.object.as_ref())?;
            let old = typed::<Approval>(request.old_object.as_ref())?;
            Ok(match (old, new) {
                (Some(old), Some(new)) => {
                    let now = jiff::Timestamp::now()
                        .round(jiff::Unit::Second)
                        .unwrap_or_else(|_| jiff::Timestamp::now());
                    approvals::stamp(&old.spec, &new.spec, &request.user_info, &now.to_string())
                }
                _ => Vec::new(),
            })
        }
        _ => Ok(Vec::new()),
    }
}
