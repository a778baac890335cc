//! The output contract: the JSON Schema of the declared fields, and reading
//! a model's reply back into a step output.
//!
//! Everything here is pure so the parsing rules can be tested without a
//! server and measured on their own (`benches/agent.rs`).

use serde_json::{Value, json};

use coxswain_core::api::{AgentDecision, AgentStep, Field, Reply, ReplyFormat};
use coxswain_core::flow::{Shape, kind_of};

/// The name of the tool the model hands its output in through.
pub const SUBMIT_TOOL: &str = "submit_output";

/// How the output contract is put to the provider. Servers differ: most
/// support forced tool calls, some only a JSON-schema response format, a
/// few nothing but text.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum Mode {
    /// A `submit_output` tool with the schema, forced through `tool_choice`.
    #[default]
    Tools,
    /// `response_format: {type: json_schema, json_schema: {schema}}`, the
    /// OpenAI shape, for servers without (forced) tools: Ollama, llama-server.
    JsonSchema,
    /// `response_format: {type: json_object, schema}`, the shape
    /// llama-cpp-python accepts (it answers `json_schema` with a 500).
    JsonObject,
    /// No structured-output support: a fenced JSON block in the text.
    Text,
}

impl Mode {
    /// Every mode, as configuration spells it.
    pub const NAMES: &'static str = "tools, json_schema, json_object or text";

    /// Reads a mode from configuration (`tools`, `json_schema`,
    /// `json_object`, `text`).
    pub fn parse(s: &str) -> Option<Mode> {
        match s.trim().to_ascii_lowercase().replace('-', "_").as_str() {
            "tools" | "tool" => Some(Mode::Tools),
            "json_schema" | "jsonschema" | "schema" => Some(Mode::JsonSchema),
            "json_object" | "jsonobject" => Some(Mode::JsonObject),
            "text" | "none" => Some(Mode::Text),
            _ => None,
        }
    }
}

/// Servers we know, and the mode each handles best. Every one of them
/// speaks Chat Completions; they differ in which structured-output switch
/// they honour.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Provider {
    /// api.openai.com and servers that follow it closely: forced tools.
    OpenAi,
    /// vLLM: forced `tool_choice` is grammar-guided, so tools.
    Vllm,
    /// Ollama ignores a forced `tool_choice` but honours a JSON-schema
    /// `response_format` (0.5 and later).
    Ollama,
    /// llama.cpp's own `llama-server`: JSON-schema `response_format`
    /// (tools need `--jinja`, which not every deployment sets).
    LlamaCpp,
    /// llama-cpp-python's server: forced tools work; its JSON mode is
    /// `json_object` with a `schema`.
    LlamaCppPython,
}

impl Provider {
    /// Every provider, as configuration spells it.
    pub const NAMES: &'static str = "openai, vllm, ollama, llama.cpp or llama-cpp-python";

    /// Reads a provider name from configuration.
    pub fn parse(s: &str) -> Option<Provider> {
        match s
            .trim()
            .to_ascii_lowercase()
            .replace(['-', '_', '.'], "")
            .as_str()
        {
            "openai" => Some(Provider::OpenAi),
            "vllm" => Some(Provider::Vllm),
            "ollama" => Some(Provider::Ollama),
            "llamacpp" | "llamaserver" => Some(Provider::LlamaCpp),
            "llamacpppython" => Some(Provider::LlamaCppPython),
            _ => None,
        }
    }

    /// The mode used with this provider unless one is configured.
    pub fn default_mode(self) -> Mode {
        match self {
            Provider::OpenAi | Provider::Vllm | Provider::LlamaCppPython => Mode::Tools,
            Provider::Ollama | Provider::LlamaCpp => Mode::JsonSchema,
        }
    }
}

/// What the step expects back: text, or JSON of the declared shape (one
/// object, a list, several objects). Derived once per attempt from the
/// step's `reply`; the rules live in [`Shape`], which scripts share.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct Contract {
    /// The reply as declared (`format: text` when the step has none).
    pub reply: Reply,
    /// The decisions handed in beside the output (none: the agent decides
    /// nothing).
    pub decisions: Vec<AgentDecision>,
    /// The agent reviews another step's work: it hands in only its
    /// decision and instructions.
    pub reviews: bool,
}

