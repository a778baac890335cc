//! Slack's request signing: every Events API call carries
//! `X-Slack-Signature: v0=<hex HMAC-SHA256>` of `v0:<timestamp>:<raw body>`
//! under the app's signing secret, and `X-Slack-Request-Timestamp`. A call
//! that does not verify is not from Slack (or is an old one replayed) and
//! must change nothing.

use ring::hmac;

/// How far from now a request's timestamp may be, in seconds: Slack's own
/// advice, so a captured request cannot be replayed later.
pub const MAX_SKEW: i64 = 5 * 60;

/// Why a request is not taken as Slack's.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum SignatureError {
    /// No timestamp header.
    #[error("the request has no X-Slack-Request-Timestamp header")]
    NoTimestamp,
    /// The timestamp is not whole seconds.
    #[error("X-Slack-Request-Timestamp `{0}` is not a Unix time in seconds")]
    BadTimestamp(String),
    /// Too old or too far ahead.
    #[error(
        "X-Slack-Request-Timestamp is {skew} seconds away from now, more than {MAX_SKEW}: a replayed request, or this machine's clock is off"
    )]
    Stale {
        /// Seconds between the timestamp and now.
        skew: i64,
    },
    /// No signature header.
    #[error("the request has no X-Slack-Signature header")]
    NoSignature,
    /// The signature is not `v0=` and hex, or does not match.
    #[error("X-Slack-Signature does not match the body signed with the connection's signingSecret")]
    Mismatch,
}

/// What can be checked without the signing secret: the timestamp within
/// [`MAX_SKEW`] of `now` (Unix seconds) and a signature of Slack's form
/// (`v0=` and hex). Checked before the connection's Secret is read, so a
/// request that is not Slack's costs the API server nothing; returns the
/// signature's bytes.
pub fn precheck(
    timestamp: Option<&str>,
    signature: Option<&str>,
    now: i64,
) -> Result<Vec<u8>, SignatureError> {
    let timestamp = timestamp.ok_or(SignatureError::NoTimestamp)?;
    let seconds: i64 = timestamp
        .parse()
        .map_err(|_| SignatureError::BadTimestamp(timestamp.to_string()))?;
    let skew = now.saturating_sub(seconds).saturating_abs();
    if skew > MAX_SKEW {
        return Err(SignatureError::Stale { skew });
    }
    let signature = signature.ok_or(SignatureError::NoSignature)?;
    signature
        .strip_prefix("v0=")
        .and_then(unhex)
        .ok_or(SignatureError::Mismatch)
}

/// Checks a request as Slack specifies: [`precheck`], then the signature
/// over the raw `body`, compared in constant time.
pub fn verify(
    signing_secret: &str,
    timestamp: Option<&str>,
    signature: Option<&str>,
    body: &[u8],
    now: i64,
) -> Result<(), SignatureError> {
    let tag = precheck(timestamp, signature, now)?;
    let timestamp = timestamp.unwrap_or_default();
    let key = hmac::Key::new(hmac::HMAC_SHA256, signing_secret.as_bytes());
    hmac::verify(&key, &signed(timestamp, body), &tag).map_err(|_| SignatureError::Mismatch)
}

/// What Slack signs: `v0:<timestamp>:<body>`.
fn signed(timestamp: &str, body: &[u8]) -> Vec<u8> {
    let mut message = Vec::with_capacity(body.len() + timestamp.len() + 4);
    message.extend_from_slice(b"v0:");
    message.extend_from_slice(timestamp.as_bytes());
    message.push(b':');
    message.extend_from_slice(body);
    message
}

