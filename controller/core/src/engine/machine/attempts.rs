//! Attempts and retries of steps and parallel parts: opening, closing,
//! trimming attempts, and starting retries when their time comes.

use crate::engine::compiled::CompiledStep;
use crate::flow::{MAX_JSON_DEPTH, json_depth};

use super::*;

impl RunMachine<'_> {
    pub(in crate::engine) fn start_attempt(&mut self, node: usize) {
        let feedback = self
            .state
            .steps
            .get(self.flow.key(node))
            .and_then(|r| r.review.as_ref())
            .and_then(|r| r.instructions.clone());
        let attempt = self.push_attempt(node, feedback);
        self.set_status(node, StepPhase::Running);
        self.record_mut(node).retry_at = None;
        if let Some(work) = self.step_work(node, attempt) {
            self.actions.push(Action::Run(Box::new(work)));
        }
    }

    pub(in crate::engine) fn push_attempt(&mut self, node: usize, feedback: Option<String>) -> u32 {
        let iteration = self.iteration_of(node);
        let now = self.now_text.clone();
        open_attempt(
            &mut self.record_mut(node).attempts,
            iteration,
            now,
            feedback,
        )
    }
    // ---- lookups ------------------------------------------------------------

    /// Records what the lookups of the current attempt found and starts its
    /// work; a failure to look up fails the attempt like any failure (and
    /// it is tried again while `attempts` allow). Stale news is ignored.
    /// The attempt `attempt` of `key` (its part `part`) when it is the
    /// latest and still waits for its lookups.
    fn waiting_for_lookups(
        &mut self,
        key: &str,
        part: Option<usize>,
        attempt: u32,
    ) -> Option<&mut Attempt> {
        let node = self.flow.node(key)?;
        let record = self.state.steps.get(key)?;
        let (status, retry, attempts) = match part {
            Some(i) => {
                let p = record.parts.get(i)?;
                (p.status, &p.retry_at, &p.attempts)
            }
            None => (record.status, &record.retry_at, &record.attempts),
        };
        let waiting = matches!(status, StepPhase::Running | StepPhase::Waiting)
            && retry.is_none()
            && attempts.len() as u32 == attempt
            && attempts.last().is_some_and(|a| a.lookups.is_none());
        if !waiting {
            return None;
        }
        let record = self.record_mut(node);
        match part {
            Some(i) => record.parts.get_mut(i)?.attempts.last_mut(),
            None => record.attempts.last_mut(),
        }
    }

    /// The records database did not answer an attempt's lookups: it keeps
    /// waiting, and its status says why (once per reason, so the status
    /// changes only when the reason does).
    pub(in crate::engine) fn lookups_waiting(
        &mut self,
        key: &str,
        part: Option<usize>,
        attempt: u32,
        reason: String,
    ) {
        if let Some(last) = self.waiting_for_lookups(key, part, attempt)
            && last.waiting.as_deref() != Some(reason.as_str())
        {
            last.waiting = Some(reason);
        }
    }

    pub(in crate::engine) fn looked_up(
        &mut self,
        key: &str,
        part: Option<usize>,
        attempt: u32,
        found: Result<Map<String, Value>, StepError>,
    ) {
        if let Some(last) = self.waiting_for_lookups(key, part, attempt) {
            last.waiting = None;
        }
        let found = match found {
            Ok(found) => found,
            Err(error) => return self.finished(key, part, attempt, Err(Failed::from(error))),
        };
        let Some(node) = self.flow.node(key) else {
            return;
        };
        let Some(record) = self.state.steps.get(key) else {
            return;
        };
        let waiting = |status, retry: &Option<String>, attempts: &[Attempt]| {
            matches!(status, StepPhase::Running | StepPhase::Waiting)
                && retry.is_none()
                && attempts.len() as u32 == attempt
                && attempts.last().is_some_and(|a| a.lookups.is_none())
        };
        let work = match part {
            Some(i) => {
                let Some(p) = record.parts.get(i) else { return };
                if !waiting(p.status, &p.retry_at, &p.attempts) {
                    return;
                }
                if let Some(last) = self.record_mut(node).parts[i].attempts.last_mut() {
                    last.lookups = Some(Value::Object(found));
                }
                self.part_work(node, i)
            }
            None => {
                if !waiting(record.status, &record.retry_at, &record.attempts) {
                    return;
                }
                if let Some(last) = self.record_mut(node).attempts.last_mut() {
                    last.lookups = Some(Value::Object(found));
                }
                if record_is_approval(self.flow.steps[node].step) {
                    // A person step: ask, now that what it shows is known.
                    if let Some(request) = self.request(node, attempt) {
                        self.actions.push(Action::Ask(request));
                    }
                    return;
                }
                self.step_work(node, attempt)
            }
        };
        if let Some(work) = work {
            self.actions.push(Action::Run(Box::new(work)));
        }
    }

    // ---- results ------------------------------------------------------------

    pub(in crate::engine) fn finished(
        &mut self,
        key: &str,
        part: Option<usize>,
        attempt: u32,
        result: WorkResult,
    ) {
        let Some(node) = self.flow.node(key) else {
            return;
        };
        let Some(record) = self.state.steps.get(key) else {
            return;
        };
        let result = bounded(result);
        let log = match &result {
            Ok(done) => done.log.clone(),
            Err(failed) => failed.log.clone(),
        };
        match part {
            Some(i) => {
                let current = record.parts.get(i).is_some_and(|p| {
                    p.status == StepPhase::Running
                        && p.retry_at.is_none()
                        && p.attempts.len() as u32 == attempt
                });
                if current {
                    keep_log(&mut self.record_mut(node).parts[i].attempts, log);
                    self.settle_part(node, i, result);
                }
            }
            None => {
                let current = record.status == StepPhase::Running
                    && record.retry_at.is_none()
                    && record.attempts.len() as u32 == attempt;
                if !current {
                    return; // stale: a retry or a restart already moved on
                }
                keep_log(&mut self.record_mut(node).attempts, log);
                match result {
                    Ok(done) => {
                        let usage = done.usage.clone();
                        match decided(self.flow.steps[node].step, done.output) {
                            (output, None) => self.complete(node, output, done.text, None, usage),
                            (output, Some((exit, instructions))) => {
                                self.complete(node, output, done.text, Some(exit.clone()), usage);
                                self.maybe_send_back(node, &exit, None, instructions);
                            }
                        }
                    }
                    Err(failed) => self.attempt_failed(node, failed),
                }
            }
        }
    }

    /// A step's attempt failed: another try later, or the step fails.
    pub(in crate::engine) fn attempt_failed(&mut self, node: usize, failed: Failed) {
        let policy = &self.flow.steps[node];
        let (now, now_text) = (self.now, self.now_text.clone());
        let seed = jitter_seed(&self.run.uid, self.flow.key(node), None);
        let record = self.record_mut(node);
        let tries = Tries {
            jitter_seed: seed,
            attempts: &mut record.attempts,
            round_start: record.round_start,
            retry_at: &mut record.retry_at,
            error: &mut record.error,
        };
        match tries.failed(failed, policy, now, &now_text) {
            Retry::At(at) => self.wake_at(node, at),
            Retry::No(error) => self.fail(node, error),
        }
    }

    /// A part's attempt ended: it completes, tries again later, or fails.
    pub(in crate::engine) fn settle_part(&mut self, node: usize, part: usize, result: WorkResult) {
        let finished = self.now_text.clone();
        match result {
            Ok(done) => {
                let p = &mut self.record_mut(node).parts[part];
                if let Some(last) = close_attempt(&mut p.attempts, StepPhase::Completed, &finished)
                {
                    last.output = Some(done.output.clone());
                    last.text = done.text.clone();
                    last.usage = done.usage;
                }
                p.status = StepPhase::Completed;
                p.output = Some(done.output);
                p.text = done.text;
                p.error = None;
            }
            Err(failed) => {
                let Some(policy) = self.flow.steps[node].part.as_deref() else {
                    return;
                };
                let now = self.now;
                let seed = jitter_seed(&self.run.uid, self.flow.key(node), Some(part));
                let p = &mut self.record_mut(node).parts[part];
                let tries = Tries {
                    jitter_seed: seed,
                    attempts: &mut p.attempts,
                    round_start: 0,
                    retry_at: &mut p.retry_at,
                    error: &mut p.error,
                };
                match tries.failed(failed, policy, now, &finished) {
                    Retry::At(at) => self.wake_at(node, at),
                    Retry::No(error) => {
                        p.status = StepPhase::Failed;
                        p.error = Some(error);
                    }
                }
            }
        }
        self.fill_parallel(node);
    }

    /// Remembers that `node` (or one of its parts) has a retry due at `at`.
    fn wake_at(&mut self, node: usize, at: Timestamp) {
        self.retrying.insert(node);
        self.actions.push(Action::WakeAt(at));
    }

    /// When the engine next wants an [`Event::Tick`]: the earliest retry due,
    /// of a step or of a part, rebuilt from the status. Drivers ask after
    /// every batch of events instead of keeping [`Action::WakeAt`]s, so a
    /// restart or two retries at different times lose no wake-up.
    pub fn next_wake(&self) -> Option<Timestamp> {
        let retry = self
            .retrying
            .iter()
            .filter_map(|&node| self.state.steps.get(self.flow.key(node)))
            .filter(|r| r.status == StepPhase::Running)
            .flat_map(|r| {
                let parts = r.parts.iter().filter_map(|p| p.retry_at.as_deref());
                r.retry_at.as_deref().into_iter().chain(parts)
            })
            // An unreadable time is due at once (as `due_at` has it).
            .map(|at| at.parse().unwrap_or(Timestamp::UNIX_EPOCH))
            .min();
        match (retry, self.next_approval_deadline()) {
            (Some(a), Some(b)) => Some(a.min(b)),
            (a, b) => a.or(b),
        }
    }

    /// Starts the retries whose time has come. Only the steps in `retrying`
    /// are looked at, so the cost does not grow with the flow.
    pub(in crate::engine) fn retry_due(&mut self) -> bool {
        if self.retrying.is_empty() {
            return false;
        }
        let now = self.now;
        let mut progressed = false;
        for node in std::mem::take(&mut self.retrying) {
            let Some(record) = self.state.steps.get(self.flow.key(node)) else {
                continue;
            };
            if record.status != StepPhase::Running {
                continue;
            }
            let step_due = record.retry_at.as_deref().is_some_and(|at| due_at(at, now));
            let parts: Vec<usize> = record
                .parts
                .iter()
                .enumerate()
                .filter(|(_, p)| p.retry_at.as_deref().is_some_and(|at| due_at(at, now)))
                .map(|(i, _)| i)
                .collect();
            if step_due {
                if matches!(
                    self.flow.steps[node].step.kind(),
                    Some(StepKind::Approval(_))
                ) {
                    // An approval's next try asks a person again.
                    self.record_mut(node).retry_at = None;
                    self.ask(node);
                } else {
                    self.start_attempt(node);
                }
                progressed = true;
            }
            for part in parts {
                self.start_part(node, part);
                progressed = true;
            }
            let still_waiting = self.state.steps.get(self.flow.key(node)).is_some_and(|r| {
                r.status == StepPhase::Running
                    && (r.retry_at.is_some() || r.parts.iter().any(|p| p.retry_at.is_some()))
            });
            if still_waiting {
                self.retrying.insert(node);
            }
        }
        progressed
    }
}