/// The members of what a deciding agent hands in.
pub const DECISION: &str = "decision";
/// See [`DECISION`].
pub const INSTRUCTIONS: &str = "instructions";
/// See [`DECISION`].
pub const OUTPUT: &str = "output";

impl Contract {
    /// The contract of an agent step's `reply` (text when absent).
    pub fn of(reply: Option<&Reply>) -> Contract {
        Contract {
            reply: reply.cloned().unwrap_or_default(),
            ..Default::default()
        }
    }

    /// The contract of an agent step: its reply, and its decisions.
    pub fn for_agent(step: &AgentStep) -> Contract {
        Contract {
            reply: step.reply.clone().unwrap_or_default(),
            decisions: step.decisions.clone(),
            reviews: step.reviews.is_some(),
        }
    }

    /// Whether the agent hands in a decision beside (or instead of) its output.
    pub fn decides(&self) -> bool {
        !self.decisions.is_empty()
    }

    /// One JSON object with `fields` (none: any object).
    pub fn json(fields: Vec<Field>) -> Contract {
        Contract {
            reply: Reply {
                format: ReplyFormat::Json,
                fields,
                ..Default::default()
            },
            ..Default::default()
        }
    }

    /// The declared shape.
    pub fn shape(&self) -> Shape<'_> {
        Shape::of_reply(Some(&self.reply))
    }

    /// Whether the reply must be structured (so tools or a schema apply).
    pub fn is_json(&self) -> bool {
        self.decides() || self.shape().is_structured()
    }

    /// The JSON Schema of what is handed in: an object with exactly the
    /// declared properties, all required (a list as `{items: [...]}`). A
    /// deciding agent hands in `decision`, `instructions` and (unless it
    /// only reviews) its `output`.
    pub fn schema(&self) -> Value {
        if !self.decides() {
            return self.shape().schema();
        }
        let names: Vec<&str> = self.decisions.iter().map(|d| d.name.as_str()).collect();
        let mut properties = serde_json::Map::new();
        properties.insert(
            DECISION.into(),
            json!({"type": "string", "enum": names, "description": self.decision_help()}),
        );
        properties.insert(
            INSTRUCTIONS.into(),
            json!({"type": "string", "description": "What whoever takes your decision should do; empty when nothing."}),
        );
        if !self.reviews {
            let output = match self.shape() {
                Shape::Text => json!({"type": "string"}),
                shape => shape.schema(),
            };
            properties.insert(OUTPUT.into(), output);
        }
        let required: Vec<&String> = properties.keys().collect();
        json!({
            "type": "object",
            "properties": properties,
            "required": required,
            "additionalProperties": false,
        })
    }

    /// `approve; changes: when the draft needs work`, for the schema and
    /// the prompt.
    pub fn decision_help(&self) -> String {
        let each: Vec<String> = self
            .decisions
            .iter()
            .map(|d| match d.description.as_deref().map(str::trim) {
                Some(why) if !why.is_empty() => format!("{}: {why}", d.name),
                _ => d.name.clone(),
            })
            .collect();
        each.join("; ")
    }

    /// A deciding agent's hand-in checked: the decision one of its own, the
    /// instructions text, the output of its shape; kept as `{decision,
    /// instructions, output}`.
    fn check_decided(&self, value: Value) -> Result<Value, Vec<String>> {
        let Value::Object(mut handed) = value else {
            return Err(vec![format!(
                "expected a JSON object, found {}",
                kind_of(&value)
            )]);
        };
        let mut problems = Vec::new();
        let names: Vec<&str> = self.decisions.iter().map(|d| d.name.as_str()).collect();
        let decision = handed.remove(DECISION);
        match decision.as_ref().and_then(Value::as_str) {
            Some(d) if names.contains(&d) => {}
            Some(d) => problems.push(format!(
                "`{d}` is not a decision here; `{DECISION}` must be one of {}",
                names.join(", ")
            )),
            None => problems.push(format!("missing `{DECISION}`: one of {}", names.join(", "))),
        }
        let instructions = match handed.remove(INSTRUCTIONS) {
            None | Some(Value::Null) => Value::Null,
            Some(Value::String(text)) => Value::String(text),
            Some(other) => {
                problems.push(format!(
                    "`{INSTRUCTIONS}` must be text, found {}",
                    kind_of(&other)
                ));
                Value::Null
            }
        };
        let mut output = Value::Null;
        if !self.reviews {
            match (self.shape(), handed.remove(OUTPUT)) {
                (_, None) => problems.push(format!("missing `{OUTPUT}`")),
                (Shape::Text, Some(Value::String(text))) if !text.trim().is_empty() => {
                    output = Value::String(text);
                }
                (Shape::Text, Some(other)) => problems.push(format!(
                    "`{OUTPUT}` must be your answer as text, found {}",
                    kind_of(&other)
                )),
                (shape, Some(value)) => match shape.check(value) {
                    Ok(value) => output = value,
                    Err(found) => {
                        problems.extend(found.into_iter().map(|p| format!("`{OUTPUT}`: {p}")));
                    }
                },
            }
        }
        let mut extras: Vec<String> = handed.keys().map(|k| format!("`{k}`")).collect();
        if !extras.is_empty() {
            extras.sort();
            problems.push(format!("unexpected {}", extras.join(", ")));
        }
        if !problems.is_empty() {
            return Err(problems);
        }
        Ok(json!({DECISION: decision, INSTRUCTIONS: instructions, OUTPUT: output}))
    }

    /// The request-body members that put the contract to the provider in
    /// `mode`: `tools` + forced `tool_choice`, or `response_format`, or none.
    pub fn request_members(&self, mode: Mode) -> Vec<(&'static str, Value)> {
        if !self.is_json() {
            return Vec::new();
        }
        match mode {
            Mode::Tools => vec![
                (
                    "tools",
                    json!([{
                        "type": "function",
                        "function": {
                            "name": SUBMIT_TOOL,
                            "description": "Hand in the result of your task. Call it exactly once, with every field.",
                            "parameters": self.schema(),
                        }
                    }]),
                ),
                (
                    "tool_choice",
                    json!({"type": "function", "function": {"name": SUBMIT_TOOL}}),
                ),
            ],
            Mode::JsonSchema => vec![(
                "response_format",
                json!({
                    "type": "json_schema",
                    "json_schema": {"name": "output", "schema": self.schema(), "strict": true}
                }),
            )],
            Mode::JsonObject => vec![(
                "response_format",
                json!({"type": "json_object", "schema": self.schema()}),
            )],
            Mode::Text => Vec::new(),
        }
    }
}

