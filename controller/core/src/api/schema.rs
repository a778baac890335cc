//! Schema helpers for fields whose shape the Kubernetes schema cannot state.
//!
//! Kubernetes requires structural schemas: every field has a type unless it
//! says `x-kubernetes-preserve-unknown-fields`. Free JSON (step inputs, the
//! flow's input schema, outputs) and recursive step lists (a loop's body, a
//! parallel step's template) are declared this way; the validator checks them.

use schemars::{Schema, SchemaGenerator, json_schema};

/// Any JSON value, kept as written.
pub fn any_json(_: &mut SchemaGenerator) -> Schema {
    // `nullable`: a step may produce `null`, and the API server would
    // otherwise drop it, so a restarted controller would read "no output".
    json_schema!({ "x-kubernetes-preserve-unknown-fields": true, "nullable": true })
}

/// Reads a present `null` as `Some(Value::Null)` (serde's default reads it
/// as `None`), so an output of `null` survives a round trip through the
/// API server. Use with `#[serde(default)]`: absent stays `None`.
pub fn keep_null<'de, D: serde::Deserializer<'de>>(
    d: D,
) -> Result<Option<serde_json::Value>, D::Error> {
    <serde_json::Value as serde::Deserialize>::deserialize(d).map(Some)
}

/// A JSON object whose content is free.
pub fn any_object(_: &mut SchemaGenerator) -> Schema {
    json_schema!({ "type": "object", "x-kubernetes-preserve-unknown-fields": true })
}

/// A list of steps nested in a loop. Steps are recursive, and a CRD schema
/// cannot refer to itself, so the nested list is checked by the validator.
pub fn nested_steps(_: &mut SchemaGenerator) -> Schema {
    json_schema!({
        "type": "array",
        "description": "The steps of each pass, written like the flow's own steps.",
        "items": { "type": "object", "x-kubernetes-preserve-unknown-fields": true }
    })
}

/// One step nested in a parallel step (a step without `key`).
pub fn nested_step(_: &mut SchemaGenerator) -> Schema {
    json_schema!({
        "type": "object",
        "description": "The step each part runs, written like a flow step without `key`.",
        "x-kubernetes-preserve-unknown-fields": true
    })
}

/// Conditions as a list-map keyed by `type`, so server-side apply merges them.
pub fn conditions(generator: &mut SchemaGenerator) -> Schema {
    let item =
        generator.subschema_for::<k8s_openapi::apimachinery::pkg::apis::meta::v1::Condition>();
    json_schema!({
        "type": "array",
        "description": "The latest observations of the resource's state.",
        "x-kubernetes-list-type": "map",
        "x-kubernetes-list-map-keys": ["type"],
        "items": item
    })
}
