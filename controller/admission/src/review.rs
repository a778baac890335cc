//! The HTTP side of admission: `POST /validate` and `POST /mutate` take an
//! AdmissionReview, hand it to the rules of its kind ([`Admit`]) and answer
//! with the verdict (and, for `/mutate`, the stamps as a JSON patch).

use std::sync::Arc;

use axum::body::Bytes;
use axum::extract::{DefaultBodyLimit, State};
use axum::routing::{get, post};
use axum::{Json, Router};
use k8s_openapi::api::authentication::v1::UserInfo;
use kube::core::admission::{AdmissionRequest, AdmissionResponse, AdmissionReview};
use kube::core::{DynamicObject, Status};
use serde::Deserialize;
use serde_json::Value;

use coxswain_core::flow::{MAX_JSON_DEPTH, text_depth};

use coxswain_core::api::{Approval, Flow, Run};

use super::admit::{Admit, Refusal, Request, Reviewer};
use super::reserved;

/// The most a review may weigh. The API server takes objects of up to
/// 3 MiB and an update's review carries the object twice (new and old);
/// axum's default of 2 MB would refuse updates of large Runs.
const BODY_LIMIT: usize = 8 << 20;

/// The routes the API server calls.
pub fn router(reviewer: Arc<Reviewer>) -> Router {
    Router::new()
        .route("/validate", post(validate))
        .route("/mutate", post(mutate))
        .route("/healthz", get(|| async { "ok" }))
        .layer(DefaultBodyLimit::max(BODY_LIMIT))
        .with_state(reviewer)
}

type Review = Json<AdmissionReview<DynamicObject>>;

async fn validate(State(reviewer): State<Arc<Reviewer>>, body: Bytes) -> Review {
    let controller = reviewer.controller_user.clone();
    answer(&body, &controller, |request| async move {
        let verdict = judge(&reviewer, &request).await;
        let mut response = respond(&request, verdict.map(|()| Vec::new()));
        let warnings = warnings(&request);
        if response.allowed && !warnings.is_empty() {
            response.warnings = Some(warnings);
        }
        response
    })
    .await
}

async fn mutate(State(reviewer): State<Arc<Reviewer>>, body: Bytes) -> Review {
    let controller = reviewer.controller_user.clone();
    answer(&body, &controller, |request| async move {
        let stamps = stamps(&reviewer, &request).await;
        respond(&request, stamps)
    })
    .await
}

/// A review as read from the API server's request body.
#[derive(Debug)]
pub enum Read {
    /// Read whole: judged by the rules of its kind.
    Request(Box<AdmissionRequest<DynamicObject>>),
    /// Nested deeper than serde_json reads (128 levels): only who asks
    /// about what could be read, and how deep the text nests.
    TooDeep {
        /// What little could be read.
        request: Shallow,
        /// How deeply the object nests (the review's own two levels off).
        depth: usize,
    },
    /// Not an AdmissionReview.
    Unreadable(String),
}

/// The few fields of a review that say who asks about what, read from a
/// body too deep to read whole. serde_json skips the fields not named here
/// without recursion, so a review of any depth reads this far.
#[derive(Debug, Clone, Deserialize)]
pub struct Shallow {
    /// The request.
    pub request: ShallowRequest,
}

/// See [`Shallow`].
#[derive(Debug, Clone, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ShallowRequest {
    /// The request's uid, which the answer must carry.
    pub uid: String,
    /// The kind of the object.
    pub kind: ShallowKind,
    /// The object's name (empty for `generateName`).
    #[serde(default)]
    pub name: String,
    /// Who asks.
    #[serde(default)]
    pub user_info: UserInfo,
}

/// See [`Shallow`].
#[derive(Debug, Clone, Deserialize)]
pub struct ShallowKind {
    /// `Run`, `Flow`, `Approval`.
    pub kind: String,
}