/// The parts of one reply that matter to the contract, taken off the wire.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct ReplyParts {
    /// The message text, if any.
    pub content: Option<String>,
    /// Arguments of the `submit_output` call (or of the only tool call), as
    /// sent: usually a JSON string, sometimes an object.
    pub tool_arguments: Option<Value>,
    /// Why the model stopped (`stop`, `tool_calls`, `length`, …).
    pub finish_reason: Option<String>,
}

impl ReplyParts {
    /// The step's `text`: the message content, or the tool arguments as text
    /// when the model said nothing else.
    pub fn text(&self) -> String {
        match (&self.content, &self.tool_arguments) {
            (Some(c), _) if !c.trim().is_empty() => c.clone(),
            (_, Some(Value::String(s))) => s.clone(),
            (_, Some(v)) => v.to_string(),
            (Some(c), None) => c.clone(),
            (None, None) => String::new(),
        }
    }
}

/// Why a reply does not fit the contract, in words the model (on the repair
/// turn) and the person reading the run can act on.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Verdict {
    /// It fits poorly enough to ask once more: each entry is one problem.
    Misfit(Vec<String>),
    /// The provider refused to answer; asking again will not help.
    Refused(String),
}

/// Reads a reply as the step's output, or says what was wrong with it.
pub fn interpret(contract: &Contract, reply: &ReplyParts) -> Result<Value, Verdict> {
    let cut = reply.finish_reason.as_deref() == Some("length");
    if reply.finish_reason.as_deref() == Some("content_filter") {
        return Err(Verdict::Refused(
            "the provider's content filter stopped the reply (finish_reason: content_filter)"
                .into(),
        ));
    }
    let cut_note = || {
        "the reply was cut off because it reached the token limit (finish_reason: length); \
         give a shorter answer"
            .to_string()
    };
    if !contract.is_json() {
        let text = reply.text();
        if cut {
            return Err(Verdict::Misfit(vec![cut_note()]));
        }
        if text.trim().is_empty() {
            return Err(Verdict::Misfit(vec!["the reply was empty".into()]));
        }
        return Ok(Value::String(text));
    }
    let shape = contract.shape();
    let arrays = !contract.decides() && matches!(shape, Shape::List(_));
    let found = match &reply.tool_arguments {
        Some(args) => parse_arguments(args, arrays),
        None => match &reply.content {
            Some(c) if !c.trim().is_empty() => extract_json_in(c, arrays),
            _ => Err(JsonError::NoReply),
        },
    };
    let value = match found {
        Ok(v) => v,
        Err(why) => {
            let mut problems = Vec::with_capacity(2);
            if cut {
                problems.push(cut_note());
            }
            problems.push(why.to_string());
            return Err(Verdict::Misfit(problems));
        }
    };
    let checked = if contract.decides() {
        contract.check_decided(value)
    } else {
        shape.check(value)
    };
    match checked {
        Ok(v) => Ok(v),
        Err(mut problems) => {
            if cut {
                problems.insert(0, cut_note());
            }
            Err(Verdict::Misfit(problems))
        }
    }
}

