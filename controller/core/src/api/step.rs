//! Steps: the common fields every step has, and one struct per kind.

use std::collections::BTreeMap;

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};
use serde_json::Value;

/// One step of a flow: its place in the graph, its data, its failure policy
/// and exactly one kind (`agent`, `script`, `http`, `message`, `condition`,
/// `approval`, `join`, `parallel`, `loop` or `save`).
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct Step {
    /// Names the step for references (`$steps.KEY.output`), placeholders
    /// (`{{KEY.json.x}}`) and arrows. Starts with a lowercase letter; then
    /// lowercase letters, digits and `_`. Unique within the flow. The keys
    /// input, steps, previous, loop, item, index and run are reserved.
    /// Left out only for the step inside a `parallel` step.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub key: String,
    /// A sentence saying what the step is for; shown to agents with `tellFlow`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub description: Option<String>,
    /// The steps this one comes after, each a key (`draft`) or a key and an
    /// exit (`review.approve`, `check.true`). Default: the step listed just
    /// before. `[]` makes the step a start of the flow. The step runs once every
    /// step it comes after has settled and at least one of these arrows was taken.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub after: Option<Vec<String>>,
    /// A condition (see the expression language); when false the step is skipped.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub when: Option<String>,
    /// The data the step receives: any JSON in which a string starting with `$`
    /// is one reference (`$input.brief`, `$steps.draft.output.title`) and `$$`
    /// stands for a literal `$`. Default: the run input for the first step; the
    /// run input plus the previous step's output for later ones.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(schema_with = "crate::api::schema::any_json")]
    pub input: Option<Value>,
    /// How many times the step may be tried before it fails (default 1).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub attempts: Option<i32>,
    /// The wait before the second attempt, doubling for each later attempt,
    /// as a duration such as `5s` or `1m` (default `5s`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub backoff: Option<String>,
    /// The longest one attempt may take, as a duration such as `30s`, `10m` or
    /// `1h30m`. An attempt that takes longer fails; for an approval, one
    /// nobody answered in time (and the next attempt asks again).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub timeout: Option<String>,
    /// What a failure does: `fail` (default) fails the run; `continue` lets
    /// later steps run and read `$steps.KEY.status` and `$steps.KEY.error`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub on_failure: Option<OnFailure>,
    /// Arrows back to an earlier step, taken on one of this step's exits: the
    /// target and every step after it run again as new attempts.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub send_back: Vec<SendBack>,
    /// Stored records the step receives, each as an input of its own name
    /// (a JSON array, maybe empty), read from the database just before each
    /// attempt; on agent, script, http, message and approval steps (an
    /// approval shows them beside its `show`).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub lookup: Vec<Lookup>,

    /// Asks a model (any OpenAI-compatible Chat Completions endpoint).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub agent: Option<AgentStep>,
    /// Runs a program: a Kubernetes Job in a cluster, a process locally.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub script: Option<ScriptStep>,
    /// Sends one HTTP request.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub http: Option<HttpStep>,
    /// Posts a message to a webhook, a Slack channel or a Matrix room.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub message: Option<MessageStep>,
    /// Chooses a path: exits `true`/`false`, or the name of each path.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub condition: Option<ConditionStep>,
    /// Waits for a person: a review (pick a decision) or an entry (fill in data).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub approval: Option<ApprovalStep>,
    /// Waits for the branches it comes after and combines their text.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub join: Option<JoinStep>,
    /// Runs one part per item or per listed part, concurrently.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub parallel: Option<ParallelStep>,
    /// Runs its steps pass after pass until a condition holds.
    #[serde(default, skip_serializing_if = "Option::is_none", rename = "loop")]
    pub loop_: Option<LoopStep>,
    /// Stores a value under a key in a collection, for later runs to look up.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub save: Option<SaveStep>,
}

