//! Read access to the data of a run.
//!
//! Expressions (`$steps.x.output`) and placeholders (`{{x.json.y}}`) read the
//! same data. Both go through [`Scope`] so the engine can hand them borrowed
//! views of its state instead of building a document per evaluation, while the
//! command line can hand them a plain JSON context file.

use serde_json::Value;

/// Where expressions and placeholders look values up.
///
/// Every method returns `None` for "not there"; callers turn that into
/// `null` (expressions) or a "No value for" error (placeholders).
pub trait Scope {
    /// The run input (`$input`, `{{input.json.x}}`).
    fn input(&self) -> Option<&Value>;
    /// The record of a step: an object with `status`, `output`, `text` and `error`.
    fn step(&self, key: &str) -> Option<&Value>;
    /// Any other root: `previous` (a step record), `loop` (`{"iteration": n}`),
    /// `item`, `index` and `run` (`{"name", "namespace", "uid", "since"}`).
    fn root(&self, name: &str) -> Option<&Value>;
}

/// A context document in the shape `coxswain eval --context` reads:
/// `{"input": …, "steps": {"<key>": {…}}, "previous": {…}, "loop": {…}, "item": …, "run": {…}}`.
impl Scope for Value {
    fn input(&self) -> Option<&Value> {
        self.get("input")
    }

    fn step(&self, key: &str) -> Option<&Value> {
        self.get("steps")?.get(key)
    }

    fn root(&self, name: &str) -> Option<&Value> {
        self.get(name)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn context_document_answers_each_root() {
        let ctx = json!({"input": {"a": 1}, "steps": {"draft": {"status": "completed"}}, "loop": {"iteration": 2}});
        assert_eq!(ctx.input(), Some(&json!({"a": 1})));
        assert_eq!(
            ctx.step("draft").and_then(|s| s.get("status")),
            Some(&json!("completed"))
        );
        assert_eq!(ctx.step("nope"), None);
        assert_eq!(ctx.root("loop"), Some(&json!({"iteration": 2})));
        assert_eq!(ctx.root("item"), None);
    }
}