/// Why no JSON object could be read from a reply; the message goes back to
/// the model in the repair turn, and into the step's error.
#[derive(Debug, thiserror::Error)]
pub enum JsonError {
    /// JSON that is not an object (a list, a string…).
    #[error("found {0} where a JSON object was expected")]
    NotAnObject(&'static str),
    /// Text that looks like JSON but does not parse.
    #[error("not valid JSON ({0})")]
    Invalid(serde_json::Error),
    /// Text with no JSON in it at all.
    #[error("no JSON object found: expected one JSON object in a ```json code block")]
    NotFound,
    /// The tool call's arguments were a text without a usable object.
    #[error("the submit_output arguments: {0}")]
    Arguments(Box<JsonError>),
    /// The tool call's arguments were neither a text nor an object.
    #[error("the submit_output arguments were {0}, not a JSON object")]
    ArgumentsNotObject(&'static str),
    /// The reply had neither a tool call nor text.
    #[error("the reply held neither a submit_output call nor any text")]
    NoReply,
}

/// Tool-call arguments: a JSON string (perhaps padded, perhaps fenced) or,
/// from some servers, an object (or, for a list, an array).
fn parse_arguments(args: &Value, arrays: bool) -> Result<Value, JsonError> {
    match args {
        Value::String(s) => {
            extract_json_in(s, arrays).map_err(|e| JsonError::Arguments(Box::new(e)))
        }
        Value::Object(_) => Ok(args.clone()),
        Value::Array(_) if arrays => Ok(args.clone()),
        other => Err(JsonError::ArgumentsNotObject(kind_of(other))),
    }
}

/// Finds the JSON object in a text: the whole text, a fenced block (```json
/// or plain ```), or the span from the first `{` to the last `}`.
pub fn extract_json(text: &str) -> Result<Value, JsonError> {
    extract_json_in(text, false)
}

/// [`extract_json`], also taking a JSON array (`arrays`: a list is due) —
/// from the whole text, a fenced block, or the first `[` to the last `]`.
pub fn extract_json_in(text: &str, arrays: bool) -> Result<Value, JsonError> {
    let trimmed = text.trim();
    let mut not_object = None;
    let mut parse_error = None;
    let mut candidates: Vec<&str> = Vec::with_capacity(4);
    candidates.push(trimmed);
    candidates.extend(fenced_blocks(trimmed));
    let mut spans = vec![('{', '}')];
    if arrays {
        spans.push(('[', ']'));
    }
    for (open, close) in spans {
        if let (Some(a), Some(b)) = (trimmed.find(open), trimmed.rfind(close))
            && a < b
        {
            candidates.push(&trimmed[a..=b]);
        }
    }
    for candidate in candidates {
        match parse_lenient(candidate.trim()) {
            Ok(v @ Value::Object(_)) => return Ok(v),
            Ok(v @ Value::Array(_)) if arrays => return Ok(v),
            Ok(other) => {
                not_object.get_or_insert(JsonError::NotAnObject(kind_of(&other)));
            }
            Err(e) => {
                parse_error.get_or_insert(JsonError::Invalid(e));
            }
        }
    }
    Err(match (not_object, parse_error) {
        (Some(e), _) => e,
        (None, Some(e)) if trimmed.contains('{') || trimmed.contains("```") => e,
        _ => JsonError::NotFound,
    })
}

/// Parses JSON as written, or, when the only fault is a raw control
/// character (a real line break or tab) inside a string, as it would read
/// with those characters escaped. Small models often break a long string
/// over lines; Python's `json.loads(strict=False)` reads the same text.
fn parse_lenient(text: &str) -> serde_json::Result<Value> {
    match serde_json::from_str::<Value>(text) {
        Err(e) if e.is_syntax() && e.to_string().starts_with("control character") => {
            match escape_raw_controls(text) {
                Some(escaped) => serde_json::from_str(&escaped).map_err(|_| e),
                None => Err(e),
            }
        }
        other => other,
    }
}

/// The text with every control character inside a JSON string escaped
/// (`\n`, `\t`, `\r` or `\u00XX`); `None` when there were none.
fn escape_raw_controls(text: &str) -> Option<String> {
    let mut out = String::with_capacity(text.len() + 16);
    let (mut in_string, mut escaped, mut changed) = (false, false, false);
    for c in text.chars() {
        if in_string && !escaped && c < ' ' {
            changed = true;
            match c {
                '\n' => out.push_str("\\n"),
                '\t' => out.push_str("\\t"),
                '\r' => out.push_str("\\r"),
                other => out.push_str(&format!("\\u{:04x}", other as u32)),
            }
            continue;
        }
        out.push(c);
        if escaped {
            escaped = false;
        } else if in_string && c == '\\' {
            escaped = true;
        } else if c == '"' {
            in_string = !in_string;
        }
    }
    changed.then_some(out)
}

/// The bodies of the fenced code blocks in a text, in order.
fn fenced_blocks(text: &str) -> Vec<&str> {
    let mut blocks = Vec::new();
    let mut rest = text;
    while let Some(start) = rest.find("```") {
        let after = &rest[start + 3..];
        // Skip the info string (`json`, `JSON`, …) up to the end of its line.
        let body_start = match after.find('\n') {
            Some(nl)
                if after[..nl]
                    .trim()
                    .chars()
                    .all(|c| c.is_ascii_alphanumeric()) =>
            {
                nl + 1
            }
            _ => 0,
        };
        let body = &after[body_start..];
        match body.find("```") {
            Some(end) => {
                blocks.push(&body[..end]);
                rest = &body[end + 3..];
            }
            None => {
                blocks.push(body);
                break;
            }
        }
    }
    blocks
}

#[cfg(test)]
mod tests {
    use super::*;
    use coxswain_core::flow::FIELD_TYPES;

    fn field(name: &str, t: &str) -> Field {
        Field {
            description: Some(format!("the {name}")),
            ..Field::new(name, t)
        }
    }

    fn json_contract(fields: Vec<Field>) -> Contract {
        Contract::json(fields)
    }

    fn args(s: &str) -> ReplyParts {
        ReplyParts {
            content: None,
            tool_arguments: Some(Value::String(s.into())),
            finish_reason: Some("tool_calls".into()),
        }
    }

    #[test]
    fn schema_lists_every_field_required_and_closed() {
        let c = json_contract(vec![field("n", "integer"), field("ok", "boolean")]);
        assert_eq!(
            c.schema(),
            json!({
                "type": "object",
                "properties": {
                    "n": {"type": "integer", "description": "the n"},
                    "ok": {"type": "boolean", "description": "the ok"},
                },
                "required": ["n", "ok"],
                "additionalProperties": false,
            })
        );
    }

    #[test]
    fn a_list_reply_is_handed_in_wrapped_or_bare_and_kept_wrapped() {
        let c = Contract {
            reply: serde_json::from_value(json!({
                "format": "json",
                "items": {"fields": [{"name": "owner", "type": "string"}, {"name": "task", "type": "string"}]}
            }))
            .expect("reply"),
            ..Default::default()
        };
        let parameters = &c.request_members(Mode::Tools)[0].1[0]["function"]["parameters"];
        assert_eq!(parameters["required"], json!(["items"]));
        assert_eq!(parameters["properties"]["items"]["type"], "array");
        let kept = json!({"items": [{"owner": "ana", "task": "ship"}]});
        let wrapped = args(r#"{"items": [{"owner": "ana", "task": "ship"}]}"#);
        assert_eq!(interpret(&c, &wrapped), Ok(kept.clone()));
        let fenced = ReplyParts {
            content: Some("Here:\n```json\n[{\"owner\": \"ana\", \"task\": \"ship\"}]\n```".into()),
            ..Default::default()
        };
        assert_eq!(interpret(&c, &fenced), Ok(kept));
        let Err(Verdict::Misfit(problems)) = interpret(&c, &args(r#"[{"owner": "ana"}]"#)) else {
            panic!("expected a misfit")
        };
        assert_eq!(problems, ["item 0: missing field `task` (string)"]);
    }

    #[test]
    fn several_objects_are_put_to_the_model_as_one_closed_object() {
        let c = Contract {
            reply: serde_json::from_value(json!({
                "format": "json",
                "objects": [
                    {"name": "summary", "fields": [{"name": "text", "type": "string"}]},
                    {"name": "risks", "items": {}}
                ]
            }))
            .expect("reply"),
            ..Default::default()
        };
        let schema = c.schema();
        assert_eq!(schema["required"], json!(["summary", "risks"]));
        assert_eq!(schema["additionalProperties"], false);
        let reply = args(r#"{"summary": {"text": "fine"}, "risks": ["late"]}"#);
        assert_eq!(
            interpret(&c, &reply),
            Ok(json!({"summary": {"text": "fine"}, "risks": ["late"]}))
        );
    }

    #[test]
    fn a_deciding_agent_hands_in_its_decision_beside_its_output() {
        let step: AgentStep = serde_json::from_value(json!({
            "prompt": "Review.",
            "decisions": [{"name": "approve"}, {"name": "changes", "description": "it needs work"}]
        }))
        .expect("step");
        let c = Contract::for_agent(&step);
        assert!(c.is_json());
        let schema = c.schema();
        assert_eq!(
            schema["required"],
            json!(["decision", "instructions", "output"])
        );
        assert_eq!(
            schema["properties"]["decision"]["enum"],
            json!(["approve", "changes"])
        );
        assert_eq!(
            schema["properties"]["decision"]["description"],
            "approve; changes: it needs work"
        );
        assert_eq!(schema["properties"]["output"]["type"], "string");
        let handed =
            args(r#"{"decision": "changes", "instructions": "Shorter.", "output": "Too long."}"#);
        assert_eq!(
            interpret(&c, &handed),
            Ok(json!({"decision": "changes", "instructions": "Shorter.", "output": "Too long."}))
        );
        let Err(Verdict::Misfit(problems)) =
            interpret(&c, &args(r#"{"decision": "maybe", "extra": 1}"#))
        else {
            panic!("expected a misfit")
        };
        assert_eq!(
            problems,
            [
                "`maybe` is not a decision here; `decision` must be one of approve, changes",
                "missing `output`",
                "unexpected `extra`"
            ]
        );
        let reviewer = Contract { reviews: true, ..c };
        assert!(reviewer.schema()["properties"].get("output").is_none());
        assert_eq!(
            interpret(
                &reviewer,
                &args(r#"{"decision": "approve", "instructions": ""}"#)
            ),
            Ok(json!({"decision": "approve", "instructions": "", "output": null}))
        );
    }

    #[test]
    fn text_contract_adds_nothing_to_the_request() {
        let c = Contract::of(None);
        assert!(c.request_members(Mode::Tools).is_empty());
        assert!(c.request_members(Mode::JsonSchema).is_empty());
    }

    #[test]
    fn raw_line_breaks_inside_strings_are_read_as_escaped() {
        let c = json_contract(vec![field("tagline", "string")]);
        let raw = "{\"tagline\": \"Fold it,\n\tcarry it\u{1}\"}";
        assert_eq!(
            interpret(&c, &args(raw)),
            Ok(json!({"tagline": "Fold it,\n\tcarry it\u{1}"}))
        );
        // Outside strings, line breaks are plain white space; an escaped
        // quote does not end the string.
        let raw = "{\n\"tagline\": \"say \\\"hi\\\"\nnow\"\n}";
        assert_eq!(
            interpret(&c, &args(raw)),
            Ok(json!({"tagline": "say \"hi\"\nnow"}))
        );
        // Other faults are still reported as they are.
        let err = extract_json("{\"tagline\": \"a\nb\",}").unwrap_err();
        assert!(matches!(err, JsonError::Invalid(_)), "{err}");
    }

    #[test]
    fn arguments_with_odd_spacing_and_fences_parse() {
        let c = json_contract(vec![field("n", "integer")]);
        for raw in [
            "{\"n\":1}",
            "  {\n  \"n\" :   1 }\n\n",
            "```json\n{\"n\": 1}\n```",
            "Here you go: {\"n\": 1.0} done",
        ] {
            assert_eq!(interpret(&c, &args(raw)), Ok(json!({"n": 1})), "{raw}");
        }
        let object = ReplyParts {
            tool_arguments: Some(json!({"n": 1})),
            ..Default::default()
        };
        assert_eq!(interpret(&c, &object), Ok(json!({"n": 1})));
    }

    #[test]
    fn content_with_fenced_block_or_bare_object_parses() {
        let c = json_contract(vec![field("s", "string")]);
        let fenced = ReplyParts {
            content: Some("Sure.\n```json\n{\"s\": \"x\"}\n```\nBye".into()),
            ..Default::default()
        };
        assert_eq!(interpret(&c, &fenced), Ok(json!({"s": "x"})));
        let bare = ReplyParts {
            content: Some("{\"s\": \"y\"}".into()),
            ..Default::default()
        };
        assert_eq!(interpret(&c, &bare), Ok(json!({"s": "y"})));
    }

    #[test]
    fn problems_are_named() {
        let c = json_contract(vec![field("n", "integer"), field("s", "string")]);
        let Err(Verdict::Misfit(p)) = interpret(&c, &args("{\"n\": 1.5, \"x\": 2}")) else {
            panic!("expected a misfit")
        };
        assert_eq!(
            p,
            vec![
                "field `n` must be an integer, found a number (1.5)".to_string(),
                "missing field `s` (string)".to_string(),
                "unexpected field `x`: only `n`, `s` may be given".to_string(),
            ]
        );
        let Err(Verdict::Misfit(p)) = interpret(&c, &args("not json at all")) else {
            panic!("expected a misfit")
        };
        assert!(p[0].contains("no JSON object found"), "{p:?}");
        let Err(Verdict::Misfit(p)) = interpret(&c, &args("[1, 2]")) else {
            panic!("expected a misfit")
        };
        assert!(p[0].contains("an array"), "{p:?}");
    }

    #[test]
    fn finish_reasons() {
        let c = json_contract(vec![field("n", "integer")]);
        let mut cut = args("{\"n\": ");
        cut.finish_reason = Some("length".into());
        let Err(Verdict::Misfit(p)) = interpret(&c, &cut) else {
            panic!("expected a misfit")
        };
        assert!(p[0].contains("cut off"), "{p:?}");
        let mut filtered = args("{\"n\": 1}");
        filtered.finish_reason = Some("content_filter".into());
        assert!(matches!(interpret(&c, &filtered), Err(Verdict::Refused(_))));
    }

    #[test]
    fn text_reply_is_the_output() {
        let c = Contract::of(None);
        let r = ReplyParts {
            content: Some("Hello".into()),
            finish_reason: Some("stop".into()),
            ..Default::default()
        };
        assert_eq!(interpret(&c, &r), Ok(json!("Hello")));
        assert!(matches!(
            interpret(&c, &ReplyParts::default()),
            Err(Verdict::Misfit(_))
        ));
    }

    #[test]
    fn text_falls_back_to_tool_arguments() {
        assert_eq!(args("{\"a\":1}").text(), "{\"a\":1}");
        let both = ReplyParts {
            content: Some("said".into()),
            tool_arguments: Some(json!({"a": 1})),
            finish_reason: None,
        };
        assert_eq!(both.text(), "said");
    }

    #[test]
    fn every_type_is_checked() {
        // One field of every type, named by its first letter.
        let fields = FIELD_TYPES.iter().map(|t| field(&t[..1], t)).collect();
        let good = json!({"s": "x", "n": 1.5, "i": 2, "b": true, "a": [1], "o": {"k": 1}});
        let c = json_contract(fields);
        assert_eq!(c.shape().check(good.clone()), Ok(good));
        let bad = json!({"s": 1, "n": "1", "i": true, "b": "yes", "a": {}, "o": []});
        assert_eq!(c.shape().check(bad).map_err(|p| p.len()), Err(6));
    }

    #[test]
    fn modes_parse() {
        assert_eq!(Mode::parse("Tools"), Some(Mode::Tools));
        assert_eq!(Mode::parse("json-schema"), Some(Mode::JsonSchema));
        assert_eq!(Mode::parse("text"), Some(Mode::Text));
        assert_eq!(Mode::parse("json_object"), Some(Mode::JsonObject));
        assert_eq!(Mode::parse("xml"), None);
        assert_eq!(Provider::parse("llama.cpp"), Some(Provider::LlamaCpp));
        assert_eq!(
            Provider::parse("llama_cpp_python"),
            Some(Provider::LlamaCppPython)
        );
        assert_eq!(Provider::parse("OpenAI"), Some(Provider::OpenAi));
        assert_eq!(Provider::parse("bard"), None);
    }

    #[test]
    fn json_object_mode_puts_the_schema_beside_the_type() {
        let c = Contract::json(vec![field("ok", "boolean")]);
        let members = c.request_members(Mode::JsonObject);
        assert_eq!(members.len(), 1);
        assert_eq!(members[0].0, "response_format");
        assert_eq!(members[0].1["type"], "json_object");
        assert_eq!(members[0].1["schema"], c.schema());
        assert_eq!(Provider::LlamaCppPython.default_mode(), Mode::Tools);
        assert_eq!(Provider::Ollama.default_mode(), Mode::JsonSchema);
    }
}

#[cfg(test)]
mod json_error_tests {
    use super::*;

    #[test]
    fn what_was_found_instead_of_an_object_is_said() {
        let list = extract_json("[1]").unwrap_err();
        assert!(matches!(list, JsonError::NotAnObject(_)));
        assert!(
            list.to_string()
                .ends_with("where a JSON object was expected"),
            "{list}"
        );
        assert!(matches!(
            extract_json("just words"),
            Err(JsonError::NotFound)
        ));
        let err = parse_arguments(&Value::String("{oops".into()), false).unwrap_err();
        assert!(
            matches!(&err, JsonError::Arguments(inner) if matches!(**inner, JsonError::Invalid(_)))
        );
        assert!(
            err.to_string()
                .starts_with("the submit_output arguments: not valid JSON ("),
            "{err}"
        );
    }
}