impl StepStatus {
    /// Starts a new round of tries: earlier attempts stay, but no longer count
    /// against `attempts`.
    pub(super) fn round_start_now(&mut self) {
        self.round_start = self.attempts.len() as i32;
    }
}

/// Adds a running attempt (trimming the one that falls out of the latest
/// [`ATTEMPTS_WITH_OUTPUT`]); returns its number.
pub(super) fn open_attempt(
    attempts: &mut Vec<Attempt>,
    iteration: Option<i32>,
    started_at: String,
    feedback: Option<String>,
) -> u32 {
    let number = attempts.len() as i32 + 1;
    trim_old_attempts(attempts);
    attempts.push(Attempt {
        number,
        iteration,
        status: StepPhase::Running,
        started_at: Some(started_at),
        feedback,
        ..Default::default()
    });
    number as u32
}

/// Before a new attempt is added: the one that falls out of the latest
/// [`ATTEMPTS_WITH_OUTPUT`] gives up its output, text and feedback.
pub(super) fn trim_old_attempts(attempts: &mut [Attempt]) {
    let Some(index) = attempts.len().checked_sub(ATTEMPTS_WITH_OUTPUT) else {
        return;
    };
    if let Some(old) = attempts.get_mut(index)
        && !old.trimmed
    {
        old.output = None;
        old.text = None;
        old.feedback = None;
        old.log = None;
        old.lookups = None;
        old.trimmed = true;
    }
}

