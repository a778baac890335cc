//! The shapes a step's output may take, as the flow declares them, and the
//! one check behind each: an agent's reply and a script's stdout are read
//! by the same rules, the model gets the same JSON Schema, and the
//! validator types references into declared outputs from the same shape.
//!
//! | declared | output |
//! |---|---|
//! | nothing (an agent) | the text |
//! | nothing (a script) | any JSON (`{"data": v}` is `v`) |
//! | `fields` | one object with exactly those fields |
//! | `items` | `{items: [...]}`: a list of such items (handed in bare or wrapped) |
//! | `objects` | one object holding each named object under its name |

use serde_json::{Map, Value, json};

use crate::api::{Field, Items, NamedObject, Reply, ReplyFormat, ScriptOutput};
use crate::text::{floor_boundary, quote_list};

/// The field types a reply, a script output or an entry may declare.
pub const FIELD_TYPES: [&str; 6] = ["string", "number", "integer", "boolean", "array", "object"];

/// The field type of a script output naming a file the script left in
/// `$OUTPUTS`: text, a path relative to `$OUTPUTS` (or under it). In a run
/// with a workspace it becomes the path where the file is kept.
pub const FILE_TYPE: &str = "file";

/// The key a list output keeps its items under.
pub const ITEMS_KEY: &str = "items";