/// Reads a review from the request body.
pub fn read(body: &[u8]) -> Read {
    let error = match serde_json::from_slice::<AdmissionReview<DynamicObject>>(body) {
        Ok(review) => {
            let request: Result<AdmissionRequest<DynamicObject>, _> = review.try_into();
            return match request {
                Ok(request) => Read::Request(Box::new(request)),
                Err(e) => Read::Unreadable(e.to_string()),
            };
        }
        Err(e) => e,
    };
    let depth = text_depth(body);
    if depth >= SERDE_DEPTH
        && let Ok(shallow) = serde_json::from_slice::<Shallow>(body)
    {
        return Read::TooDeep {
            request: shallow,
            depth: depth.saturating_sub(2),
        };
    }
    Read::Unreadable(format!("the AdmissionReview cannot be read: {error}"))
}

/// The nesting at which serde_json stops reading.
const SERDE_DEPTH: usize = 128;

/// The answer to a review nested too deeply to read whole: the
/// controller's own writes pass (they are not checked for content; a Run
/// made deep before this limit existed must still be updated and finished),
/// anyone else's are refused, saying how deep and what is allowed.
pub fn too_deep(
    request: &ShallowRequest,
    depth: usize,
    controller_user: &str,
) -> AdmissionResponse {
    let mut response = AdmissionResponse::invalid("");
    response.uid = request.uid.clone();
    let user = request.user_info.username.as_deref().unwrap_or("");
    if user == controller_user {
        response.allowed = true;
        response.result = Status::success();
        return response;
    }
    let kind = &request.kind.kind;
    let what = if request.name.is_empty() {
        format!("this {kind}")
    } else {
        format!("{kind} {}", request.name)
    };
    let hint = if kind == "Run" {
        format!("; a Run's input may be nested at most {MAX_JSON_DEPTH} levels deep")
    } else {
        String::new()
    };
    tracing::info!(%kind, name = %request.name, user, depth, "admission refused an object too deep to read");
    deny(
        response,
        format!(
            "{what} nests arrays and objects {depth} levels deep, deeper than Coxswain reads{hint}"
        ),
    )
}

async fn answer<F, Fut>(body: &[u8], controller_user: &str, judge: F) -> Review
where
    F: FnOnce(AdmissionRequest<DynamicObject>) -> Fut,
    Fut: std::future::Future<Output = AdmissionResponse>,
{
    let response = match read(body) {
        Read::Request(request) => judge(*request).await,
        Read::TooDeep { request, depth } => too_deep(&request.request, depth, controller_user),
        Read::Unreadable(message) => AdmissionResponse::invalid(message),
    };
    Json(response.into_review())
}

