//! The writes only the controller makes: the `coxswain.dev/` labels and
//! annotations of Runs and Approvals, and the status of Flows, Runs and
//! Approvals. The controller acts on both — a chat label makes the bot post
//! a Run's outcome to the room its annotations name, `run-uid` ties an
//! Approval to its run, a Run's status is the status the next step is
//! started from — so anyone else who could write them could steer it.
//! RBAC cannot say this (whoever may create a Run may label it, and `*` on
//! `coxswain.dev` includes `runs/status`), so admission does.

use std::collections::BTreeMap;

use kube::api::ObjectMeta;

use coxswain_kube::names::is_reserved;

pub use super::refusal::ReservedRefusal;
use coxswain_kube::names::CREATED_BY_ANNOTATION;

/// Refuses a change to a reserved label or annotation by `user`, who is not
/// the controller: setting one on create (`old` is `None`), or setting,
/// changing or removing one on update. `coxswain.dev/created-by` has its
/// own rule (stamped from the request, never changed) and is left to it.
pub fn check_metadata(
    kind: &str,
    old: Option<&ObjectMeta>,
    new: &ObjectMeta,
    user: &str,
) -> Result<(), ReservedRefusal> {
    let name = new.name.as_deref().unwrap_or_default();
    let what = if name.is_empty() {
        format!("a {kind}")
    } else {
        format!("{kind} {name}")
    };
    let empty = BTreeMap::new();
    let sides = |meta: Option<&ObjectMeta>| {
        (
            meta.and_then(|m| m.labels.as_ref())
                .unwrap_or(&empty)
                .clone(),
            meta.and_then(|m| m.annotations.as_ref())
                .unwrap_or(&empty)
                .clone(),
        )
    };
    let (old_labels, old_annotations) = sides(old);
    let (new_labels, new_annotations) = sides(Some(new));
    for (sort, before, after) in [
        ("label", &old_labels, &new_labels),
        ("annotation", &old_annotations, &new_annotations),
    ] {
        if let Some((key, change)) = changed(before, after) {
            let verb = match (old.is_some(), change) {
                (false, _) | (true, Change::Set) => "set it",
                (true, Change::Changed) => "change it",
                (true, Change::Removed) => "remove it",
            };
            return Err(ReservedRefusal::Key {
                sort,
                key: key.to_string(),
                user: user.to_string(),
                verb,
                what: what.clone(),
            });
        }
    }
    Ok(())
}

/// How a reserved key differs.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Change {
    Set,
    Changed,
    Removed,
}

/// The first reserved key whose value differs between `before` and `after`.
fn changed<'a>(
    before: &'a BTreeMap<String, String>,
    after: &'a BTreeMap<String, String>,
) -> Option<(&'a str, Change)> {
    let keys = before.keys().chain(after.keys());
    let mut reserved: Vec<&str> = keys
        .map(String::as_str)
        .filter(|k| is_reserved(k) && *k != CREATED_BY_ANNOTATION)
        .collect();
    reserved.sort_unstable();
    reserved.dedup();
    reserved
        .into_iter()
        .find_map(|key| match (before.get(key), after.get(key)) {
            (None, Some(_)) => Some((key, Change::Set)),
            (Some(_), None) => Some((key, Change::Removed)),
            (Some(a), Some(b)) if a != b => Some((key, Change::Changed)),
            _ => None,
        })
}

/// Refuses a write to the status of `kind` `name` by `user`, who is not the
/// controller.
pub fn status_refusal(kind: &str, name: &str, user: &str) -> ReservedRefusal {
    ReservedRefusal::Status {
        kind: kind.to_string(),
        name: name.to_string(),
        user: user.to_string(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::test_support::refused;

    fn meta(labels: &[(&str, &str)], annotations: &[(&str, &str)]) -> ObjectMeta {
        let map = |pairs: &[(&str, &str)]| {
            Some(
                pairs
                    .iter()
                    .map(|(k, v)| (k.to_string(), v.to_string()))
                    .collect(),
            )
        };
        ObjectMeta {
            name: Some("r1".into()),
            labels: map(labels),
            annotations: map(annotations),
            ..Default::default()
        }
    }

    #[test]
    fn a_person_sets_no_reserved_key_on_create() {
        let chat = meta(&[("coxswain.dev/chat", "slack")], &[]);
        let error = refused(check_metadata("Run", None, &chat, "eve"), "chat label");
        assert_eq!(
            error,
            "the label `coxswain.dev/chat` is written by the Coxswain controller, which acts on it; `eve` may not set it on Run r1 (labels and annotations starting with `coxswain.dev/` are the controller's)"
        );
        let room = meta(&[], &[("coxswain.dev/chat-room", "!room:example")]);
        let error = refused(check_metadata("Run", None, &room, "eve"), "chat room");
        assert!(
            error.starts_with("the annotation `coxswain.dev/chat-room` is written by"),
            "{error}"
        );
        let honest = meta(
            &[("team", "a")],
            &[("note", "x"), (CREATED_BY_ANNOTATION, "eve")],
        );
        assert_eq!(check_metadata("Run", None, &honest, "eve"), Ok(()));
    }

    #[test]
    fn a_person_keeps_reserved_keys_as_the_controller_wrote_them() {
        let old = meta(
            &[("coxswain.dev/run-uid", "uid-a"), ("team", "a")],
            &[("coxswain.dev/since", "100")],
        );
        let relabelled = meta(
            &[("coxswain.dev/run-uid", "uid-b"), ("team", "a")],
            &[("coxswain.dev/since", "100")],
        );
        let error = refused(
            check_metadata("Approval", Some(&old), &relabelled, "eve"),
            "relabelled",
        );
        assert!(
            error.contains("`coxswain.dev/run-uid`")
                && error.contains("may not change it on Approval r1"),
            "{error}"
        );
        let removed = meta(&[("team", "a")], &[("coxswain.dev/since", "100")]);
        let error = refused(
            check_metadata("Approval", Some(&old), &removed, "eve"),
            "removed",
        );
        assert!(error.contains("may not remove it"), "{error}");
        let added = meta(
            &[("coxswain.dev/run-uid", "uid-a"), ("team", "a")],
            &[
                ("coxswain.dev/since", "100"),
                ("coxswain.dev/scheduled-at", "x"),
            ],
        );
        let error = refused(check_metadata("Run", Some(&old), &added, "eve"), "added");
        assert!(
            error.contains("annotation `coxswain.dev/scheduled-at`")
                && error.contains("may not set it"),
            "{error}"
        );
        let other = meta(
            &[("coxswain.dev/run-uid", "uid-a"), ("team", "b")],
            &[("coxswain.dev/since", "100"), ("note", "y")],
        );
        assert_eq!(
            check_metadata("Approval", Some(&old), &other, "eve"),
            Ok(())
        );
    }
}