/// Saves one record: an upsert by key whose version grows by one. The
/// step's output is `{collection, key, version, created}`.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct SaveStep {
    /// The collection, named like a step key; collections belong to the
    /// namespace (a flow never reads another namespace's records).
    pub collection: String,
    /// The record's key: one reference (`$steps.fetch.output.id`) or literal
    /// text. A reference must lead to text or a number.
    pub key: String,
    /// What to store: JSON in which a string starting with `$` is one
    /// reference, like a step's `input` (`$steps.fetch.output`). Default: the
    /// previous step's output.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(schema_with = "crate::api::schema::any_json")]
    pub value: Option<Value>,
}

/// One query for stored records, handed to the step as the input `name`.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct Lookup {
    /// The input's name, like a step key; unique among the step's lookups,
    /// its input's keys and the flow's step keys.
    pub name: String,
    /// The collection to read (in the run's namespace).
    pub collection: String,
    /// A condition over `$record` (`{key, value, version, savedAt, run,
    /// step}`) and the run's data; every record when left out.
    #[serde(default, rename = "where", skip_serializing_if = "Option::is_none")]
    pub where_: Option<String>,
    /// A reference under `$record` to sort by (`$record.savedAt`); by key
    /// when left out.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub order_by: Option<String>,
    /// Sorts from the largest value down.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub descending: bool,
    /// The most records to hand over: 1 to 1000, 100 when left out.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub limit: Option<i32>,
}

impl Lookup {
    /// Records handed over when `limit` is left out.
    pub const DEFAULT_LIMIT: u32 = 100;
    /// The largest `limit`.
    pub const MAX_LIMIT: u32 = 1000;

    /// The limit with its default applied.
    pub fn limit(&self) -> u32 {
        self.limit.map_or(Self::DEFAULT_LIMIT, |l| {
            l.clamp(1, Self::MAX_LIMIT as i32) as u32
        })
    }
}

