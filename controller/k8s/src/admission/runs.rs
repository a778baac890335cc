//! Run admission: a Run starts a valid Flow with input that fits it, its
//! spec never changes after creation except `cancel`, and who created it is
//! recorded by the webhook (the `coxswain.dev/created-by` annotation) from
//! the request, so no client can forge it or change it later.

use kube::{Api, ResourceExt};
use serde_json::{Value, json};

use coxswain_core::api::{Flow, Run};
use coxswain_core::flow::{MAX_JSON_DEPTH, StartProblem, check_start, json_depth};

use super::review::Verdict;

/// The annotation naming the user who created the Run, written by the
/// mutating webhook; approvals read it to refuse self-approval.
pub const CREATED_BY_ANNOTATION: &str = "coxswain.dev/created-by";

/// The creator stamp for a Run being created by `user`: a JSON patch adding
/// the annotation, or a refusal when the client wrote another name.
pub fn stamp_creator(run: &Run, user: &str) -> Result<Vec<Value>, String> {
    match run.annotations().get(CREATED_BY_ANNOTATION) {
        Some(given) if given != user => Err(format!(
            "the annotation {CREATED_BY_ANNOTATION} is written by Coxswain from who creates the Run; `{given}` is not you (`{user}`): leave it out"
        )),
        Some(_) => Ok(Vec::new()),
        None if run.metadata.annotations.is_none() => Ok(vec![json!({
            "op": "add", "path": "/metadata/annotations",
            "value": {CREATED_BY_ANNOTATION: user}
        })]),
        None => Ok(vec![json!({
            "op": "add",
            "path": format!("/metadata/annotations/{}", CREATED_BY_ANNOTATION.replace('~', "~0").replace('/', "~1")),
            "value": user
        })]),
    }
}

/// Checks a Run being created: who created it is recorded truthfully, its
/// input nests no deeper than [`MAX_JSON_DEPTH`], its Flow exists and is
/// valid, and its input fits the Flow's schema.
pub fn check_created(run: &Run, flow: Option<&Flow>, user: &str) -> Result<(), String> {
    match run.annotations().get(CREATED_BY_ANNOTATION) {
        Some(by) if by == user => {}
        _ => {
            return Err(format!(
                "the annotation {CREATED_BY_ANNOTATION} must name the user creating the Run (`{user}`); Coxswain's mutating webhook writes it"
            ));
        }
    }
    if let Some(input) = &run.spec.input {
        let depth = json_depth(input);
        if depth > MAX_JSON_DEPTH {
            return Err(format!(
                "the input nests arrays and objects {depth} levels deep; a Run's input may be nested at most {MAX_JSON_DEPTH} levels deep, so that its record, which wraps what steps make of the input a few levels deeper, stays readable"
            ));
        }
    }
    let flow_name = &run.spec.flow_ref.name;
    let Some(flow) = flow else {
        return Err(format!(
            "there is no Flow `{flow_name}` in namespace `{}`; apply the Flow before its Runs",
            run.namespace().unwrap_or_default()
        ));
    };
    match check_start(&flow.spec, run.spec.input.as_ref()) {
        Ok(()) => {}
        Err(problem @ StartProblem::Invalid(_)) => {
            return Err(format!(
                "the Flow `{flow_name}` is not valid, so it cannot run: {}",
                problem.list()
            ));
        }
        Err(problem @ StartProblem::Input(_)) => {
            return Err(format!(
                "the input does not fit the Flow `{flow_name}`: {}",
                problem.list()
            ));
        }
    }
    Ok(())
}

/// Checks a Run being updated: only `cancel` may change in its spec (and
/// only to true), and its creator stays as recorded.
pub fn check_update(old: &Run, new: &Run) -> Result<(), String> {
    let before = old.annotations().get(CREATED_BY_ANNOTATION);
    let after = new.annotations().get(CREATED_BY_ANNOTATION);
    if before != after {
        return Err(format!(
            "the annotation {CREATED_BY_ANNOTATION} records who created the Run and never changes (it was {}, the update makes it {})",
            shown(before),
            shown(after)
        ));
    }
    let mut changed = Vec::new();
    if old.spec.flow_ref != new.spec.flow_ref {
        changed.push("flowRef");
    }
    if old.spec.input != new.spec.input {
        changed.push("input");
    }
    if !changed.is_empty() {
        return Err(format!(
            "a Run's spec does not change after it is created, except `cancel`; this update changes {} (create a new Run instead)",
            changed.join(" and ")
        ));
    }
    if old.spec.cancel && !new.spec.cancel {
        return Err("a cancelled Run stays cancelled; create a new Run instead".into());
    }
    Ok(())
}

