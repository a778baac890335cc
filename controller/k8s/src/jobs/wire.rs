//! How a step's pod hands its result back without API credentials: through
//! what the kubelet already reports, the container's termination message
//! and its log.
//!
//! The result is one JSON object, [`WireResult`]: `{"output": …, "text": …}`
//! for a finished attempt, `{"error": {"code": …, "message": …}}` for a
//! failed one.
//!
//! The termination message (at most [`TERMINATION_MESSAGE_MAX`] bytes, the
//! kubelet's cap) is always one JSON object with `"coxswain": "v1"` and
//! either
//! - `"result": RESULT` — the whole result, when it fits; or
//! - `"log": {"bytes": N, "sha256": HEX}` — the result is in the log.
//!
//! In the second case the container's stdout (its log) ends with one
//! frame: a line `coxswain-result v1 N HEX`, then exactly the `N` bytes of
//! the result's JSON, then a line break. What the log holds before it (the
//! script's stderr and the start of its stdout, which the wrapper copies
//! there for `kubectl logs`, a runtime's messages) is ignored: the reader
//! takes the last header line of the log's last lines, and the length and
//! SHA-256 digest tell it when the log was cut or mixed with other bytes,
//! which is reported as an error, never taken as a result. Nothing is
//! written after the frame: the script's processes are gone by then, and
//! what they print reaches the log only through the wrapper.

use serde::{Deserialize, Serialize};
use serde_json::Value;
use sha2::{Digest, Sha256};

use crate::names::hex;
use coxswain_core::api::{LogTail, StepError};
use coxswain_core::engine::{Done, Failed, WorkResult};

/// The most bytes of a termination message the kubelet keeps.
pub const TERMINATION_MESSAGE_MAX: usize = 4096;

/// The version tag of this format.
const VERSION: &str = "v1";

/// The start of the log frame's header line.
const FRAME_HEADER: &str = "coxswain-result v1 ";

/// An attempt's result as the pod sends it.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, Default)]
pub struct WireResult {
    /// The output, for a finished attempt.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub output: Option<Value>,
    /// The raw stdout, for a finished attempt.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub text: Option<String>,
    /// Why it failed.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub error: Option<StepError>,
    /// The end of the script's stderr.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub log: Option<LogTail>,
    /// For a later member of a script chain: the digest of the task and
    /// input files its pod made ([`inputs_digest`](super::inputs_digest)),
    /// which the controller compares with what the engine's work makes
    /// before it takes the result.
    #[serde(
        rename = "inputsSha256",
        default,
        skip_serializing_if = "Option::is_none"
    )]
    pub inputs_sha256: Option<String>,
    /// For a later member of a script chain that ran nothing: why (the step
    /// before it in the pod did not finish). Not the attempt's result: the
    /// controller runs the step in a pod of its own if the run goes on.
    #[serde(rename = "notRun", default, skip_serializing_if = "Option::is_none")]
    pub not_run: Option<String>,
}

impl From<&WorkResult> for WireResult {
    fn from(result: &WorkResult) -> Self {
        match result {
            Ok(done) => WireResult {
                output: Some(done.output.clone()),
                text: done.text.clone(),
                error: None,
                log: done.log.clone(),
                ..WireResult::default()
            },
            Err(failed) => WireResult {
                error: Some(failed.error.clone()),
                log: failed.log.clone(),
                ..WireResult::default()
            },
        }
    }
}

impl From<WireResult> for WorkResult {
    fn from(wire: WireResult) -> Self {
        match wire.error {
            Some(error) => Err(Failed {
                error,
                usage: None,
                log: wire.log,
            }),
            None => Ok(Done {
                output: wire.output.unwrap_or(Value::Null),
                text: wire.text,
                usage: None,
                log: wire.log,
            }),
        }
    }
}

/// The termination message: the result itself or where it is.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
struct Message {
    coxswain: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    result: Option<WireResult>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    log: Option<LogRef>,
}

/// Where in the log the result is: its size and digest.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct LogRef {
    /// The result's JSON, in bytes.
    pub bytes: usize,
    /// Lowercase hex SHA-256 of those bytes.
    pub sha256: String,
}

/// What the pod writes: the termination message, and the log frame when
/// the result does not fit in the message.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Encoded {
    /// The termination message.
    pub message: String,
    /// The frame for stdout, when the result goes through the log.
    pub log: Option<String>,
}

