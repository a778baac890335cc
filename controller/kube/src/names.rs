//! Names and labels of what the controller makes for a Run, derived from the
//! Run and the work alone, so a restarted controller finds what it made.

use sha2::{Digest, Sha256};

use coxswain_steps::launch::WorkId;

/// Longest name of a Job (its pods carry it in a label) or a label value.
pub const LABEL_MAX: usize = 63;

/// Longest name of a ConfigMap, an Approval or any other object.
pub const NAME_MAX: usize = 253;

/// The field manager the controller writes a Run's status as: who wrote
/// what in `kubectl get run --show-managed-fields`.
pub const FIELD_MANAGER: &str = "coxswain-controller";

/// Label on everything made for a Run: the Run's uid (names may be too long
/// for a label value; a uid never is).
pub const RUN_UID_LABEL: &str = "coxswain.dev/run-uid";

/// Label on everything made for a Run: the Run's name, when it fits a label.
pub const RUN_NAME_LABEL: &str = "coxswain.dev/run";

/// Label on a Run's children (not on the Run: its uid is given after
/// admission): its bucket, as [`bucket_of`] computes it from the Run's uid.
/// It serves selectors and people; the controller never trusts it, it
/// hashes the uid again.
pub const BUCKET_LABEL: &str = "coxswain.dev/bucket";

/// How many buckets Runs are spread over when replicas share the work. A
/// fixed number, so that changing how many replicas run never moves a Run
/// to another bucket.
pub const BUCKETS: u8 = 64;

/// The bucket of the Run with `uid`: the top six bits of the uid's 64-bit
/// FNV-1a hash. Kubernetes' server-side sharded list and watch
/// (`shardRange(object.metadata.uid, …)`, KEP-5866) hashes the same field
/// the same way, so bucket `b` is exactly the hash range
/// `[b << 58, (b + 1) << 58)` and a replica's buckets can be handed to the
/// API server as ranges once that is generally available.
pub fn bucket_of(uid: &str) -> u8 {
    use std::hash::Hasher;
    let mut hasher = fnv::FnvHasher::default();
    hasher.write(uid.as_bytes());
    // 64 buckets: the top six bits.
    (hasher.finish() >> 58) as u8
}

/// Label naming the step a Job or an Approval is for (`_` written as `-`).
pub const STEP_LABEL: &str = "coxswain.dev/step";

/// Label saying what a child object holds: `flow` (the pinned flow), `value`
/// (an output moved out of the status), `inputs` (a script's inputs), `step` (a Job).
pub const ROLE_LABEL: &str = "coxswain.dev/role";

/// Label put on Runs a schedule starts, naming the Flow.
pub const FLOW_LABEL: &str = "coxswain.dev/flow";

/// Annotation on a Run a schedule started: the slot it was started for
/// (RFC 3339, UTC). A restarted controller reads it to know which slots
/// are done even when the Flow's status write was lost.
pub const SCHEDULED_AT_ANNOTATION: &str = "coxswain.dev/scheduled-at";

/// Annotation on a Run a schedule started: `$SINCE`, the start of the
/// schedule's last run that ended Succeeded, in Unix seconds; empty when no
/// scheduled run has succeeded yet. The Run reconciler reads it into
/// `RunInfo.since` (and keeps it in `status.since`).
pub const SINCE_ANNOTATION: &str = "coxswain.dev/since";

/// Who created a Run, stamped by admission from the request's user; the
/// one mark on a Run nobody else can forge while admission runs, so the
/// schedule and the chat poster tell their own Runs by it.
pub const CREATED_BY_ANNOTATION: &str = "coxswain.dev/created-by";

/// Annotations on the webhook's TLS Secret: when its CA and its serving
/// certificate expire, and the names the certificate holds, so a renewal
/// is decided without parsing the certificates.
pub const CA_NOT_AFTER_ANNOTATION: &str = "coxswain.dev/ca-not-after";
/// See [`CA_NOT_AFTER_ANNOTATION`].
pub const CERT_NOT_AFTER_ANNOTATION: &str = "coxswain.dev/cert-not-after";
/// See [`CA_NOT_AFTER_ANNOTATION`].
pub const CERT_NAMES_ANNOTATION: &str = "coxswain.dev/cert-names";

/// Label on Runs a conversation command started: the chat connection
/// (Secret) it came through. The outcome poster watches these Runs.
pub const CHAT_LABEL: &str = "coxswain.dev/chat";