fn shown(value: Option<&String>) -> String {
    value.map_or("absent".into(), |v| format!("`{v}`"))
}

/// Checks a Run being created, reading its Flow.
pub async fn review_create(client: &kube::Client, run: &Run, user: &str) -> Verdict {
    let namespace = run.namespace().unwrap_or_default();
    let flows: Api<Flow> = Api::namespaced(client.clone(), &namespace);
    let flow = match flows.get_opt(&run.spec.flow_ref.name).await {
        Ok(flow) => flow,
        Err(e) => {
            return Verdict::Deny(format!(
                "cannot read the Flow `{}`: {e}",
                run.spec.flow_ref.name
            ));
        }
    };
    Verdict::from(check_created(run, flow.as_ref(), user))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn run(json: Value) -> Run {
        serde_json::from_value(json).expect("run")
    }

    fn flow() -> Flow {
        serde_json::from_value(json!({
            "apiVersion": "coxswain.dev/v1alpha1", "kind": "Flow",
            "metadata": {"name": "f", "namespace": "ns"},
            "spec": {
                "input": {"type": "object", "required": ["brief"], "properties": {"brief": {"type": "string"}}},
                "steps": [{"key": "a", "agent": {"prompt": "x"}}]
            }
        }))
        .expect("flow")
    }

    fn created_by(user: &str, input: Value) -> Run {
        run(json!({
            "apiVersion": "coxswain.dev/v1alpha1", "kind": "Run",
            "metadata": {"name": "r", "namespace": "ns", "annotations": {CREATED_BY_ANNOTATION: user}},
            "spec": {"flowRef": {"name": "f"}, "input": input}
        }))
    }

    #[test]
    fn a_run_needs_its_flow_and_input_that_fits() {
        let ok = created_by("ana", json!({"brief": "hi"}));
        assert_eq!(check_created(&ok, Some(&flow()), "ana"), Ok(()));
        let missing = check_created(&ok, None, "ana").expect_err("no flow");
        assert!(
            missing.contains("no Flow `f` in namespace `ns`"),
            "{missing}"
        );
        let bad = created_by("ana", json!({"brief": 3}));
        let error = check_created(&bad, Some(&flow()), "ana").expect_err("bad input");
        assert!(
            error
                .contains("the input does not fit the Flow `f`: input.brief: expected string, got"),
            "{error}"
        );
    }

    #[test]
    fn the_creator_is_stamped_and_cannot_be_forged() {
        let bare = run(json!({
            "apiVersion": "coxswain.dev/v1alpha1", "kind": "Run",
            "metadata": {"name": "r"}, "spec": {"flowRef": {"name": "f"}}
        }));
        let patch = stamp_creator(&bare, "ana").expect("stamped");
        assert_eq!(patch[0]["value"][CREATED_BY_ANNOTATION], "ana");
        let forged = created_by("boss", json!({}));
        let error = stamp_creator(&forged, "ana").expect_err("forged");
        assert!(error.contains("`boss` is not you (`ana`)"), "{error}");
        let error = check_created(&forged, Some(&flow()), "ana").expect_err("forged");
        assert!(
            error.contains("must name the user creating the Run"),
            "{error}"
        );
        let mut other = created_by("ana", json!({"brief": "x"}));
        other.annotations_mut().insert("team".into(), "a".into());
        let patch = stamp_creator(&run(json!({
            "apiVersion": "coxswain.dev/v1alpha1", "kind": "Run",
            "metadata": {"name": "r", "annotations": {"team": "a"}}, "spec": {"flowRef": {"name": "f"}}
        })), "ana").expect("stamped");
        assert_eq!(
            patch[0]["path"],
            "/metadata/annotations/coxswain.dev~1created-by"
        );
    }

    #[test]
    fn only_cancel_changes_after_creation() {
        let old = created_by("ana", json!({"brief": "a"}));
        let mut cancelled = old.clone();
        cancelled.spec.cancel = true;
        assert_eq!(check_update(&old, &cancelled), Ok(()));
        let error = check_update(&cancelled, &old).expect_err("uncancel");
        assert!(error.contains("stays cancelled"), "{error}");
        let mut edited = old.clone();
        edited.spec.input = Some(json!({"brief": "b"}));
        let error = check_update(&old, &edited).expect_err("edited");
        assert!(error.contains("changes input"), "{error}");
        let mut moved = old.clone();
        moved
            .annotations_mut()
            .insert(CREATED_BY_ANNOTATION.into(), "boss".into());
        let error = check_update(&old, &moved).expect_err("moved");
        assert!(error.contains("never changes (it was `ana`"), "{error}");
    }
}