/// The kind of a step, borrowed from its one kind field.
#[derive(Clone, Copy, Debug, PartialEq)]
pub enum StepKind<'a> {
    /// An `agent` step.
    Agent(&'a AgentStep),
    /// A `script` step.
    Script(&'a ScriptStep),
    /// An `http` step.
    Http(&'a HttpStep),
    /// A `message` step.
    Message(&'a MessageStep),
    /// A `condition` step.
    Condition(&'a ConditionStep),
    /// An `approval` step.
    Approval(&'a ApprovalStep),
    /// A `join` step.
    Join(&'a JoinStep),
    /// A `parallel` step.
    Parallel(&'a ParallelStep),
    /// A `loop` step.
    Loop(&'a LoopStep),
    /// A `save` step.
    Save(&'a SaveStep),
}

impl StepKind<'_> {
    /// The YAML field name of this kind, for messages.
    pub fn name(&self) -> &'static str {
        match self {
            StepKind::Agent(_) => "agent",
            StepKind::Script(_) => "script",
            StepKind::Http(_) => "http",
            StepKind::Message(_) => "message",
            StepKind::Condition(_) => "condition",
            StepKind::Approval(_) => "approval",
            StepKind::Join(_) => "join",
            StepKind::Parallel(_) => "parallel",
            StepKind::Loop(_) => "loop",
            StepKind::Save(_) => "save",
        }
    }
}

impl Step {
    /// Every kind field that is set. A valid step has exactly one; the
    /// validator reports none or several, everyone else calls [`Step::kind`].
    pub fn kinds(&self) -> Vec<StepKind<'_>> {
        let mut kinds = Vec::with_capacity(1);
        if let Some(k) = &self.agent {
            kinds.push(StepKind::Agent(k));
        }
        if let Some(k) = &self.script {
            kinds.push(StepKind::Script(k));
        }
        if let Some(k) = &self.http {
            kinds.push(StepKind::Http(k));
        }
        if let Some(k) = &self.message {
            kinds.push(StepKind::Message(k));
        }
        if let Some(k) = &self.condition {
            kinds.push(StepKind::Condition(k));
        }
        if let Some(k) = &self.approval {
            kinds.push(StepKind::Approval(k));
        }
        if let Some(k) = &self.join {
            kinds.push(StepKind::Join(k));
        }
        if let Some(k) = &self.parallel {
            kinds.push(StepKind::Parallel(k));
        }
        if let Some(k) = &self.loop_ {
            kinds.push(StepKind::Loop(k));
        }
        if let Some(k) = &self.save {
            kinds.push(StepKind::Save(k));
        }
        kinds
    }

    /// The step's kind, when it has exactly one.
    pub fn kind(&self) -> Option<StepKind<'_>> {
        match self.kinds().as_slice() {
            [one] => Some(*one),
            _ => None,
        }
    }

    /// How many attempts the step may take (the default applied on read).
    pub fn max_attempts(&self) -> u32 {
        self.attempts.map_or(1, |a| a.max(1) as u32)
    }
}

/// What a failed step does to the run.
#[derive(Serialize, Deserialize, Clone, Copy, Debug, Default, PartialEq, Eq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub enum OnFailure {
    /// The run fails (the default).
    #[default]
    Fail,
    /// Later steps still run and can read the failure.
    Continue,
}

/// An arrow back to an earlier step.
#[derive(Serialize, Deserialize, Clone, Debug, PartialEq, Eq, JsonSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct SendBack {
    /// The exit of this step that sends work back (an approval decision such
    /// as `changes`, a condition path, or `true`/`false`).
    // Named `exit`, not `on`: a YAML 1.1 reader (kubectl, Argo CD) reads a bare
    // `on` key as the boolean true, so no field name may be a YAML 1.1 boolean
    // (a test in `crds` walks the schemas for them).
    pub exit: String,
    /// The earlier step to redo; it and every step after it run again.
    pub to: String,
}

/// Asks a model and records its reply.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct AgentStep {
    /// The model name configured in the controller (default `default`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub model: Option<String>,
    /// The instructions: plain text, never scanned for references. Data
    /// reaches the agent only through `input` and `give`.
    pub prompt: String,
    /// Also tell the agent, in a few sentences, about the flow it works in.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub tell_flow: bool,
    /// Earlier steps whose whole output the agent receives.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub give: Vec<String>,
    /// The shape of the reply (default: text).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub reply: Option<Reply>,
    /// The decisions the agent hands in beside its output, with optional
    /// instructions (at most 10). They are the step's exits: `after:
    /// [KEY.approve]` follows one, and `sendBack` sends work back on one,
    /// with the agent's instructions as the change request.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub decisions: Vec<AgentDecision>,
    /// An earlier step whose work the agent reviews: it receives that
    /// step's output and hands in only its decision and instructions (its
    /// own output), leaving the reviewed work as it is. Needs `decisions`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub reviews: Option<String>,
}

/// One decision an agent may hand in.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, Eq, JsonSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct AgentDecision {
    /// The decision's name, which is also the step's exit.
    pub name: String,
    /// When to take it; passed to the model.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub description: Option<String>,
}

/// The shape of an agent's reply.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct Reply {
    /// `text` (the reply is the output) or `json`: one object (`fields`), a
    /// list (`items`) or several named objects (`objects`).
    #[serde(default)]
    pub format: ReplyFormat,
    /// With `format: json`, the fields of the one object the reply holds.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub fields: Vec<Field>,
    /// With `format: json`, the reply is a list of such items; the output
    /// is `{items: [...]}` (`$steps.KEY.output.items[0]`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub items: Option<Items>,
    /// With `format: json`, the reply holds each of these objects under its
    /// name (`$steps.KEY.output.NAME`).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub objects: Vec<NamedObject>,
}

/// The items of a list output.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, Eq, JsonSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct Items {
    /// The fields of each item, an object; none: any JSON value.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub fields: Vec<Field>,
    /// What the items are; passed to the model.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub description: Option<String>,
}

/// One of several objects a step yields at once, under its name.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, Eq, JsonSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct NamedObject {
    /// Its name in the output: a plain identifier.
    pub name: String,
    /// What it is; passed to the model.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub description: Option<String>,
    /// Its fields (an object), unless it is a list (`items`); neither: any
    /// object.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub fields: Vec<Field>,
    /// It is a list of such items.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub items: Option<Items>,
}

