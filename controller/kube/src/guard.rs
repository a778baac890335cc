//! Watching a kind without letting one object stop the watch for all.
//!
//! kube's watcher lists every object of a kind in one response and decodes
//! it in one go: a single object that does not decode fails the whole list,
//! so nothing of that kind is reconciled anywhere — not after a restart, a
//! failover or a relist — until someone deletes it. kube's own
//! [`DeserializeGuard`](kube::core::DeserializeGuard) catches an object of
//! the wrong shape, but it first copies the object into a generic value, and
//! that copy stops where serde_json stops: at 128 levels of nesting. A Run
//! whose status holds a value nested that deep (written by anyone who may
//! patch `runs/status`, or by an older controller) failed every list of Runs
//! with "recursion limit exceeded".
//!
//! [`Guarded`] takes each object as raw JSON text instead — serde_json skips
//! over a value without counting its nesting — and then reads that one
//! object on its own. What cannot be read is kept as an
//! [`InvalidObject`] with the metadata that still reads (name, namespace,
//! uid…), so a reconciler can report it and go on with the others.

use std::borrow::Cow;
use std::collections::BTreeMap;
use std::sync::Arc;

use k8s_openapi::apimachinery::pkg::apis::meta::v1::{ObjectMeta, OwnerReference, Time};
use kube::Resource;
use kube::core::error_boundary::InvalidObject;
use serde::de::DeserializeOwned;
use serde::{Deserialize, Deserializer};
use serde_json::value::RawValue;

/// One watched object: read (`Ok`), or kept aside with why it could not be
/// read (`Err`). Stands for `K` in a watcher, a reflector or a Controller.
#[derive(Debug, Clone)]
pub struct Guarded<K>(pub Result<Arc<K>, InvalidObject>);

impl<K: DeserializeOwned> Guarded<K> {
    /// Reads one object from its JSON text: as `K` when it reads, else its
    /// metadata and the reason.
    pub fn read(json: &str) -> Self {
        match serde_json::from_str::<K>(json) {
            Ok(object) => Guarded(Ok(Arc::new(object))),
            Err(error) => Guarded(Err(InvalidObject {
                error: error.to_string(),
                metadata: metadata_of(json),
            })),
        }
    }
}

/// The metadata a reconciler needs to name, report and route an object, read
/// on its own. `managedFields` is left out: it mirrors the object's fields
/// and can nest as deep as they do.
#[derive(Deserialize, Default)]
#[serde(rename_all = "camelCase")]
struct Head {
    #[serde(default)]
    metadata: Thin,
}

#[derive(Deserialize, Default)]
#[serde(rename_all = "camelCase", default)]
struct Thin {
    name: Option<String>,
    namespace: Option<String>,
    uid: Option<String>,
    resource_version: Option<String>,
    generation: Option<i64>,
    creation_timestamp: Option<Time>,
    deletion_timestamp: Option<Time>,
    labels: Option<BTreeMap<String, String>>,
    annotations: Option<BTreeMap<String, String>>,
    owner_references: Option<Vec<OwnerReference>>,
    finalizers: Option<Vec<String>>,
}

/// What of the metadata reads; empty when not even that does.
fn metadata_of(json: &str) -> ObjectMeta {
    let thin = serde_json::from_str::<Head>(json)
        .unwrap_or_default()
        .metadata;
    ObjectMeta {
        name: thin.name,
        namespace: thin.namespace,
        uid: thin.uid,
        resource_version: thin.resource_version,
        generation: thin.generation,
        creation_timestamp: thin.creation_timestamp,
        deletion_timestamp: thin.deletion_timestamp,
        labels: thin.labels,
        annotations: thin.annotations,
        owner_references: thin.owner_references,
        finalizers: thin.finalizers,
        ..ObjectMeta::default()
    }
}

impl<'de, K: DeserializeOwned> Deserialize<'de> for Guarded<K> {
    /// Only serde_json's own deserializer can hand out raw text, which is
    /// what kube's client reads lists and watch events with.
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        let raw = Box::<RawValue>::deserialize(deserializer)?;
        Ok(Guarded::read(raw.get()))
    }
}

impl<K: Resource + Clone> Resource for Guarded<K> {
    type DynamicType = K::DynamicType;
    type Scope = K::Scope;

