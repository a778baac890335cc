//! Posting to a Matrix room: the alias (if the step names one) resolved to
//! the room's id, the text sent as `m.text` under a transaction id derived
//! from the attempt, and the room's name read for `conversationName`.
//!
//! The homeserver remembers each transaction id of an access token and
//! answers a repeat with the first event's id, so an attempt sent again
//! (the controller restarted mid-post, the answer was lost) posts once,
//! while a retry — a new attempt — posts anew.

use serde_json::json;
use sha2::{Digest, Sha256};

use super::{MessageError, MessageExecutor, net};
use crate::chat::{Matrix, MatrixError};
use crate::net::Redactor;
use coxswain_core::api::MatrixTarget;
use coxswain_core::engine::{Done, Work};

impl MessageExecutor {
    /// Posts `text` to the step's room.
    pub(super) async fn matrix(
        &self,
        work: &Work,
        target: &MatrixTarget,
        text: &str,
        redactor: &mut Redactor,
    ) -> Result<Done, MessageError> {
        let r = &target.token_secret_ref;
        let token = self.token("Matrix", r, redactor).await?;
        let failed = |error: MatrixError| MessageError::Matrix {
            room: target.room.clone(),
            error: Box::new(error),
        };
        let matrix = Matrix::new(
            self.client.clone(),
            self.policy.clone(),
            &target.homeserver,
            &token,
        )
        .map_err(|error| match error {
            MatrixError::TokenChars => MessageError::token_chars("Matrix", r),
            other => failed(other),
        })?
        .with_timeout(net::shortest(super::DEFAULT_TIMEOUT, work.timeout));
        let thread = super::thread(target.thread.as_deref(), work)?;
        let room_id = matrix.room_id(&target.room).await.map_err(failed)?;
        let event_id = matrix
            .send_text(&room_id, &transaction_id(work), text, thread.as_deref())
            .await
            .map_err(failed)?;
        let name = matrix
            .room_name(&room_id)
            .await
            .unwrap_or_else(|| target.room.clone());
        Ok(Done {
            output: json!({"messageId": event_id, "conversationName": name}),
            text: Some(text.to_string()),
            usage: None,
            log: None,
        })
    }
}

/// The attempt's transaction id: the same for every send of one attempt,
/// different for each attempt, run, step and parallel part. The idempotency
/// key holds `/` and whatever a part's key holds, so it is hashed into
/// characters that need no encoding in a URL path.
fn transaction_id(work: &Work) -> String {
    let digest = Sha256::digest(work.idempotency_key().as_bytes());
    let hex: String = digest.iter().map(|b| format!("{b:02x}")).collect();
    format!("coxswain-{hex}")
}

#[cfg(test)]
mod tests {
    use super::*;
    use coxswain_core::api::MessageStep;
    use coxswain_core::engine::{DataView, RunInfo, Task};

    fn work(uid: &str, step: &str, attempt: u32) -> Work {
        Work {
            step: step.into(),
            part: None,
            attempt,
            iteration: None,
            task: Task::Message(MessageStep::default()),
            input: serde_json::Value::Null,
            timeout: None,
            data: DataView::default(),
            run: RunInfo {
                name: "r".into(),
                namespace: "ns".into(),
                uid: uid.into(),
                since: None,
            },
            review: None,
            lookups: Vec::new(),
        }
    }

    #[test]
    fn transaction_ids_follow_the_attempt_and_need_no_escaping() {
        let first = transaction_id(&work("uid-1", "tell", 1));
        assert_eq!(first, transaction_id(&work("uid-1", "tell", 1)));
        assert_ne!(first, transaction_id(&work("uid-1", "tell", 2)));
        assert_ne!(first, transaction_id(&work("uid-2", "tell", 1)));
        assert_ne!(first, transaction_id(&work("uid-1", "other", 1)));
        assert!(
            first.chars().all(|c| c.is_ascii_alphanumeric() || c == '-'),
            "{first}"
        );
    }
}