/// Annotation on a Run a command started: the chat connection (Secret name,
/// whole; the label may be cut to fit).
pub const CHAT_CONNECTION_ANNOTATION: &str = "coxswain.dev/chat-connection";

/// Annotation on a Run a command started: the room's id.
pub const CHAT_ROOM_ANNOTATION: &str = "coxswain.dev/chat-room";

/// Annotation on a Run a command started: the chat event (message) id.
pub const CHAT_EVENT_ANNOTATION: &str = "coxswain.dev/chat-event";

/// Annotation on a Run a command started: the thread answers go to.
pub const CHAT_THREAD_ANNOTATION: &str = "coxswain.dev/chat-thread";

/// Annotation on a Run a command started: who typed the command.
pub const CHAT_SENDER_ANNOTATION: &str = "coxswain.dev/chat-sender";

/// Annotation set once the outcome of a command's Run was posted (its event
/// id), so a restarted controller does not post it again.
pub const CHAT_ANSWERED_ANNOTATION: &str = "coxswain.dev/chat-answered";

/// Annotation set instead when the chat kept refusing the outcome until a
/// day after the run ended: why, so nobody wonders and nothing retries.
pub const CHAT_UNANSWERED_ANNOTATION: &str = "coxswain.dev/chat-unanswered";

/// Annotation on a Job naming its work (`WorkId`'s exact form).
pub const WORK_ANNOTATION: &str = "coxswain.dev/work";

/// Annotation on a Job giving the digest of its inputs ConfigMap (the one
/// its pod checks before it runs anything).
pub const INPUTS_DIGEST_ANNOTATION: &str = "coxswain.dev/inputs-sha256";

/// Annotation on a script chain's Job: the keys of the steps after its
/// first that run in its pod, in order, comma-separated.
pub const CHAIN_ANNOTATION: &str = "coxswain.dev/chain";

/// The container of the member at `position` of a script chain's pod: the
/// first member's is the step's own, `step`; later ones `next-1`,
/// `next-2`, … in the order [`CHAIN_ANNOTATION`] lists them.
pub fn chain_container(position: usize) -> String {
    match position {
        0 => "step".to_string(),
        n => format!("next-{n}"),
    }
}

/// Annotation on a Job giving its timeout in milliseconds, for the message
/// of a deadline the Job ran into.
pub const TIMEOUT_ANNOTATION: &str = "coxswain.dev/timeout-ms";

/// Annotation on a value ConfigMap: the digest of the whole value a piece
/// belongs to.
pub const VALUE_SHA_ANNOTATION: &str = "coxswain.dev/sha256";

/// Annotation on a value ConfigMap: where the value was in the status (the
/// first place, when the same value was in several).
pub const VALUE_PATH_ANNOTATION: &str = "coxswain.dev/path";

/// Annotation on a flow snapshot naming the Flow generation it copied.
pub const GENERATION_ANNOTATION: &str = "coxswain.dev/flow-generation";

/// The prefix of every label and annotation Coxswain writes on Runs and
/// Approvals. The controller acts on them (a chat label makes the bot post
/// a Run's outcome, `run-uid` ties an Approval to its run, `scheduled-at`
/// marks a schedule's slot), so only the controller sets, changes or
/// removes them; admission refuses anyone else ([`is_reserved`]).
pub const RESERVED_PREFIX: &str = "coxswain.dev/";

/// Whether a label or annotation key is one only the controller writes on
/// Runs and Approvals: every `coxswain.dev/` key. None is meant to be set
/// by people (`coxswain.dev/created-by` is stamped by admission from the
/// request, and checked by its own rule).
pub fn is_reserved(key: &str) -> bool {
    key.starts_with(RESERVED_PREFIX)
}

/// The Run a conversation command starts: `<flow>-c<digest of the chat
/// event id>`, so the same message heard twice (a restart, a redelivery)
/// is refused as existing the second time.
pub fn command_run(flow: &str, event_id: &str) -> String {
    let digest = hex(&Sha256::digest(event_id.as_bytes()));
    joined(flow, &format!("c{}", &digest[..12]), LABEL_MAX)
}

/// The ConfigMap holding a chat connection's sync position.
pub fn chat_position(connection: &str) -> String {
    joined("coxswain-chat", connection, NAME_MAX)
}