/// The format of an agent's reply.
#[derive(Serialize, Deserialize, Clone, Copy, Debug, Default, PartialEq, Eq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub enum ReplyFormat {
    /// Free text.
    #[default]
    Text,
    /// A JSON object with the declared fields.
    Json,
}

/// A named, typed value a step produces or a person fills in.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, Eq, JsonSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct Field {
    /// The field name: a plain identifier, so placeholders can address it.
    pub name: String,
    /// One of string, number, integer, boolean, array, object; a script's
    /// output may also declare `file`: a file it left in `$OUTPUTS`.
    #[serde(rename = "type")]
    pub type_: String,
    /// What the value means; passed to the model or shown to the person.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub description: Option<String>,
}

impl Field {
    /// A field of type `type_` without a description, as the engine names
    /// a reviewer's decision and tests declare theirs.
    pub fn new(name: &str, type_: &str) -> Field {
        Field {
            name: name.into(),
            type_: type_.into(),
            description: None,
        }
    }

    /// Whether `value` is of this field's type: the one check behind a
    /// script's declared output and a person's entry, so both agree. A whole
    /// number written as a float (`3.0`) is an integer; an unknown type
    /// (the validator refuses those) accepts nothing.
    pub fn accepts(&self, value: &Value) -> bool {
        match self.type_.as_str() {
            "string" | "file" => value.is_string(),
            "number" => value.is_number(),
            "integer" => {
                value.is_i64()
                    || value.is_u64()
                    || value
                        .as_f64()
                        .is_some_and(|f| f.fract() == 0.0 && f.is_finite())
            }
            "boolean" => value.is_boolean(),
            "array" => value.is_array(),
            "object" => value.is_object(),
            _ => false,
        }
    }
}

/// Runs a program with its inputs as files.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct ScriptStep {
    /// The container image in a cluster. Locally the host stands in for it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub image: Option<String>,
    /// A shell script, run with `sh -c`. Give either this or `command`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub source: Option<String>,
    /// The program and its fixed arguments. Give either this or `source`.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub command: Vec<String>,
    /// More arguments after `command`.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub args: Vec<String>,
    /// Extra environment variables.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub env: Vec<EnvVar>,
    /// CPU and memory requests and limits of the Job's container.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub resources: Option<k8s_openapi::api::core::v1::ResourceRequirements>,
    /// The fields the script must print as one JSON object on stdout.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub output: Option<ScriptOutput>,
}

/// An environment variable of a script.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, Eq, JsonSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct EnvVar {
    /// The variable's name.
    pub name: String,
    /// Its value, as written.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub value: Option<String>,
    /// Or its value from a Secret.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub value_from: Option<ValueFrom>,
}

impl EnvVar {
    /// The variable `name` read from `key` of the Secret `secret`, as a
    /// flow declares a credential without writing it down.
    pub fn from_secret(name: &str, secret: &str, key: &str) -> Self {
        EnvVar {
            name: name.into(),
            value: None,
            value_from: Some(ValueFrom {
                secret_key_ref: SecretKeyRef {
                    name: secret.into(),
                    key: key.into(),
                },
            }),
        }
    }
}

/// The declared output of a script: the same shapes as an agent's reply.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, Eq, JsonSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct ScriptOutput {
    /// The fields of the one JSON object the script prints.
    #[serde(default)]
    pub fields: Vec<Field>,
    /// The script prints a JSON array of such items; the output is
    /// `{items: [...]}`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub items: Option<Items>,
    /// The script prints one JSON object holding each of these under its name.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub objects: Vec<NamedObject>,
}

/// Sends one HTTP request.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct HttpStep {
    /// GET (default), POST, PUT, PATCH, DELETE or HEAD.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub method: Option<String>,
    /// The address; placeholders in it are percent-encoded.
    pub url: String,
    /// Query parameters; placeholders are inserted as text, then encoded.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub query: Vec<NameValue>,
    /// Request headers, each a value (placeholders allowed; a line break is
    /// refused) or a value from a Secret.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub headers: Vec<HttpHeader>,
    /// The request body.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub body: Option<HttpBody>,
    /// Values to keep from the response, each a name and a path such as
    /// `json.id` or `json.items.0.url`; they appear as `output.values.NAME`.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub keep: BTreeMap<String, String>,
    /// The longest the request may take (default `30s`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub timeout: Option<String>,
}