/// Lower- or upper-case hex into bytes; `None` when it is not hex.
fn unhex(text: &str) -> Option<Vec<u8>> {
    if !text.len().is_multiple_of(2) {
        return None;
    }
    (0..text.len())
        .step_by(2)
        .map(|i| u8::from_str_radix(text.get(i..i + 2)?, 16).ok())
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    // Slack's documented example ("Verifying requests from Slack"); the
    // expected value checked independently with
    // `printf '%s' "v0:1531420618:$BODY" | openssl dgst -sha256 -hmac "$SECRET"`.
    const SECRET: &str = "8f742231b10e8888abcd99yyyzzz85a5";
    const TIMESTAMP: &str = "1531420618";
    const BODY: &str = "token=xyzz0WbapA4vBCDEFasx0q6G&team_id=T1DC2JH3J&team_domain=testteamnow&channel_id=G8PSS9T3V&channel_name=foobar&user_id=U2CERLKJA&user_name=roadrunner&command=%2Fwebhook-collect&text=&response_url=https%3A%2F%2Fhooks.slack.com%2Fcommands%2FT1DC2JH3J%2F397700885554%2F96rGlfmibIGlgcZRskXaIFfN&trigger_id=398738663015.47445629121.803a0bc887a14d10d2c447fce8b6703c";
    const SIGNATURE: &str = "v0=a2114d57b48eac39b9ad189dd8316235a7b4a8d21a10bd27519666489c69b503";
    const THEN: i64 = 1_531_420_618;

    fn check(
        secret: &str,
        ts: Option<&str>,
        sig: Option<&str>,
        body: &str,
        now: i64,
    ) -> Result<(), SignatureError> {
        verify(secret, ts, sig, body.as_bytes(), now)
    }

    #[test]
    fn slacks_example_verifies() {
        assert_eq!(
            check(SECRET, Some(TIMESTAMP), Some(SIGNATURE), BODY, THEN + 10),
            Ok(())
        );
        let upper = format!("v0={}", SIGNATURE[3..].to_uppercase());
        assert_eq!(
            check(SECRET, Some(TIMESTAMP), Some(&upper), BODY, THEN),
            Ok(())
        );
    }

    #[test]
    fn a_changed_body_secret_timestamp_or_signature_does_not() {
        let mismatch = Err(SignatureError::Mismatch);
        let changed_body = BODY.replace("roadrunner", "coyote");
        assert_eq!(
            check(
                SECRET,
                Some(TIMESTAMP),
                Some(SIGNATURE),
                &changed_body,
                THEN
            ),
            mismatch
        );
        assert_eq!(
            check(
                "another-secret",
                Some(TIMESTAMP),
                Some(SIGNATURE),
                BODY,
                THEN
            ),
            mismatch
        );
        // The timestamp is signed too: moving it breaks the signature.
        assert_eq!(
            check(SECRET, Some("1531420619"), Some(SIGNATURE), BODY, THEN),
            mismatch
        );
        let mut flipped = SIGNATURE.to_string();
        flipped.replace_range(66.., "4");
        assert_eq!(
            check(SECRET, Some(TIMESTAMP), Some(&flipped), BODY, THEN),
            mismatch
        );
        for bad in [&SIGNATURE[3..], "v1=a2114d57", "v0=zz", "v0=abc", "v0="] {
            assert_eq!(
                check(SECRET, Some(TIMESTAMP), Some(bad), BODY, THEN),
                mismatch,
                "{bad}"
            );
        }
    }

    #[test]
    fn stale_or_missing_timestamps_are_refused_before_the_signature() {
        let at = |now| check(SECRET, Some(TIMESTAMP), Some(SIGNATURE), BODY, now);
        let skew = |skew| Err(SignatureError::Stale { skew });
        assert_eq!(at(THEN + MAX_SKEW + 1), skew(MAX_SKEW + 1));
        assert_eq!(at(THEN - MAX_SKEW - 60), skew(MAX_SKEW + 60));
        assert_eq!(at(THEN + MAX_SKEW), Ok(()));
        assert_eq!(
            check(SECRET, None, Some(SIGNATURE), BODY, THEN),
            Err(SignatureError::NoTimestamp)
        );
        assert_eq!(
            check(SECRET, Some("soon"), Some(SIGNATURE), BODY, THEN),
            Err(SignatureError::BadTimestamp("soon".into()))
        );
        assert_eq!(
            check(SECRET, Some(TIMESTAMP), None, BODY, THEN),
            Err(SignatureError::NoSignature)
        );
    }

    #[test]
    fn the_precheck_needs_no_secret_and_refuses_what_cannot_be_slacks() {
        let tag = precheck(Some(TIMESTAMP), Some(SIGNATURE), THEN).expect("well formed");
        assert_eq!(tag.len(), 32, "a SHA-256 tag");
        assert_eq!(
            precheck(Some(TIMESTAMP), Some("v0=zz"), THEN),
            Err(SignatureError::Mismatch)
        );
        assert_eq!(
            precheck(Some(TIMESTAMP), Some(SIGNATURE), THEN + MAX_SKEW + 1),
            Err(SignatureError::Stale { skew: MAX_SKEW + 1 })
        );
        assert_eq!(precheck(None, None, THEN), Err(SignatureError::NoTimestamp));
    }
}