/// Puts the log read from `work` as it was stopped on its attempt in
/// `record`, when that attempt is there, has ended and has no log yet;
/// `true` when the status changed. (A stopped attempt is closed in the
/// record before its work is stopped, so its log comes after.)
pub fn keep_stopped_log(record: &mut RunStatus, work: &Work, log: crate::api::LogTail) -> bool {
    let Some(step) = record.steps.get_mut(&work.step) else {
        return false;
    };
    let attempts = match &work.part {
        Some(part) => match step.parts.get_mut(part.index) {
            Some(p) => &mut p.attempts,
            None => return false,
        },
        None => &mut step.attempts,
    };
    let position = (work.attempt as usize).checked_sub(1);
    let Some(attempt) = position.and_then(|i| attempts.get_mut(i)) else {
        return false;
    };
    let same_pass = attempt.iteration.map(|i| i as u32) == work.iteration;
    if !same_pass || attempt.status == StepPhase::Running || attempt.log.is_some() {
        return false;
    }
    attempt.log = Some(log);
    true
}

/// Puts a script's log on the latest attempt while it still runs (the
/// attempt is closed right after, by whatever its result decides).
fn keep_log(attempts: &mut [Attempt], log: Option<crate::api::LogTail>) {
    if let Some(last) = attempts
        .last_mut()
        .filter(|a| a.status == StepPhase::Running)
    {
        last.log = log;
    }
}