/// What a step yields, borrowed from its declaration.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum Shape<'a> {
    /// Free text: an agent without `format: json`.
    Text,
    /// Any JSON: a script that declares no output.
    Any,
    /// One object with these fields (none: any object).
    Object(&'a [Field]),
    /// A list of these items.
    List(&'a Items),
    /// Several objects, each under its name.
    Objects(&'a [NamedObject]),
}

impl<'a> Shape<'a> {
    /// The shape of an agent's reply (text when it declares none).
    pub fn of_reply(reply: Option<&'a Reply>) -> Shape<'a> {
        match reply {
            Some(r) if r.format == ReplyFormat::Json => {
                structured(&r.fields, r.items.as_ref(), &r.objects)
            }
            _ => Shape::Text,
        }
    }

    /// The shape of a script's stdout (any JSON when it declares none).
    pub fn of_script(output: Option<&'a ScriptOutput>) -> Shape<'a> {
        match output {
            Some(o) if !(o.fields.is_empty() && o.items.is_none() && o.objects.is_empty()) => {
                structured(&o.fields, o.items.as_ref(), &o.objects)
            }
            _ => Shape::Any,
        }
    }

    /// Whether the output is JSON the step must hand in to a contract.
    pub fn is_structured(&self) -> bool {
        !matches!(self, Shape::Text | Shape::Any)
    }

    /// The JSON Schema of what is handed in: always an object, since tool
    /// arguments must be one (a list is handed in as `{items: [...]}`).
    pub fn schema(&self) -> Value {
        match self {
            Shape::Text | Shape::Any => json!({"type": "object"}),
            Shape::Object(fields) => object_schema(fields, None),
            Shape::List(items) => closed_object(vec![(ITEMS_KEY.to_string(), list_schema(items))]),
            Shape::Objects(objects) => closed_object(
                objects
                    .iter()
                    .map(|o| (o.name.clone(), named_schema(o)))
                    .collect(),
            ),
        }
    }

    /// In a sentence, what must be handed in: for messages to the model
    /// (the repair turn) and to the person reading a failed step.
    pub fn describe(&self) -> String {
        match self {
            Shape::Text => "text".into(),
            Shape::Any => "any JSON".into(),
            Shape::Object([]) => "one JSON object".into(),
            Shape::Object(fields) => format!("one JSON object with the fields {}", names(fields)),
            Shape::List(items) => format!("a JSON array of {}", describe_items(items)),
            Shape::Objects(objects) => {
                let each = quote_list(objects.iter().map(|o| &o.name));
                format!("one JSON object holding {each}")
            }
        }
    }

    /// Checks what was handed in and returns the output kept: integers
    /// written as `3.0` made `3`, a list wrapped as `{items: [...]}`. The
    /// error lists every problem, each naming where it is.
    pub fn check(&self, value: Value) -> Result<Value, Vec<String>> {
        match self {
            Shape::Text | Shape::Any => Ok(value),
            Shape::Object(fields) => check_object(fields, value, ""),
            Shape::List(items) => {
                let list = unwrap_items(value).map_err(|found| {
                    vec![format!(
                        "expected a JSON array (or `{{\"{ITEMS_KEY}\": [...]}}`), found {found}"
                    )]
                })?;
                Ok(json!({ ITEMS_KEY: check_items(items, list, "")? }))
            }
            Shape::Objects(objects) => check_objects(objects, value),
        }
    }
}

/// One hop of a path read in a step's output: `.name`, `[n]`, or a
/// placeholder's number (`json.items.0`), which reads a list's item or an
/// object's field of that name.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Hop {
    /// `.name` or `["name"]`.
    Key(String),
    /// `[n]`.
    Index,
    /// A placeholder's `.0`.
    Either(String),
}

impl std::fmt::Display for Hop {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Hop::Key(k) | Hop::Either(k) => write!(f, "{k}"),
            Hop::Index => write!(f, "[…]"),
        }
    }
}

/// What a place in a declared output holds, as far as the declaration says.
#[derive(Debug, Clone, Copy)]
enum Held<'a> {
    /// Whatever the declaration leaves open: nothing more is checked.
    Open,
    /// The text of an agent without `format: json`.
    Text,
    /// A value of this field type with nothing inside.
    Scalar(&'a str),
    /// An object with these fields.
    Object(&'a [Field]),
    /// A list output's wrapper: `{items: [...]}`.
    Wrapper(&'a Items),
    /// A list whose items are objects with these fields (none: anything).
    List(&'a [Field]),
    /// Several objects under their names.
    Objects(&'a [NamedObject]),
}

impl<'a> Shape<'a> {
    /// Whether `hops` can be read in the output of `step` (whose shape
    /// this is), as far as its declaration says; `Err` says why not, in
    /// words for the person who wrote the reference.
    pub fn check_read(&self, step: &str, hops: &[Hop]) -> Result<(), String> {
        let mut held = match self {
            Shape::Text => Held::Text,
            Shape::Any | Shape::Object([]) => Held::Open,
            Shape::Object(fields) => Held::Object(fields),
            Shape::List(items) => Held::Wrapper(items),
            Shape::Objects(objects) => Held::Objects(objects),
        };
        let mut at = format!("the output of `{step}`");
        for hop in hops {
            held = read_hop(held, hop, step, &at)?;
            at = match hop {
                Hop::Key(k) | Hop::Either(k) => format!("`{k}`"),
                Hop::Index => "the item".into(),
            };
        }
        Ok(())
    }
}

fn read_hop<'a>(held: Held<'a>, hop: &Hop, step: &str, at: &str) -> Result<Held<'a>, String> {
    let key = match hop {
        Hop::Key(k) | Hop::Either(k) => Some(k.as_str()),
        Hop::Index => None,
    };
    let index = matches!(hop, Hop::Index | Hop::Either(_));
    match held {
        Held::Open => Ok(Held::Open),
        Held::Text => Err(format!(
            "`{step}` yields text, so its output has no `{hop}`; read it whole, or declare `reply.format: json`"
        )),
        Held::Scalar(t) => Err(format!("{at} is {} {t}, so it has no `{hop}`", article(t))),
        Held::List(fields) if index => Ok(match fields {
            [] => Held::Open,
            fields => Held::Object(fields),
        }),
        Held::List(_) => Err(format!(
            "{at} is a list, so it has no `{hop}`; read an item first (`[0]`)"
        )),
        Held::Wrapper(items) => match key {
            Some(ITEMS_KEY) => Ok(Held::List(&items.fields)),
            _ => Err(format!(
                "`{step}` yields a list, kept under `{ITEMS_KEY}`: read `{ITEMS_KEY}[0]`, not `{hop}`"
            )),
        },
        Held::Object(fields) => {
            let Some(key) = key else {
                return Err(format!("{at} is an object, not a list"));
            };
            match fields.iter().find(|f| f.name == key) {
                Some(field) => Ok(held_by(&field.type_)),
                None => Err(not_there(
                    step,
                    at,
                    key,
                    fields.iter().map(|f| f.name.as_str()),
                )),
            }
        }
        Held::Objects(objects) => {
            let Some(key) = key else {
                return Err(format!("{at} is an object, not a list"));
            };
            match objects.iter().find(|o| o.name == key) {
                Some(NamedObject {
                    items: Some(items), ..
                }) => Ok(Held::List(&items.fields)),
                Some(object) if object.fields.is_empty() => Ok(Held::Open),
                Some(object) => Ok(Held::Object(&object.fields)),
                None => Err(not_there(
                    step,
                    at,
                    key,
                    objects.iter().map(|o| o.name.as_str()),
                )),
            }
        }
    }
}

/// What a field of this type holds.
fn held_by(type_: &str) -> Held<'_> {
    match type_ {
        "object" | "array" => Held::Open,
        scalar => Held::Scalar(scalar),
    }
}

/// `` `write` yields `tagline`, not `taglin` `` when a name is a slip of
/// the keyboard, else every name there is.
fn not_there<'n>(step: &str, at: &str, key: &str, names: impl Iterator<Item = &'n str>) -> String {
    let names: Vec<&str> = names.collect();
    let whose = if at.starts_with("the output of") {
        format!("`{step}`")
    } else {
        at.to_string()
    };
    match super::suggest::closest(key, names.iter().copied()) {
        Some(near) => format!("{whose} yields `{near}`, not `{key}`"),
        None => {
            format!("{whose} yields {}; it has no `{key}`", quote_list(names))
        }
    }
}

fn structured<'a>(
    fields: &'a [Field],
    items: Option<&'a Items>,
    objects: &'a [NamedObject],
) -> Shape<'a> {
    match (items, objects.is_empty()) {
        (Some(items), _) => Shape::List(items),
        (None, false) => Shape::Objects(objects),
        (None, true) => Shape::Object(fields),
    }
}

