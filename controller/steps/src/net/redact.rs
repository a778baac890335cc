//! Keeping secret values out of what an attempt leaves behind.
//!
//! A server may echo what it received — an `Authorization` header in a 401
//! page, a token in a debug dump — and whatever it answers becomes the
//! step's error, text or output, which end up in the Run's status and in
//! logs. The executor knows every secret value it resolved for the attempt,
//! so it replaces each with a label naming the secret before the result
//! leaves it.

use serde_json::{Map, Value};

use coxswain_core::api::StepError;
use coxswain_core::engine::Done;

/// The secret values one attempt resolved, each with the label that
/// replaces it.
#[derive(Clone, Default)]
pub struct Redactor {
    /// `(value, label)`, longest value first so a secret that contains
    /// another is replaced whole.
    secrets: Vec<(String, String)>,
}

impl std::fmt::Debug for Redactor {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let labels: Vec<&str> = self.secrets.iter().map(|(_, l)| l.as_str()).collect();
        f.debug_struct("Redactor")
            .field("secrets", &labels)
            .finish()
    }
}

impl Redactor {
    /// Nothing to redact yet.
    pub fn new() -> Self {
        Self::default()
    }

    /// Remembers `value`, read from key `key` of the secret `name`. Empty
    /// values are ignored: there is nothing to find.
    pub fn add(&mut self, name: &str, key: &str, value: &str) {
        self.add_as(value, format!("[redacted secret {name}/{key}]"));
    }

    /// Remembers `value`, to be replaced by `label` (for secrets that do not
    /// come from a named Secret, such as the model server's API key).
    pub fn add_as(&mut self, value: &str, label: String) {
        if value.is_empty() || self.secrets.iter().any(|(v, _)| v == value) {
            return;
        }
        self.secrets.push((value.to_string(), label));
        self.secrets
            .sort_by_key(|(value, _)| std::cmp::Reverse(value.len()));
    }

    /// Whether any value was remembered.
    pub fn is_empty(&self) -> bool {
        self.secrets.is_empty()
    }

    /// `text` with every remembered value replaced by its label.
    pub fn text(&self, text: &str) -> String {
        let mut out = text.to_string();
        for (value, label) in &self.secrets {
            if out.contains(value.as_str()) {
                out = out.replace(value.as_str(), label);
            }
        }
        out
    }

    /// A JSON value with every string (and object key) redacted.
    pub fn value(&self, value: Value) -> Value {
        if self.is_empty() {
            return value;
        }
        match value {
            Value::String(s) => Value::String(self.text(&s)),
            Value::Array(items) => Value::Array(items.into_iter().map(|v| self.value(v)).collect()),
            Value::Object(members) => Value::Object(
                members
                    .into_iter()
                    .map(|(k, v)| (self.text(&k), self.value(v)))
                    .collect::<Map<_, _>>(),
            ),
            other => other,
        }
    }

    /// An error with its message redacted.
    pub fn error(&self, mut error: StepError) -> StepError {
        if !self.is_empty() {
            error.message = self.text(&error.message);
        }
        error
    }

    /// A finished attempt with its output and text redacted.
    pub fn done(&self, mut done: Done) -> Done {
        if self.is_empty() {
            return done;
        }
        done.output = self.value(done.output);
        done.text = done.text.map(|t| self.text(&t));
        done
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    #[test]
    fn values_are_replaced_everywhere_longest_first() {
        let mut r = Redactor::new();
        r.add("api", "short", "abc");
        r.add("api", "token", "xxabcxx");
        r.add("api", "empty", "");
        assert_eq!(
            r.text("got xxabcxx and abc"),
            "got [redacted secret api/token] and [redacted secret api/short]"
        );
        assert_eq!(
            r.value(json!({"echo": ["xxabcxx", 1], "abc": null})),
            json!({"echo": ["[redacted secret api/token]", 1], "[redacted secret api/short]": null})
        );
        assert!(!format!("{r:?}").contains("abc"));
    }
}