/// Closes the latest attempt if it is still running, with its end time, and
/// hands it back so the caller can add what it produced.
pub(super) fn close_attempt<'a>(
    attempts: &'a mut [Attempt],
    status: StepPhase,
    now: &str,
) -> Option<&'a mut Attempt> {
    let last = attempts
        .last_mut()
        .filter(|a| a.status == StepPhase::Running)?;
    last.status = status;
    last.finished_at = Some(now.to_string());
    Some(last)
}

/// The tries of a step or of a part, as the one retry policy sees them.
struct Tries<'a> {
    /// Every attempt; the latest is the one that just failed.
    attempts: &'a mut Vec<Attempt>,
    /// Index of the first attempt of the current round (0 for a part).
    round_start: i32,
    retry_at: &'a mut Option<String>,
    error: &'a mut Option<StepError>,
    /// Spreads this retry's time (see [`retry_time`]).
    jitter_seed: u64,
}

/// What the retry policy decided after a failed attempt.
enum Retry {
    /// Try again at this time.
    At(Timestamp),
    /// No more tries: the step or part fails with this error.
    No(StepError),
}

impl Tries<'_> {
    /// Closes the failed attempt and decides: another try after the backoff
    /// (doubling from the second retry on) while the round has attempts
    /// left, otherwise the failure stands. A retry time past what a status
    /// can hold fails too, instead of overflowing.
    fn failed(
        self,
        failed: Failed,
        policy: &CompiledStep<'_>,
        now: Timestamp,
        now_text: &str,
    ) -> Retry {
        let Failed { error, usage, .. } = failed;
        let tries = (self.attempts.len() as i64 - i64::from(self.round_start)).max(1) as u32;
        if let Some(last) = close_attempt(self.attempts, StepPhase::Failed, now_text) {
            last.error = Some(error.clone());
            last.usage = usage;
        }
        *self.error = Some(error.clone());
        if tries >= policy.max_attempts {
            return Retry::No(error);
        }
        // Mixed with the attempt count, so each retry of one step spreads anew.
        let seed =
            (self.jitter_seed ^ self.attempts.len() as u64).wrapping_mul(0x9E37_79B9_7F4A_7C15);
        match retry_time(now, policy.backoff, tries, seed >> 54) {
            Some(at) => {
                *self.retry_at = Some(at.to_string());
                Retry::At(at)
            }
            None => Retry::No(step_error(
                &error.code,
                format!(
                    "{}; the next try would be due later than a date can be written, so it is not made",
                    error.message
                ),
            )),
        }
    }
}