/// The Run a Flow's schedule starts for a slot: `<flow>-<minutes since the
/// Unix epoch>`, cut to fit a label value, so a restarted controller never
/// starts the same slot twice (the second create is refused as existing).
pub fn scheduled_run(flow: &str, slot: jiff::Timestamp) -> String {
    let minutes = slot.as_second().div_euclid(60);
    joined(flow, &minutes.to_string(), LABEL_MAX)
}

/// A Flow's name as the value of [`FLOW_LABEL`] (hashed when too long).
pub fn flow_label(flow: &str) -> String {
    if flow.len() <= LABEL_MAX {
        flow.to_string()
    } else {
        joined(flow, "", LABEL_MAX)
            .trim_end_matches('-')
            .to_string()
    }
}

/// `prefix-suffix`, at most `max` characters: when too long, `prefix` is cut
/// and a digest of the whole prefix keeps names of different prefixes apart.
/// `suffix` is kept whole; it must be short.
pub fn joined(prefix: &str, suffix: &str, max: usize) -> String {
    let full = format!("{prefix}-{suffix}");
    if full.len() <= max {
        return full;
    }
    let digest = hex(&Sha256::digest(prefix.as_bytes()))[..8].to_string();
    let room = max.saturating_sub(suffix.len() + digest.len() + 2);
    let mut cut: String = prefix.chars().take(room).collect();
    while cut.ends_with(['-', '.']) {
        cut.pop();
    }
    format!("{cut}-{digest}-{suffix}")
}

/// The Job (and its inputs ConfigMap or Secret) of one attempt of a script.
pub fn job(run: &str, id: &WorkId) -> String {
    joined(run, &id.name(), LABEL_MAX)
}

/// A run's workspace volume (PersistentVolumeClaim): the run's name and a
/// digest of its uid, so a Run deleted and made again under the same name
/// never takes the claim its predecessor left (still being deleted).
pub fn workspace_claim(run: &str, run_uid: &str) -> String {
    let digest = hex(&Sha256::digest(run_uid.as_bytes()));
    joined(run, &format!("workspace-{}", &digest[..8]), NAME_MAX)
}

/// The ConfigMap holding the flow a Run pinned when it started, named by
/// the flow's digest (`sha256:…`): a ConfigMap someone made in advance under
/// that name must hold exactly that flow to be taken, and a Flow edited
/// between a snapshot and the write that records it gets a name of its own.
pub fn flow_snapshot(run: &str, digest: &str) -> String {
    let hex = digest.strip_prefix("sha256:").unwrap_or(digest);
    let short: String = hex.chars().take(16).collect();
    joined(run, &format!("flow-{short}"), NAME_MAX)
}

/// The flow snapshot the runs of one flow version share: named by the
/// flow's digest alone, so a run of a Flow that has not changed writes no
/// object of its own. Taken, like every snapshot, only when it holds a flow
/// of exactly that digest; owned by no run, and removed by the leader once
/// no Run names its digest (the controller's `snapshots`).
pub fn shared_flow_snapshot(digest: &str) -> String {
    let hex = digest.strip_prefix("sha256:").unwrap_or(digest);
    let short: String = hex.chars().take(32).collect();
    format!("coxswain-flow-{short}")
}

/// [`ROLE_LABEL`] of a shared flow snapshot: what the leader looks at when
/// it removes the ones no Run names any more.
pub const ROLE_SHARED_SNAPSHOT: &str = "flow-snapshot";

/// Annotation the leader puts on a shared flow snapshot that no Run named
/// when it looked (an RFC 3339 time); it removes the snapshot only if no
/// Run names it a grace period later, and a run that pins it meanwhile
/// takes the mark off first (so the removal, made on the marked version
/// only, is refused).
pub const UNREFERENCED_ANNOTATION: &str = "coxswain.dev/unreferenced-since";

/// Where runs started before snapshots were named by digest keep theirs;
/// read only for a run whose status holds the digest to check it against.
pub fn legacy_flow_snapshot(run: &str) -> String {
    joined(run, "flow", NAME_MAX)
}