/// Encodes `result` for the pod to write.
pub fn encode(result: &WireResult) -> Encoded {
    let body = json(result);
    let inline = format!(r#"{{"coxswain":"{VERSION}","result":{body}}}"#);
    if inline.len() <= TERMINATION_MESSAGE_MAX {
        return Encoded {
            message: inline,
            log: None,
        };
    }
    let reference = LogRef {
        bytes: body.len(),
        sha256: hex(&Sha256::digest(body.as_bytes())),
    };
    // The frame starts on a line of its own, whatever the script's copied
    // output left unfinished before it.
    let frame = format!(
        "\n{FRAME_HEADER}{} {}\n{body}\n",
        reference.bytes, reference.sha256
    );
    let message = json(&Message {
        coxswain: VERSION.to_string(),
        result: None,
        log: Some(reference),
    });
    Encoded {
        message,
        log: Some(frame),
    }
}

/// JSON of a value that always serialises (every map key is a string); if
/// it ever did not, the reader sees no result and says so.
fn json(value: &impl Serialize) -> String {
    serde_json::to_string(value).unwrap_or_default()
}

/// What a termination message says.
#[derive(Debug, Clone, PartialEq)]
pub enum Decoded {
    /// The result itself.
    Result(WireResult),
    /// The result is in the log, with this size and digest.
    InLog(LogRef),
}

/// Reads a termination message; `None` when it is not one of ours (the
/// wrapper never wrote it: the kubelet's log tail, or nothing).
pub fn decode_message(message: &str) -> Option<Decoded> {
    let message: Message = serde_json::from_str(message.trim()).ok()?;
    if message.coxswain != VERSION {
        return None;
    }
    match (message.result, message.log) {
        (Some(result), None) => Some(Decoded::Result(result)),
        (None, Some(log)) => Some(Decoded::InLog(log)),
        _ => None,
    }
}

/// Why the result could not be taken from the log.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum LogError {
    /// No frame header in the log.
    #[error(
        "the pod's log holds no result (expected {bytes} bytes); it may have been rotated or cut"
    )]
    NoFrame {
        /// The size the termination message announced.
        bytes: usize,
    },
    /// The header announces another result than the termination message.
    #[error(
        "the pod's log announces a result of {found} bytes, not the {expected} bytes its termination message gives"
    )]
    OtherFrame {
        /// The size the termination message announced.
        expected: usize,
        /// The size the header announced.
        found: usize,
    },
    /// Fewer bytes after the header than announced.
    #[error("the pod's log holds {found} of the result's {expected} bytes; it was cut")]
    Cut {
        /// The announced size.
        expected: usize,
        /// What the log holds.
        found: usize,
    },
    /// The bytes are there but are not the result that was written.
    #[error(
        "the result in the pod's log does not match its digest; the log was cut or mixed with other output"
    )]
    Digest,
    /// The bytes match but are not a result.
    #[error("the result in the pod's log is not a result: {0}")]
    NotJson(String),
}

/// Takes the result announced by `reference` out of a container's log.
pub fn decode_log(log: &str, reference: &LogRef) -> Result<WireResult, LogError> {
    let start = log
        .rmatch_indices(FRAME_HEADER)
        .map(|(at, _)| at)
        .find(|&at| at == 0 || log.as_bytes()[at - 1] == b'\n')
        .ok_or(LogError::NoFrame {
            bytes: reference.bytes,
        })?;
    let rest = &log[start + FRAME_HEADER.len()..];
    let (header, body) = rest.split_once('\n').ok_or(LogError::Cut {
        expected: reference.bytes,
        found: 0,
    })?;
    let announced = header
        .split_whitespace()
        .next()
        .and_then(|n| n.parse::<usize>().ok())
        .unwrap_or(0);
    if announced != reference.bytes || !header.ends_with(&reference.sha256) {
        return Err(LogError::OtherFrame {
            expected: reference.bytes,
            found: announced,
        });
    }
    let body = body.as_bytes();
    if body.len() < reference.bytes {
        return Err(LogError::Cut {
            expected: reference.bytes,
            found: body.len(),
        });
    }
    let body = &body[..reference.bytes];
    if hex(&Sha256::digest(body)) != reference.sha256 {
        return Err(LogError::Digest);
    }
    serde_json::from_slice(body).map_err(|e| LogError::NotJson(e.to_string()))
}

#[cfg(test)]
mod tests {
    use super::*;
    use coxswain_core::engine::{codes, step_error};
    use serde_json::json;

    fn done(text: &str) -> WireResult {
        WireResult {
            output: Some(json!({"ok": true})),
            text: Some(text.to_string()),
            error: None,
            log: None,
            ..WireResult::default()
        }
    }

    #[test]
    fn a_small_result_travels_in_the_message() {
        let result = done("{\"ok\": true}\n");
        let encoded = encode(&result);
        assert!(encoded.log.is_none());
        assert!(encoded.message.len() <= TERMINATION_MESSAGE_MAX);
        assert_eq!(
            decode_message(&encoded.message),
            Some(Decoded::Result(result))
        );
    }

    #[test]
    fn a_failure_round_trips_as_a_work_result() {
        let failed: WorkResult =
            Err(step_error(codes::SCRIPT, "exited with status 3: boom").into());
        let encoded = encode(&WireResult::from(&failed));
        let Some(Decoded::Result(back)) = decode_message(&encoded.message) else {
            panic!("inline result expected: {}", encoded.message);
        };
        assert_eq!(WorkResult::from(back), failed);
    }

    #[test]
    fn a_large_result_travels_in_the_log_among_other_lines() {
        let result = done(&"é\"x\n".repeat(20_000));
        let encoded = encode(&result);
        assert!(encoded.message.len() <= TERMINATION_MESSAGE_MAX);
        let Some(Decoded::InLog(reference)) = decode_message(&encoded.message) else {
            panic!("log reference expected: {}", encoded.message);
        };
        let frame = encoded.log.expect("a frame");
        let log = format!("some runtime line\n{frame}stderr after\n");
        assert_eq!(decode_log(&log, &reference), Ok(result));
    }

    #[test]
    fn a_cut_or_mixed_log_is_an_error_not_a_result() {
        let encoded = encode(&done(&"y".repeat(10_000)));
        let Some(Decoded::InLog(reference)) = decode_message(&encoded.message) else {
            panic!("log reference expected");
        };
        let frame = encoded.log.expect("a frame");
        let cut = &frame[..frame.len() - 500];
        assert!(matches!(
            decode_log(cut, &reference),
            Err(LogError::Cut { .. })
        ));
        let mixed = frame.replacen("yyyy", "yxyy", 1);
        assert_eq!(decode_log(&mixed, &reference), Err(LogError::Digest));
        assert!(matches!(
            decode_log("nothing here\n", &reference),
            Err(LogError::NoFrame { .. })
        ));
    }

    #[test]
    fn foreign_messages_are_not_results() {
        assert_eq!(decode_message(""), None);
        assert_eq!(decode_message("panicked at main.rs"), None);
        assert_eq!(decode_message(r#"{"coxswain":"v9","result":{}}"#), None);
    }
}