/// A name and a text value (query parameters, form fields).
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, Eq, JsonSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct NameValue {
    /// The name.
    pub name: String,
    /// The value; placeholders are inserted as text.
    pub value: String,
}

/// One request header.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, Eq, JsonSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct HttpHeader {
    /// The header name.
    pub name: String,
    /// The value; placeholders are inserted as text.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub value: Option<String>,
    /// Or the value from a Secret, never written to a status or a log.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub value_from: Option<ValueFrom>,
}

/// Where a secret value comes from.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, Eq, JsonSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct ValueFrom {
    /// A key of a Secret in the run's namespace.
    pub secret_key_ref: SecretKeyRef,
}

/// A key of a Secret in the run's namespace.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, Eq, JsonSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct SecretKeyRef {
    /// The Secret's name.
    pub name: String,
    /// The key inside it.
    pub key: String,
}

/// The body of a request: exactly one of `json`, `text` or `form`.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, Eq, JsonSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct HttpBody {
    /// A JSON document with placeholders: inside quotes a value is inserted as
    /// escaped string content, outside quotes as JSON.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub json: Option<String>,
    /// A text body; placeholders are inserted as text.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub text: Option<String>,
    /// Form fields, sent as `application/x-www-form-urlencoded`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub form: Option<Vec<NameValue>>,
}

/// Posts a message.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, Eq, JsonSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct MessageStep {
    /// The message; placeholders are inserted as text.
    pub text: String,
    /// Post to a generic webhook. Give exactly one of `webhook`, `slack`
    /// and `matrix`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub webhook: Option<WebhookTarget>,
    /// Post to Slack with `chat.postMessage`. Give exactly one of `webhook`,
    /// `slack` and `matrix`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub slack: Option<SlackTarget>,
    /// Post to a Matrix room. Give exactly one of `webhook`, `slack` and
    /// `matrix`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub matrix: Option<MatrixTarget>,
}

impl MessageStep {
    /// The names of the targets given (`webhook`, `slack`, `matrix`), in
    /// that order: a valid step gives exactly one.
    pub fn targets(&self) -> Vec<&'static str> {
        [
            ("webhook", self.webhook.is_some()),
            ("slack", self.slack.is_some()),
            ("matrix", self.matrix.is_some()),
        ]
        .into_iter()
        .filter_map(|(name, given)| given.then_some(name))
        .collect()
    }
}

/// A generic webhook that receives `{"text": …}`.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, Eq, JsonSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct WebhookTarget {
    /// The webhook's address.
    pub url: String,
}

/// A Slack channel.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, Eq, JsonSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct SlackTarget {
    /// The channel, such as `#ops` or a channel id.
    pub channel: String,
    /// The Secret key holding the bot token.
    pub token_secret_ref: SecretKeyRef,
    /// The `ts` of the message whose thread to answer in, such as
    /// `{{input.json.thread}}` in a run started from chat; empty or absent
    /// posts to the channel itself.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub thread: Option<String>,
}

/// A Matrix room, posted to as the user whose access token the Secret holds.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, Eq, JsonSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct MatrixTarget {
    /// The homeserver's base URL, such as `https://matrix.example.org`.
    pub homeserver: String,
    /// The room: an id (`!abc:example.org`) or an alias (`#ops:example.org`),
    /// written out (no placeholders). The token's user must have joined it.
    pub room: String,
    /// The Secret key holding the access token.
    pub token_secret_ref: SecretKeyRef,
    /// The event id of the message whose thread to answer in, such as
    /// `{{input.json.thread}}` in a run started from chat; empty or absent
    /// posts to the room itself.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub thread: Option<String>,
}