/// The Approval a person step's attempt waits on:
/// `run-step-attempt-digest`, as people read it (`_` in step keys is
/// written `-`), ending with a digest of the Run's uid, the step's key and
/// the attempt. The readable part alone is not enough: Run `rel` step
/// `a_review` and Run `rel-a` step `review` both read `rel-a-review-1`, and
/// a Run deleted without its children leaves Approvals a new Run of the
/// same name would otherwise take for its own.
pub fn approval(run: &str, run_uid: &str, step: &str, attempt: u32) -> String {
    let digest = hex(&Sha256::digest(
        format!("{run_uid}/{step}/a{attempt}").as_bytes(),
    ));
    joined(
        run,
        &format!("{}-{attempt}-{}", step.replace('_', "-"), &digest[..8]),
        NAME_MAX,
    )
}

/// Label value of [`ROLE_LABEL`] on a ConfigMap holding a value moved out
/// of a Run's status.
pub const ROLE_VALUE: &str = "value";

/// The ConfigMap holding piece `piece` (from 0) of a value moved out of a
/// Run's status, named by the value's digest: the same value always gets
/// the same name, so writing the same status again creates nothing.
pub fn value(run: &str, sha256: &str, piece: usize) -> String {
    let short = &sha256[..sha256.len().min(16)];
    joined(run, &format!("value-{short}-{piece}"), NAME_MAX)
}

/// Label value of [`ROLE_LABEL`] on a ConfigMap holding a large value an
/// Approval shows (kept apart from [`ROLE_VALUE`]: no status references it).
pub const ROLE_SHOWN: &str = "shown";

/// The ConfigMap holding piece `piece` of a large value an Approval shows.
pub fn shown(run: &str, sha256: &str, piece: usize) -> String {
    let short = &sha256[..sha256.len().min(16)];
    joined(run, &format!("shown-{short}-{piece}"), NAME_MAX)
}

/// The step key as a label value.
pub fn step_label(step: &str) -> String {
    let label = step.replace('_', "-");
    if label.len() <= LABEL_MAX {
        label
    } else {
        joined(&label, "", LABEL_MAX)
            .trim_end_matches('-')
            .to_string()
    }
}

/// Lowercase hex of `bytes`.
pub fn hex(bytes: &[u8]) -> String {
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}

/// Whether `object`'s controller owner is the object with `uid`: the one
/// proof of parenthood the controller takes, since a uid exists only once
/// its object does (labels and names are anyone's to write beforehand).
pub fn controlled_by(object: &impl kube::ResourceExt, uid: &str) -> bool {
    object
        .owner_references()
        .iter()
        .any(|o| o.controller == Some(true) && o.uid == uid)
}

/// The labels of a child made for `run`, with its role.
pub fn child_labels(
    run: &coxswain_core::api::Run,
    role: &str,
) -> std::collections::BTreeMap<String, String> {
    use kube::ResourceExt;
    owner_labels(&run.uid().unwrap_or_default(), &run.name_any(), role)
}