/// When try number `tries + 1` is due: `base`, doubled for every earlier
/// retry, plus up to a quarter more so that many runs failing together do
/// not all come back at the same instant; `None` when that is past the last
/// representable time. The extra share comes from `seed`, not from a random
/// source, so the engine stays pure and a resumed run computes the same time.
fn retry_time(now: Timestamp, base: Duration, tries: u32, seed: u64) -> Option<Timestamp> {
    let wait = base.checked_mul(1u32 << tries.saturating_sub(1).min(16))?;
    let share = u32::try_from(seed % 1024).unwrap_or(0); // 0..1023 / 4096: up to 25%
    let wait = wait.checked_add(wait.checked_mul(share)? / 4096)?;
    now.checked_add(wait).ok()
}

/// A number fixed by the run, the step and the part, from which retries
/// take their spread: different runs and parts spread differently.
fn jitter_seed(run_uid: &str, key: &str, part: Option<usize>) -> u64 {
    use sha2::{Digest, Sha256};
    let part = part.map_or(String::new(), |p| p.to_string());
    let digest = Sha256::digest(format!("{run_uid}/{key}/{part}").as_bytes());
    let mut first = [0u8; 8];
    first.copy_from_slice(&digest[..8]);
    u64::from_le_bytes(first)
}

pub(super) fn due_at(at: &str, now: Timestamp) -> bool {
    at.parse::<Timestamp>().map_or(true, |t| t <= now)
}

/// An attempt's result, with an output nested deeper than
/// [`MAX_JSON_DEPTH`] turned into a failed attempt: a Run's record that holds
/// it could not be read back, and every list of Runs would fail with it.
fn bounded(result: WorkResult) -> WorkResult {
    match result {
        Ok(done) => match too_deep("the output", &done.output) {
            Some(error) => Err(Failed {
                error,
                usage: done.usage,
                log: done.log,
            }),
            None => Ok(done),
        },
        failed => failed,
    }
}

/// `workflow.output_error` when `value` (named by `what`, e.g. "the
/// output") nests deeper than [`MAX_JSON_DEPTH`]; `None` when it may be kept.
pub(in crate::engine) fn too_deep(what: &str, value: &Value) -> Option<StepError> {
    let depth = json_depth(value);
    (depth > MAX_JSON_DEPTH).then(|| {
        step_error(
            codes::OUTPUT,
            format!(
                "{what} nests arrays and objects {depth} levels deep; at most {MAX_JSON_DEPTH} are kept in a Run's record (deeper records cannot be read back)"
            ),
        )
    })
}

fn record_is_approval(step: &crate::api::Step) -> bool {
    matches!(step.kind(), Some(StepKind::Approval(_)))
}