fn names(fields: &[Field]) -> String {
    let names: Vec<&str> = fields.iter().map(|f| f.name.as_str()).collect();
    names.join(", ")
}

fn describe_items(items: &Items) -> String {
    if items.fields.is_empty() {
        "items (any JSON)".into()
    } else {
        format!("objects with the fields {}", names(&items.fields))
    }
}

/// The JSON Schema type of a declared field type (`file`: its path, text).
fn json_type(t: &str) -> Option<&'static str> {
    match t {
        "string" | "file" => Some("string"),
        "number" => Some("number"),
        "integer" => Some("integer"),
        "boolean" => Some("boolean"),
        "array" => Some("array"),
        "object" => Some("object"),
        _ => None,
    }
}

fn object_schema(fields: &[Field], description: Option<&str>) -> Value {
    let mut schema = if fields.is_empty() {
        json!({"type": "object"})
    } else {
        let properties = fields
            .iter()
            .map(|field| {
                let mut prop = Map::new();
                if let Some(t) = json_type(&field.type_) {
                    prop.insert("type".into(), Value::String(t.into()));
                }
                if let Some(d) = &field.description {
                    prop.insert("description".into(), Value::String(d.clone()));
                }
                (field.name.clone(), Value::Object(prop))
            })
            .collect();
        closed_object(properties)
    };
    if let Some(d) = description {
        schema["description"] = Value::String(d.into());
    }
    schema
}

/// An object with exactly these properties, all required.
fn closed_object(properties: Vec<(String, Value)>) -> Value {
    let required: Vec<Value> = properties
        .iter()
        .map(|(name, _)| Value::String(name.clone()))
        .collect();
    json!({
        "type": "object",
        "properties": properties.into_iter().collect::<Map<_, _>>(),
        "required": required,
        "additionalProperties": false,
    })
}