/// The answer: allowed with the stamps (`Ok`, a JSON patch, empty when
/// nothing is stamped) or refused saying why.
fn respond(
    request: &AdmissionRequest<DynamicObject>,
    verdict: Result<Vec<Value>, Refusal>,
) -> AdmissionResponse {
    let response = AdmissionResponse::from(request);
    match verdict {
        Ok(patch) if patch.is_empty() => response,
        Ok(patch) => {
            let parsed: Result<json_patch::Patch, _> = serde_json::from_value(Value::Array(patch));
            match parsed.map(|p| response.clone().with_patch(p)) {
                Ok(Ok(patched)) => patched,
                _ => deny(response, "the webhook could not write its stamps".into()),
            }
        }
        Err(refusal) => {
            let message = refusal.to_string();
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

/// The validating verdict: a status write by the kind-blind rule, the
/// rest by the rules of its kind.
async fn judge(
    reviewer: &Reviewer,
    request: &AdmissionRequest<DynamicObject>,
) -> Result<(), Refusal> {
    if request.sub_resource.as_deref() == Some("status") {
        return status_verdict(request, &reviewer.controller_user);
    }
    let asked = Request::new(request);
    match request.kind.kind.as_str() {
        "Flow" => Flow::review(reviewer, &asked).await,
        "Run" => Run::review(reviewer, &asked).await,
        "Approval" => Approval::review(reviewer, &asked).await,
        _ => Ok(()),
    }
}

/// The warnings of the rules of the object's kind on a create or update
/// (none on a status write, which only the controller makes).
fn warnings(request: &AdmissionRequest<DynamicObject>) -> Vec<String> {
    if request.sub_resource.is_some() {
        return Vec::new();
    }
    let asked = Request::new(request);
    match request.kind.kind.as_str() {
        "Flow" => Flow::warnings(&asked),
        "Run" => Run::warnings(&asked),
        "Approval" => Approval::warnings(&asked),
        _ => Vec::new(),
    }
}

/// A write to a status: the controller's alone. Decided before the object
/// is read, so the controller's writes pass whatever its status holds.
pub fn status_verdict(
    request: &AdmissionRequest<DynamicObject>,
    controller_user: &str,
) -> Result<(), Refusal> {
    let user = request.user_info.username.as_deref().unwrap_or("");
    if user == controller_user {
        Ok(())
    } else {
        Err(reserved::status_refusal(&request.kind.kind, &request.name, user).into())
    }
}

/// The mutating stamps, by the rules of the object's kind: a Run's
/// creator, an Approval's decider.
async fn stamps(
    reviewer: &Reviewer,
    request: &AdmissionRequest<DynamicObject>,
) -> Result<Vec<Value>, Refusal> {
    let asked = Request::new(request);
    match request.kind.kind.as_str() {
        "Flow" => Flow::stamp(reviewer, &asked).await,
        "Run" => Run::stamp(reviewer, &asked).await,
        "Approval" => Approval::stamp(reviewer, &asked).await,
        _ => Ok(Vec::new()),
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;
    use crate::admit::typed;
    use crate::runs;

    /// An AdmissionReview as the API server sends it, creating Run `r1` as
    /// `user` with `input`.
    fn review_text(user: &str, input: &str, sub_resource: Option<&str>) -> String {
        let mut request = json!({
            "uid": "4264aaf7-0000-4000-8000-000000000001",
            "kind": {"group": "coxswain.dev", "version": "v1alpha1", "kind": "Run"},
            "resource": {"group": "coxswain.dev", "version": "v1alpha1", "resource": "runs"},
            "name": "r1",
            "namespace": "ns",
            "operation": "CREATE",
            "userInfo": {"username": user, "groups": ["system:authenticated"]},
            "object": {
                "apiVersion": "coxswain.dev/v1alpha1", "kind": "Run",
                "metadata": {"name": "r1", "namespace": "ns"},
                "spec": {"flowRef": {"name": "f"}, "input": "INPUT"}
            },
            "oldObject": null,
            "dryRun": false
        });
        if let Some(sub) = sub_resource {
            request["subResource"] = json!(sub);
            request["operation"] = json!("UPDATE");
        }
        json!({"apiVersion": "admission.k8s.io/v1", "kind": "AdmissionReview", "request": request})
            .to_string()
            .replace("\"INPUT\"", input)
    }

    /// `{"a": {"a": … 1 …}}`, `levels` objects deep.
    fn nested(levels: usize) -> String {
        format!("{}1{}", r#"{"a":"#.repeat(levels), "}".repeat(levels))
    }

    #[test]
    fn a_review_of_an_input_too_deep_to_read_is_refused_saying_so() {
        let body = review_text("eve", &nested(200), None);
        let Read::TooDeep { request, depth } = read(body.as_bytes()) else {
            panic!("read whole or not at all");
        };
        assert_eq!(depth, 202, "the Run (1), its spec (2), its input (200)");
        let response = too_deep(&request.request, depth, "ctl");
        assert_eq!(response.uid, "4264aaf7-0000-4000-8000-000000000001");
        assert!(!response.allowed);
        assert_eq!(response.result.code, 403);
        assert_eq!(
            response.result.message,
            "Run r1 nests arrays and objects 202 levels deep, deeper than Coxswain reads; a Run's input may be nested at most 64 levels deep"
        );
        let answer = serde_json::to_value(response.into_review()).expect("json");
        assert_eq!(answer["apiVersion"], "admission.k8s.io/v1");
        assert_eq!(answer["response"]["allowed"], false);
        // The controller's own writes pass, whatever they hold.
        let mine = review_text("ctl", &nested(200), None);
        let Read::TooDeep { request, depth } = read(mine.as_bytes()) else {
            panic!("too deep");
        };
        assert!(too_deep(&request.request, depth, "ctl").allowed);
    }

    #[test]
    fn inputs_between_the_limit_and_the_parsers_are_read_whole() {
        for levels in [65, 100, 120] {
            let body = review_text("eve", &nested(levels), None);
            let Read::Request(request) = read(body.as_bytes()) else {
                panic!("{levels} levels read whole");
            };
            let run: Run = typed(request.object.as_ref())
                .expect("typed")
                .expect("a run");
            let error = runs::check_created(
                &{
                    let mut run = run;
                    run.metadata.annotations = Some(
                        [(
                            coxswain_kube::names::CREATED_BY_ANNOTATION.to_string(),
                            "eve".to_string(),
                        )]
                        .into(),
                    );
                    run
                },
                None,
                "eve",
            )
            .expect_err("too deep");
            assert_eq!(
                error.to_string(),
                format!(
                    "the input nests arrays and objects {levels} levels deep; a Run's input may be nested at most 64 levels deep, so that its record, which wraps what steps make of the input a few levels deeper, stays readable"
                )
            );
        }
        assert!(matches!(read(b"{\"kind\": 3}"), Read::Unreadable(_)));
    }

    #[test]
    fn only_the_controller_writes_a_status() {
        let body = review_text("eve", "{}", Some("status"));
        let Read::Request(request) = read(body.as_bytes()) else {
            panic!("read");
        };
        assert_eq!(
            status_verdict(&request, "ctl").map_err(|e| e.to_string()),
            Err(
                "the status of Run r1 is written by the Coxswain controller only; `eve` may not write it (the controller acts on what the status records)".into()
            )
        );
        let body = review_text("ctl", "{}", Some("status"));
        let Read::Request(request) = read(body.as_bytes()) else {
            panic!("read");
        };
        assert!(status_verdict(&request, "ctl").is_ok());
    }

    /// A Flow whose input has the key `"false"` (a bare `n` read by
    /// kubectl) is warned about; a Run, or a status write, is not.
    #[test]
    fn a_flow_with_a_boolean_looking_key_is_warned_about() {
        let flow = json!({
            "apiVersion": "admission.k8s.io/v1", "kind": "AdmissionReview",
            "request": {
                "uid": "4264aaf7-0000-4000-8000-000000000002",
                "kind": {"group": "coxswain.dev", "version": "v1alpha1", "kind": "Flow"},
                "resource": {"group": "coxswain.dev", "version": "v1alpha1", "resource": "flows"},
                "name": "f", "namespace": "ns", "operation": "CREATE",
                "userInfo": {"username": "ann"},
                "object": {
                    "apiVersion": "coxswain.dev/v1alpha1", "kind": "Flow",
                    "metadata": {"name": "f", "namespace": "ns"},
                    "spec": {"steps": [{"key": "a", "join": {}, "input": {"false": 1, "ok": 2}}]}
                },
                "oldObject": null, "dryRun": false
            }
        })
        .to_string();
        let Read::Request(request) = read(flow.as_bytes()) else {
            panic!("read");
        };
        assert_eq!(
            warnings(&request),
            [
                "spec.steps[0].input: the key \"false\" is what kubectl makes of a bare n, no or off (YAML 1.1 reads it as a boolean); if you meant the word, quote it in the YAML, as in \"no\":"
            ]
        );
        let run = review_text("eve", r#"{"false": 1}"#, None);
        let Read::Request(request) = read(run.as_bytes()) else {
            panic!("read");
        };
        assert!(warnings(&request).is_empty());
    }
}