    fn kind(dt: &Self::DynamicType) -> Cow<'_, str> {
        K::kind(dt)
    }

    fn group(dt: &Self::DynamicType) -> Cow<'_, str> {
        K::group(dt)
    }

    fn version(dt: &Self::DynamicType) -> Cow<'_, str> {
        K::version(dt)
    }

    fn plural(dt: &Self::DynamicType) -> Cow<'_, str> {
        K::plural(dt)
    }

    fn meta(&self) -> &ObjectMeta {
        match &self.0 {
            Ok(object) => object.meta(),
            Err(invalid) => &invalid.metadata,
        }
    }

    fn meta_mut(&mut self) -> &mut ObjectMeta {
        match &mut self.0 {
            Ok(object) => Arc::make_mut(object).meta_mut(),
            Err(invalid) => &mut invalid.metadata,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use coxswain_core::api::Run;
    use kube::api::ObjectList;
    use kube::core::WatchEvent;
    use serde_json::{Value, json};

    fn run_json(name: &str, namespace: &str, output: Value) -> Value {
        json!({
            "apiVersion": "coxswain.dev/v1alpha1",
            "kind": "Run",
            "metadata": {
                "name": name, "namespace": namespace, "uid": format!("uid-{name}"),
                "resourceVersion": "7",
                "managedFields": [{"manager": "kubectl", "fieldsType": "FieldsV1",
                                   "fieldsV1": {"f:status": {"f:output": {}}}}],
            },
            "spec": {"flowRef": {"name": "f"}},
            "status": {"phase": "Succeeded", "output": output},
        })
    }

    /// The list as the API server sends it: JSON text, each value written
    /// out (serde_json cannot build a `Value` this deep, so glue text).
    fn list_text(items: &[String]) -> String {
        format!(
            r#"{{"apiVersion":"coxswain.dev/v1alpha1","kind":"RunList","metadata":{{"resourceVersion":"9"}},"items":[{}]}}"#,
            items.join(",")
        )
    }

    /// A Run whose status output is `levels` deep, as text.
    fn deep_run_text(name: &str, levels: usize) -> String {
        let shallow = run_json(name, "team-a", json!("HOLE")).to_string();
        let deep = format!("{}1{}", "[".repeat(levels), "]".repeat(levels));
        shallow.replace("\"HOLE\"", &deep)
    }

    #[test]
    fn a_run_too_deep_for_serde_json_breaks_a_plain_list() {
        let text = list_text(&[
            deep_run_text("deep", 130),
            run_json("fine", "team-b", json!("ok")).to_string(),
        ]);
        let err = serde_json::from_str::<ObjectList<Run>>(&text).unwrap_err();
        assert!(err.to_string().contains("recursion limit"), "{err}");
        // kube's own guard copies the object first and fails the same way.
        let err = serde_json::from_str::<ObjectList<kube::core::DeserializeGuard<Run>>>(&text)
            .unwrap_err();
        assert!(err.to_string().contains("recursion limit"), "{err}");
    }

    #[test]
    fn a_guarded_list_keeps_the_other_runs_and_names_the_deep_one() {
        let text = list_text(&[
            deep_run_text("deep", 130),
            run_json("fine", "team-b", json!("ok")).to_string(),
            // Deeper than any limit of a recursive reader.
            deep_run_text("deeper", 100_000),
        ]);
        let list = serde_json::from_str::<ObjectList<Guarded<Run>>>(&text).expect("the list");
        assert_eq!(list.items.len(), 3);
        let fine = list.items[1].0.as_ref().expect("the honest run reads");
        assert_eq!(fine.metadata.name.as_deref(), Some("fine"));
        assert_eq!(
            fine.status.as_ref().and_then(|s| s.output.clone()),
            Some(json!("ok"))
        );
        for (item, name) in [(&list.items[0], "deep"), (&list.items[2], "deeper")] {
            let invalid = item.0.as_ref().expect_err("too deep to read");
            assert!(
                invalid.error.contains("recursion limit"),
                "{}",
                invalid.error
            );
            assert_eq!(item.meta().name.as_deref(), Some(name));
            assert_eq!(item.meta().namespace.as_deref(), Some("team-a"));
            assert_eq!(
                item.meta().uid.as_deref(),
                Some(format!("uid-{name}").as_str())
            );
            assert_eq!(item.meta().resource_version.as_deref(), Some("7"));
            assert_eq!(item.meta().managed_fields, None);
        }
    }

    #[test]
    fn a_watch_event_with_a_deep_run_is_kept_aside_not_failed() {
        let line = format!(
            r#"{{"type":"MODIFIED","object":{}}}"#,
            deep_run_text("deep", 200)
        );
        let event = serde_json::from_str::<WatchEvent<Guarded<Run>>>(&line).expect("the event");
        let WatchEvent::Modified(guarded) = event else {
            panic!("a modification")
        };
        assert!(guarded.0.is_err());
        assert_eq!(guarded.meta().name.as_deref(), Some("deep"));
    }

    #[test]
    fn a_run_of_the_wrong_shape_is_kept_aside_with_its_metadata() {
        let mut wrong = run_json("wrong", "team-a", json!(1));
        wrong["spec"] = json!({"flowRef": "not an object"});
        let guarded = serde_json::from_str::<Guarded<Run>>(&wrong.to_string()).expect("guarded");
        let invalid = guarded.0.as_ref().expect_err("wrong shape");
        assert!(invalid.error.contains("flowRef") || invalid.error.contains("invalid type"));
        assert_eq!(guarded.meta().name.as_deref(), Some("wrong"));
    }

    #[test]
    fn the_kind_is_the_wrapped_one() {
        assert_eq!(Guarded::<Run>::kind(&()), "Run");
        assert_eq!(Guarded::<Run>::api_version(&()), "coxswain.dev/v1alpha1");
        assert_eq!(Guarded::<Run>::plural(&()), "runs");
    }
}