fn list_schema(items: &Items) -> Value {
    let item = if items.fields.is_empty() {
        json!({})
    } else {
        object_schema(&items.fields, None)
    };
    let mut schema = json!({"type": "array", "items": item});
    if let Some(d) = &items.description {
        schema["description"] = Value::String(d.clone());
    }
    schema
}

fn named_schema(object: &NamedObject) -> Value {
    match &object.items {
        Some(items) => {
            let mut schema = list_schema(items);
            if let Some(d) = &object.description {
                schema["description"] = Value::String(d.clone());
            }
            schema
        }
        None => object_schema(&object.fields, object.description.as_deref()),
    }
}

/// A list handed in bare, or as `{items: [...]}` (tool arguments must be
/// an object); `Err` names what was found instead.
fn unwrap_items(value: Value) -> Result<Vec<Value>, String> {
    match value {
        Value::Array(list) => Ok(list),
        Value::Object(mut map) if map.len() == 1 && map.contains_key(ITEMS_KEY) => {
            match map.remove(ITEMS_KEY) {
                Some(Value::Array(list)) => Ok(list),
                Some(other) => Err(format!("`{ITEMS_KEY}` holding {}", kind_of(&other))),
                None => Err("an object".into()),
            }
        }
        other => Err(describe(&other)),
    }
}

fn check_items(items: &Items, list: Vec<Value>, at: &str) -> Result<Vec<Value>, Vec<String>> {
    if items.fields.is_empty() {
        return Ok(list);
    }
    let mut problems = Vec::new();
    let mut kept = Vec::with_capacity(list.len());
    for (i, item) in list.into_iter().enumerate() {
        match check_object(&items.fields, item, &format!("{at}item {i}: ")) {
            Ok(item) => kept.push(item),
            Err(found) => problems.extend(found),
        }
    }
    if problems.is_empty() {
        Ok(kept)
    } else {
        Err(problems)
    }
}

fn check_objects(objects: &[NamedObject], value: Value) -> Result<Value, Vec<String>> {
    let Value::Object(mut map) = value else {
        return Err(vec![format!(
            "expected a JSON object holding {}, found {}",
            quote_list(objects.iter().map(|o| &o.name)),
            describe(&value)
        )]);
    };
    let names: Vec<&str> = objects.iter().map(|o| o.name.as_str()).collect();
    let mut problems: Vec<String> = unexpected(map.keys(), &names, "").into_iter().collect();
    let mut kept = Map::new();
    for object in objects {
        let at = format!("`{}`: ", object.name);
        let Some(value) = map.remove(&object.name) else {
            problems.push(format!("missing `{}`", object.name));
            continue;
        };
        let checked = match &object.items {
            Some(items) => match value {
                Value::Array(list) => check_items(items, list, &at).map(Value::Array),
                other => Err(vec![format!(
                    "{at}expected a JSON array, found {}",
                    describe(&other)
                )]),
            },
            None => check_object(&object.fields, value, &at),
        };
        match checked {
            Ok(value) => {
                kept.insert(object.name.clone(), value);
            }
            Err(found) => problems.extend(found),
        }
    }
    if problems.is_empty() {
        Ok(Value::Object(kept))
    } else {
        Err(problems)
    }
}

/// One object against its fields: each present with its type, nothing
/// else; with no fields, any object. `at` prefixes each problem.
fn check_object(fields: &[Field], value: Value, at: &str) -> Result<Value, Vec<String>> {
    let Value::Object(mut object) = value else {
        return Err(vec![format!(
            "{at}expected a JSON object, found {}",
            describe(&value)
        )]);
    };
    if fields.is_empty() {
        return Ok(Value::Object(object));
    }
    let mut problems = Vec::new();
    for field in fields {
        match object.get_mut(&field.name) {
            None => problems.push(format!(
                "{at}missing field `{}` ({})",
                field.name, field.type_
            )),
            Some(v) if !field.accepts(v) => problems.push(format!(
                "{at}field `{}` must be {} {}, found {}",
                field.name,
                article(&field.type_),
                field.type_,
                describe(v)
            )),
            Some(v) => {
                if field.type_ == "integer"
                    && let Some(whole) = v.as_f64().filter(|_| v.is_f64())
                {
                    *v = Value::from(whole as i64);
                }
            }
        }
    }
    let allowed: Vec<&str> = fields.iter().map(|f| f.name.as_str()).collect();
    problems.extend(unexpected(object.keys(), &allowed, at));
    if problems.is_empty() {
        Ok(Value::Object(object))
    } else {
        Err(problems)
    }
}