/// Chooses a path.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, Eq, JsonSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct ConditionStep {
    /// One condition: the step exits `true` or `false`. Give either this or `paths`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub when: Option<String>,
    /// Named paths, tried in order; the first whose condition holds is taken.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub paths: Vec<ConditionPath>,
    /// The exit taken when no path holds (default `otherwise`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub otherwise: Option<String>,
}

/// A named path of a condition step.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, Eq, JsonSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct ConditionPath {
    /// The exit's name, used in `after: [KEY.NAME]`.
    pub name: String,
    /// The condition that takes this path.
    pub when: String,
}

/// Waits for a person.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, Eq, JsonSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct ApprovalStep {
    /// `review` (pick a decision, default), `entry` (fill in `fields`) or
    /// `both` (pick a decision and fill in `fields` in the same answer).
    #[serde(default)]
    pub mode: ApprovalMode,
    /// Earlier steps whose output the person sees.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub show: Vec<String>,
    /// The decisions a reviewer may pick; each is an exit of the step.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub decisions: Vec<String>,
    /// In entry mode, what the person fills in.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub fields: Vec<Field>,
    /// Who may decide; anyone with RBAC to patch the Approval when unset.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub approvers: Option<Approvers>,
    /// Guidance shown to the person.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub instructions: Option<String>,
    /// Whether the person who created the run may decide this step too
    /// (default false: nobody approves their own run).
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub allow_self_approval: bool,
    /// How many different approvers must pick the same decision before it
    /// is taken (default 1; review mode only). A decision that sends work
    /// back is taken on the first answer that picks it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub approvals: Option<i32>,
}

impl ApprovalStep {
    /// How many approvers must agree (the default applied on read).
    pub fn required_approvals(&self) -> u32 {
        self.approvals.map_or(1, |n| n.max(1) as u32)
    }
}

/// The kinds of person step.
#[derive(Serialize, Deserialize, Clone, Copy, Debug, Default, PartialEq, Eq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub enum ApprovalMode {
    /// Pick one of `decisions`, with optional feedback.
    #[default]
    Review,
    /// Fill in `fields`.
    Entry,
    /// Pick one of `decisions` and fill in `fields`, in one answer: a
    /// person reviews what the step shows and enters more data beside it.
    Both,
}

impl ApprovalMode {
    /// Whether an answer in this mode picks a decision.
    pub fn decides(self) -> bool {
        matches!(self, ApprovalMode::Review | ApprovalMode::Both)
    }

    /// Whether an answer in this mode fills in fields.
    pub fn enters(self) -> bool {
        matches!(self, ApprovalMode::Entry | ApprovalMode::Both)
    }
}

/// Who may decide an approval.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, Eq, JsonSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct Approvers {
    /// User names, as the API server authenticates them.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub users: Vec<String>,
    /// Group names; a member of any of them may decide.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub groups: Vec<String>,
}

/// Waits for its branches.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, Eq, JsonSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct JoinStep {}

/// Runs one part per item or per listed part.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct ParallelStep {
    /// A reference to a list (`$input.companies`): one part per item, which
    /// the part reads as `$item` (and its position as `$index`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(schema_with = "crate::api::schema::any_json")]
    pub items: Option<Value>,
    /// Or named parts, each with its own input.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub parts: Vec<ParallelPart>,
    /// At most this many parts run at once (default: all).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub max_concurrency: Option<i32>,
    /// The step each part runs.
    #[schemars(schema_with = "crate::api::schema::nested_step")]
    pub step: Box<Step>,
}

/// A named part of a parallel step.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct ParallelPart {
    /// The part's key in `output.by_key`.
    pub key: String,
    /// A readable name (default: the key).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub label: Option<String>,
    /// What the part reads as `$item`; references allowed.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(schema_with = "crate::api::schema::any_json")]
    pub input: Option<Value>,
}

/// Runs its steps pass after pass.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct LoopStep {
    /// Checked after each pass; the loop ends when it holds.
    pub until: String,
    /// Passes allowed; one more fails the loop.
    pub max_iterations: i32,
    /// The steps of each pass.
    #[schemars(schema_with = "crate::api::schema::nested_steps")]
    pub steps: Vec<Step>,
}
