//! What can go wrong with a template, in words meant for the flow's author.
//!
//! Two kinds of failure exist and they happen at different times: a
//! [`TemplateError`] is found when the flow is saved (the text itself is
//! wrong), a [`RenderError`] when a step runs (the data is not there or may not
//! go where the placeholder stands).

/// A template that cannot be read, found when the flow is saved.
///
/// `position` is the 1-based character (not byte) where reading stopped, so the
/// validator can point at it in the YAML the author wrote.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("character {position}: {message}")]
pub struct TemplateError {
    /// 1-based character position in the template text.
    pub position: usize,
    /// What is wrong and how to fix it, addressed to the author.
    pub message: String,
}

impl TemplateError {
    pub(crate) fn new(position: usize, message: impl Into<String>) -> Self {
        TemplateError {
            position,
            message: message.into(),
        }
    }
}

/// Why a template could not be filled in when its step ran.
///
/// Any of these fails the step: a placeholder is never quietly replaced by an
/// empty string or by a value that would change the meaning of a request.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum RenderError {
    /// The step or input the placeholder reads has no value at that path. The
    /// message is the one users see, word for word.
    #[error("No value for {placeholder}: that step did not run or did not produce it.")]
    Missing {
        /// The placeholder as written, e.g. `{{fetch.json.id}}`.
        placeholder: String,
        /// 1-based character position of its `{{`.
        position: usize,
    },
    /// A value meant for an HTTP header holds CR or LF, which would let it
    /// start a new header line.
    #[error("The value for {placeholder} contains a line break, which a header value cannot hold.")]
    HeaderLineBreak {
        /// The placeholder as written.
        placeholder: String,
        /// 1-based character position of its `{{`.
        position: usize,
    },
    /// A value meant for an HTTP header holds another control character
    /// (other than tab), which HTTP does not allow in a header value.
    #[error(
        "The value for {placeholder} contains a control character, which a header value cannot hold."
    )]
    HeaderControl {
        /// The placeholder as written.
        placeholder: String,
        /// 1-based character position of its `{{`.
        position: usize,
    },
    /// A value in a URL's path that is `.` or `..`, or becomes one when
    /// percent-decoded (`%2e`, `%2E%2e`…): the segment would be resolved
    /// away and the request, with any Secret its step binds, sent to another
    /// path than the one the flow names.
    #[error(
        "The value for {placeholder} would make a segment of the URL's path `.` or `..` (also when percent-decoded), which would send the request to another path; a value in the path cannot be `.` or `..`."
    )]
    DotSegment {
        /// The placeholder as written.
        placeholder: String,
        /// 1-based character position of its `{{`.
        position: usize,
    },
}

impl RenderError {
    /// Where the offending placeholder starts (1-based character), so the
    /// step's error can point at it.
    pub fn position(&self) -> usize {
        match self {
            RenderError::Missing { position, .. }
            | RenderError::HeaderLineBreak { position, .. }
            | RenderError::HeaderControl { position, .. }
            | RenderError::DotSegment { position, .. } => *position,
        }
    }
}