/// The problem of keys not among `allowed`, if any.
fn unexpected<'k>(
    keys: impl Iterator<Item = &'k String>,
    allowed: &[&str],
    at: &str,
) -> Option<String> {
    let mut extras: Vec<String> = keys
        .filter(|k| !allowed.contains(&k.as_str()))
        .map(|k| format!("`{k}`"))
        .collect();
    if extras.is_empty() {
        return None;
    }
    extras.sort();

    Some(format!(
        "{at}unexpected field{} {}: only {} may be given",
        if extras.len() == 1 { "" } else { "s" },
        extras.join(", "),
        quote_list(allowed)
    ))
}

fn article(t: &str) -> &'static str {
    match t.chars().next() {
        Some('a' | 'e' | 'i' | 'o' | 'u') => "an",
        _ => "a",
    }
}

/// The JSON kind of a value, with its article, for messages.
pub fn kind_of(v: &Value) -> &'static str {
    match v {
        Value::Null => "null",
        Value::Bool(_) => "a boolean",
        Value::Number(n) if n.is_f64() => "a number",
        Value::Number(_) => "an integer",
        Value::String(_) => "a string",
        Value::Array(_) => "an array",
        Value::Object(_) => "an object",
    }
}

/// The kind and a short preview of a value, for messages.
fn describe(v: &Value) -> String {
    let mut shown = v.to_string();
    if shown.len() > 60 {
        shown.truncate(floor_boundary(&shown, 57));
        shown.push('…');
    }
    format!("{} ({shown})", kind_of(v))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn action_items() -> Items {
        Items {
            fields: vec![Field::new("owner", "string"), Field::new("due", "integer")],
            description: Some("every action item".into()),
        }
    }

    #[test]
    fn a_list_is_taken_bare_or_wrapped_and_kept_wrapped() {
        let items = action_items();
        let shape = Shape::List(&items);
        let bare = json!([{"owner": "ana", "due": 3.0}]);
        let kept = json!({"items": [{"owner": "ana", "due": 3}]});
        assert_eq!(shape.check(bare), Ok(kept.clone()));
        assert_eq!(shape.check(kept.clone()), Ok(kept));
        assert_eq!(
            shape.check(json!([{"owner": 1, "due": 2}, {"due": 2}])),
            Err(vec![
                "item 0: field `owner` must be a string, found an integer (1)".to_string(),
                "item 1: missing field `owner` (string)".to_string(),
            ])
        );
        assert_eq!(
            shape.check(json!({"owner": "ana"})),
            Err(vec![
                "expected a JSON array (or `{\"items\": [...]}`), found an object ({\"owner\":\"ana\"})"
                    .to_string()
            ])
        );
        let schema = shape.schema();
        assert_eq!(schema["required"], json!(["items"]));
        assert_eq!(schema["properties"]["items"]["type"], "array");
        assert_eq!(
            schema["properties"]["items"]["items"]["required"],
            json!(["owner", "due"])
        );
        assert_eq!(
            shape.describe(),
            "a JSON array of objects with the fields owner, due"
        );
    }

    #[test]
    fn several_objects_are_each_checked_under_their_name() {
        let objects = vec![
            NamedObject {
                name: "summary".into(),
                fields: vec![Field::new("text", "string")],
                ..Default::default()
            },
            NamedObject {
                name: "risks".into(),
                items: Some(Items::default()),
                ..Default::default()
            },
        ];
        let shape = Shape::Objects(&objects);
        let good = json!({"summary": {"text": "ok"}, "risks": ["late", {"any": 1}]});
        assert_eq!(shape.check(good.clone()), Ok(good));
        assert_eq!(
            shape.check(json!({"summary": {"text": 1}, "risks": {}, "extra": 0})),
            Err(vec![
                "unexpected field `extra`: only `summary`, `risks` may be given".to_string(),
                "`summary`: field `text` must be a string, found an integer (1)".to_string(),
                "`risks`: expected a JSON array, found an object ({})".to_string(),
            ])
        );
        assert_eq!(
            shape.check(json!({"summary": {"text": "x"}})),
            Err(vec!["missing `risks`".to_string()])
        );
        let schema = shape.schema();
        assert_eq!(schema["required"], json!(["summary", "risks"]));
        assert_eq!(schema["properties"]["risks"]["type"], "array");
        assert_eq!(
            shape.describe(),
            "one JSON object holding `summary`, `risks`"
        );
    }

    #[test]
    fn reads_are_typed_by_the_declaration() {
        let fields = vec![Field::new("tagline", "string"), Field::new("tags", "array")];
        let key = |k: &str| Hop::Key(k.into());
        let post = Shape::Object(&fields);
        assert_eq!(post.check_read("write", &[key("tagline")]), Ok(()));
        assert_eq!(post.check_read("write", &[key("tags"), Hop::Index]), Ok(()));
        assert_eq!(
            post.check_read("write", &[key("taglin")]),
            Err("`write` yields `tagline`, not `taglin`".into())
        );
        assert_eq!(
            post.check_read("write", &[key("summary")]),
            Err("`write` yields `tagline`, `tags`; it has no `summary`".into())
        );
        assert_eq!(
            post.check_read("write", &[key("tagline"), key("x")]),
            Err("`tagline` is a string, so it has no `x`".into())
        );
        assert_eq!(
            post.check_read("write", &[Hop::Index]),
            Err("the output of `write` is an object, not a list".into())
        );
        assert!(
            Shape::Text
                .check_read("write", &[key("title")])
                .unwrap_err()
                .starts_with("`write` yields text, so its output has no `title`")
        );
        let items = action_items();
        let list = Shape::List(&items);
        assert_eq!(
            list.check_read("notes", &[key("items"), Hop::Index, key("owner")]),
            Ok(())
        );
        assert_eq!(
            list.check_read(
                "notes",
                &[key("items"), Hop::Either("0".into()), key("due")]
            ),
            Ok(())
        );
        assert_eq!(
            list.check_read("notes", &[key("items"), Hop::Index, key("onwer")]),
            Err("the item yields `owner`, not `onwer`".into())
        );
        assert_eq!(
            list.check_read("notes", &[key("items"), key("owner")]),
            Err("`items` is a list, so it has no `owner`; read an item first (`[0]`)".into())
        );
        assert_eq!(
            list.check_read("notes", &[Hop::Index]),
            Err("`notes` yields a list, kept under `items`: read `items[0]`, not `[…]`".into())
        );
        assert_eq!(Shape::Any.check_read("s", &[key("x"), Hop::Index]), Ok(()));
    }

    #[test]
    fn shapes_come_from_the_declarations() {
        let reply: Reply = serde_json::from_value(json!({"format": "json", "items": {}})).unwrap();
        assert!(matches!(Shape::of_reply(Some(&reply)), Shape::List(_)));
        let text: Reply = serde_json::from_value(json!({"fields": []})).unwrap();
        assert_eq!(Shape::of_reply(Some(&text)), Shape::Text);
        assert_eq!(Shape::of_reply(None), Shape::Text);
        let none: ScriptOutput = serde_json::from_value(json!({})).unwrap();
        assert_eq!(Shape::of_script(Some(&none)), Shape::Any);
        assert_eq!(Shape::of_script(None), Shape::Any);
        let objects: ScriptOutput =
            serde_json::from_value(json!({"objects": [{"name": "a"}]})).unwrap();
        assert!(matches!(
            Shape::of_script(Some(&objects)),
            Shape::Objects([_])
        ));
    }
}
