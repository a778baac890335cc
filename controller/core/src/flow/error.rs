//! [`FlowError`]: what is wrong with a flow's text or one of its fields,
//! before any validation of the flow as a whole. Each message is written for
//! the person who typed the YAML, and names the value at fault.

use super::nesting::TooDeep;

/// Why part of a flow cannot be read: a duration, a cron schedule, a
/// keyword of an input schema, or the YAML documents themselves.
#[derive(Debug, thiserror::Error)]
pub enum FlowError {
    /// A duration that is blank.
    #[error("a duration cannot be empty; write it like `30s`, `5m` or `1h30m`")]
    EmptyDuration,
    /// A duration that does not start with a number.
    #[error("`{0}` is not a duration; write it like `30s`, `5m` or `1h30m`")]
    NotADuration(String),
    /// A number in a duration too large to hold.
    #[error("`{0}` is too long a duration")]
    DurationTooLong(String),
    /// A number in a duration with no unit after it.
    #[error("`{text}` needs a unit after {number}: ms, s, m, h or d")]
    NoUnit {
        /// The duration.
        text: String,
        /// The number without a unit.
        number: u64,
    },
    /// A unit that is not one of ms, s, m, h, d.
    #[error("`{unit}` in `{text}` is not a unit; use ms, s, m, h or d")]
    UnknownUnit {
        /// The unit written.
        unit: String,
        /// The duration.
        text: String,
    },
    /// A cron schedule with other than five fields.
    #[error(
        "`{cron}` has {count} fields; a cron schedule has five: minute, hour, day of month, month, day of week"
    )]
    CronFieldCount {
        /// The schedule.
        cron: String,
        /// How many fields it has.
        count: usize,
    },
    /// One field of a cron schedule that is not valid.
    #[error(
        "`{cron}`: the {name} field `{field}` is not valid; it takes {allowed}, `*`, lists `a,b`, ranges `a-b` and steps `*/n`"
    )]
    CronField {
        /// The schedule.
        cron: String,
        /// Which field (`minute`, `hour`…).
        name: &'static str,
        /// The field as written.
        field: String,
        /// The values it allows.
        allowed: &'static str,
    },
    /// A cron schedule the parser refuses for another reason.
    #[error("`{cron}` is not a cron schedule: {reason}")]
    NotCron {
        /// The schedule.
        cron: String,
        /// The parser's reason.
        reason: String,
    },
    /// `type` in an input schema names no JSON type.
    #[error("{name} is not a type; the types are {types}")]
    UnknownType {
        /// The value given, as JSON.
        name: String,
        /// The types allowed, comma separated.
        types: String,
    },
    /// `properties` in an input schema is not an object.
    #[error("properties is an object of schemas, by field name")]
    PropertiesNotObject,
    /// `required` in an input schema is not a list of names.
    #[error("required is a list of field names")]
    RequiredNotNames,
    /// `additionalProperties` given as a schema.
    #[error(
        "additionalProperties is true or false here; a schema for the other fields is not supported"
    )]
    AdditionalPropertiesSchema,
    /// `enum` in an input schema is not a list.
    #[error("enum is a list of the allowed values")]
    EnumNotList,
    /// `minimum` or `maximum` is not a number.
    #[error("{0} is a number")]
    NotANumber(String),
    /// A length or count bound that is not a whole number.
    #[error("{0} is a whole number, 0 or more")]
    NotACount(String),
    /// A keyword the input check would ignore.
    #[error(
        "`{0}` is not supported in an input schema, so it would not be checked; the supported keywords are type, properties, required, additionalProperties, items, enum, minimum, maximum, minLength, maxLength, minItems, maxItems (and title, description, examples, $comment)"
    )]
    UnsupportedKeyword(String),
    /// Brackets nested too deep to parse.
    #[error(transparent)]
    TooDeep(#[from] TooDeep),
    /// Text that is not YAML, or a Flow document that does not fit the
    /// Flow type (with line and column).
    #[error(transparent)]
    Yaml(#[from] serde_yaml::Error),
}