/// What a deciding agent handed in (`{decision, instructions, output}`, the
/// contract its executor checked): the step's output, and its decision
/// (the exit) with the instructions, if any. An agent that reviews another
/// step's work has `{decision, instructions}` as its output; any other
/// step's output is what it handed in.
fn decided(step: &crate::api::Step, handed: Value) -> (Value, Option<(String, Option<String>)>) {
    let Some(agent) = step.agent.as_ref().filter(|a| !a.decisions.is_empty()) else {
        return (handed, None);
    };
    let Some(decision) = handed.get("decision").and_then(Value::as_str) else {
        return (handed, None);
    };
    let decision = decision.to_string();
    let instructions = handed
        .get("instructions")
        .and_then(Value::as_str)
        .map(str::trim)
        .filter(|i| !i.is_empty())
        .map(str::to_string);
    let output = match agent.reviews {
        Some(_) => serde_json::json!({"decision": decision, "instructions": instructions}),
        None => handed.get("output").cloned().unwrap_or(Value::Null),
    };
    (output, Some((decision, instructions)))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn retries_spread_over_a_quarter_of_the_backoff_the_same_way_every_time() {
        let now = Timestamp::from_second(1_800_000_000).unwrap();
        let base = Duration::from_secs(60);
        let mut seen = std::collections::BTreeSet::new();
        for part in 0..50 {
            let seed =
                jitter_seed("uid-1", "fetch", Some(part)).wrapping_mul(0x9E37_79B9_7F4A_7C15) >> 54;
            let at = retry_time(now, base, 1, seed).unwrap();
            let wait = at.duration_since(now).as_secs_f64();
            assert!((60.0..75.0).contains(&wait), "part {part} waits {wait}s");
            assert_eq!(
                retry_time(now, base, 1, seed),
                Some(at),
                "a resumed run computes the same time"
            );
            seen.insert(at);
            // Doubling still applies under the spread.
            let second = retry_time(now, base, 2, seed)
                .unwrap()
                .duration_since(now)
                .as_secs_f64();
            assert!((120.0..150.0).contains(&second), "{second}");
        }
        assert!(
            seen.len() > 25,
            "fifty parts retry at only {} distinct times",
            seen.len()
        );
        assert_ne!(
            jitter_seed("uid-1", "fetch", None),
            jitter_seed("uid-2", "fetch", None)
        );
    }

    #[test]
    fn only_the_latest_attempts_keep_their_output() {
        let mut attempts: Vec<Attempt> = Vec::new();
        for n in 1..=7 {
            trim_old_attempts(&mut attempts);
            attempts.push(Attempt {
                number: n,
                output: Some(json!(n)),
                text: Some(format!("text {n}")),
                feedback: Some("shorter".into()),
                error: Some(step_error(codes::AGENT, "kept")),
                ..Default::default()
            });
        }
        for a in &attempts[..2] {
            assert!(a.trimmed, "attempt {} is trimmed", a.number);
            assert_eq!((&a.output, &a.text, &a.feedback), (&None, &None, &None));
            assert!(a.error.is_some(), "the error stays");
        }
        for a in &attempts[2..] {
            assert!(!a.trimmed);
            assert_eq!(a.output, Some(json!(a.number)));
        }
        assert_eq!(attempts.len() - 2, ATTEMPTS_WITH_OUTPUT);
    }

    #[test]
    fn a_retry_past_the_last_date_is_no_retry() {
        let now = Timestamp::from_second(1_800_000_000).expect("time");
        let huge = Duration::from_secs(999_999_999 * 86_400);
        assert_eq!(retry_time(now, huge, 1, 0), None);
        assert_eq!(retry_time(now, Duration::MAX, 3, 1023), None);
        let base = Duration::from_secs(5);
        let third = retry_time(now, base, 3, 0).expect("in range");
        assert_eq!(third.duration_since(now).as_secs(), 20);
        let spread = retry_time(now, base, 3, 1023).expect("in range");
        assert_eq!(spread.duration_since(now).as_millis(), 24_995);
    }
}