/// The labels every child of the Run `uid` named `name` carries: its uid,
/// its bucket, its name when it fits a label, and the child's `role`.
pub fn owner_labels(
    uid: &str,
    name: &str,
    role: &str,
) -> std::collections::BTreeMap<String, String> {
    let mut labels = std::collections::BTreeMap::from([
        (RUN_UID_LABEL.to_string(), uid.to_string()),
        (BUCKET_LABEL.to_string(), bucket_of(uid).to_string()),
        (ROLE_LABEL.to_string(), role.to_string()),
    ]);
    if name.len() <= LABEL_MAX {
        labels.insert(RUN_NAME_LABEL.to_string(), name.to_string());
    }
    labels
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_bucket_is_the_top_of_the_hash_kubernetes_shards_by() {
        // FNV-1a 64 of "" and "a" (the algorithm's published vectors):
        // 0xcbf29ce484222325 and 0xaf63dc4c8601ec8c.
        assert_eq!(bucket_of(""), (0xcbf2_9ce4_8422_2325_u64 >> 58) as u8);
        assert_eq!(bucket_of("a"), (0xaf63_dc4c_8601_ec8c_u64 >> 58) as u8);
        // Uids spread over every bucket.
        let mut seen = [0u32; BUCKETS as usize];
        for i in 0..6400 {
            seen[bucket_of(&format!("0b4c5f2e-{i:04}-4d1a-9f3e-1c2b3a4d5e6f")) as usize] += 1;
        }
        assert!(seen.iter().all(|&n| n > 50 && n < 160), "{seen:?}");
    }

    #[test]
    fn every_key_the_controller_relies_on_is_reserved() {
        for key in [
            RUN_UID_LABEL,
            BUCKET_LABEL,
            RUN_NAME_LABEL,
            STEP_LABEL,
            ROLE_LABEL,
            FLOW_LABEL,
            SCHEDULED_AT_ANNOTATION,
            SINCE_ANNOTATION,
            CHAT_LABEL,
            CHAT_CONNECTION_ANNOTATION,
            CHAT_ROOM_ANNOTATION,
            CHAT_EVENT_ANNOTATION,
            CHAT_THREAD_ANNOTATION,
            CHAT_SENDER_ANNOTATION,
            CHAT_ANSWERED_ANNOTATION,
            CHAT_UNANSWERED_ANNOTATION,
            CREATED_BY_ANNOTATION,
        ] {
            assert!(is_reserved(key), "{key}");
        }
        for key in [
            "team",
            "app.kubernetes.io/name",
            "x.coxswain.dev/y",
            "coxswain.dev",
        ] {
            assert!(!is_reserved(key), "{key}");
        }
    }

    #[test]
    fn short_names_read_as_written() {
        let uid = "3f1c0a52-77aa-4b7e-9d51-0c2b3b7a1e11";
        let review = approval("post-x7k2", uid, "review", 1);
        assert!(review.starts_with("post-x7k2-review-1-"), "{review}");
        assert_eq!(review.len(), "post-x7k2-review-1-".len() + 8);
        assert!(
            approval("post-x7k2", uid, "final_review", 2).starts_with("post-x7k2-final-review-2-")
        );
        assert_eq!(
            flow_snapshot("post-x7k2", "sha256:0123456789abcdef0123"),
            "post-x7k2-flow-0123456789abcdef"
        );
        assert_eq!(legacy_flow_snapshot("post-x7k2"), "post-x7k2-flow");
        assert_eq!(
            shared_flow_snapshot(&format!("sha256:{}", "0123456789abcdef".repeat(4))),
            "coxswain-flow-0123456789abcdef0123456789abcdef"
        );
        assert_eq!(
            value("post-x7k2", "0123456789abcdef0123", 1),
            "post-x7k2-value-0123456789abcdef-1"
        );
    }

    #[test]
    fn a_scheduled_run_is_named_after_its_flow_and_minute() {
        let slot: jiff::Timestamp = "2030-01-01T10:02:00Z".parse().expect("a time");
        assert_eq!(scheduled_run("nightly", slot), "nightly-31558202");
        let long = scheduled_run(&"f".repeat(100), slot);
        assert!(
            long.len() <= LABEL_MAX && long.ends_with("-31558202"),
            "{long}"
        );
        assert_eq!(flow_label("nightly"), "nightly");
        let label = flow_label(&"f".repeat(100));
        assert!(label.len() <= LABEL_MAX && !label.ends_with('-'), "{label}");
    }

    #[test]
    fn approval_names_never_collide_across_runs_steps_or_attempts() {
        let uid_a = "11111111-1111-1111-1111-111111111111";
        let uid_b = "22222222-2222-2222-2222-222222222222";
        // The same readable name, two runs and two steps.
        let a = approval("rel", uid_a, "a_review", 1);
        let b = approval("rel-a", uid_b, "review", 1);
        assert!(a.starts_with("rel-a-review-1-") && b.starts_with("rel-a-review-1-"));
        assert_ne!(a, b);
        // A new run under an old run's name.
        assert_ne!(
            approval("rel", uid_a, "review", 1),
            approval("rel", uid_b, "review", 1)
        );
        assert_ne!(
            approval("rel", uid_a, "review", 1),
            approval("rel", uid_a, "review", 2)
        );
        let long = approval(&"r".repeat(260), uid_a, "review", 1);
        assert!(long.len() <= NAME_MAX, "{}", long.len());
    }

    #[test]
    fn long_names_fit_and_stay_apart() {
        let a = joined(&"r".repeat(80), "build-a1-0123456789", LABEL_MAX);
        let b = joined(
            &format!("{}x", "r".repeat(79)),
            "build-a1-0123456789",
            LABEL_MAX,
        );
        assert!(a.len() <= LABEL_MAX && b.len() <= LABEL_MAX, "{a} {b}");
        assert_ne!(a, b);
        assert!(a.ends_with("-build-a1-0123456789"), "{a}");
    }
}
