//! When a Flow's schedule starts a Run: a pure function of the time, the
//! timetable, what was started last and which scheduled Runs still go.
//! Kept free of I/O so every policy, time zone and missed start is tested
//! without a cluster or a clock.
//!
//! Missed starts follow Kubernetes CronJobs: after a pause (the controller
//! was down, or `Forbid` held a slot back) only the latest due slot starts,
//! and only within `startingDeadlineSeconds` of its time.

use croner::Cron;
use croner::parser::{CronParser, Seconds, Year};
use jiff::tz::TimeZone;
use jiff::{SignedDuration, Timestamp, Zoned};

use coxswain_core::api::{ConcurrencyPolicy, Schedule};

/// A schedule read and ready to answer "which slot is due".
#[derive(Debug, Clone)]
pub struct Timetable {
    cron: Cron,
    zone: TimeZone,
    policy: ConcurrencyPolicy,
    deadline: Option<SignedDuration>,
}

/// A schedule the validator should have refused; the flow is not scheduled.
#[derive(Debug, thiserror::Error, PartialEq, Eq)]
pub enum TimetableError {
    /// croner could not read the cron expression.
    #[error("schedule.cron: `{cron}` is not a cron schedule: {reason}")]
    Cron {
        /// The expression as written.
        cron: String,
        /// croner's reason.
        reason: String,
    },
    /// The time zone is not in the IANA database.
    #[error("schedule.timeZone: `{0}` is not a time zone of the IANA database")]
    Zone(String),
}

impl Timetable {
    /// Reads a flow's `schedule` the way `coxswain lint` checks it: five
    /// fields (no seconds, no year) and an IANA time zone, UTC by default.
    pub fn new(schedule: &Schedule) -> Result<Self, TimetableError> {
        // The same parser settings as the validator's (core `flow::schedule`).
        let cron = CronParser::builder()
            .seconds(Seconds::Disallowed)
            .year(Year::Disallowed)
            .build()
            .parse(&schedule.cron)
            .map_err(|e| TimetableError::Cron {
                cron: schedule.cron.clone(),
                reason: e.to_string(),
            })?;
        let zone = match &schedule.time_zone {
            None => TimeZone::UTC,
            Some(name) => TimeZone::get(name).map_err(|_| TimetableError::Zone(name.clone()))?,
        };
        Ok(Timetable {
            cron,
            zone,
            policy: schedule.concurrency_policy.unwrap_or_default(),
            deadline: schedule
                .starting_deadline_seconds
                .map(SignedDuration::from_secs),
        })
    }

    /// The latest slot at or before `now`, if the pattern ever matched.
    fn latest_slot(&self, now: Timestamp) -> Option<Timestamp> {
        let now = now.to_zoned(self.zone.clone());
        self.cron
            .find_previous_occurrence(&now, true)
            .ok()
            .map(|z: Zoned| z.timestamp())
    }

    /// The first slot strictly after `now`, if the pattern matches again.
    pub fn next_slot(&self, now: Timestamp) -> Option<Timestamp> {
        let now = now.to_zoned(self.zone.clone());
        self.cron
            .find_next_occurrence(&now, false)
            .ok()
            .map(|z: Zoned| z.timestamp())
    }
}

/// What the schedule has done so far, as read from the cluster.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct History {
    /// Slots at or before this time are settled (started, or given up): the
    /// later of the Flow's `lastScheduleTime`, the newest scheduled Run's
    /// slot and the Flow's creation.
    pub settled_until: Timestamp,
    /// Names of the scheduled Runs that have not finished.
    pub active: Vec<String>,
}

/// What to do now.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Decision {
    /// Start a Run for this slot.
    pub start: Option<Timestamp>,
    /// Cancel these Runs first (`Replace`).
    pub cancel: Vec<String>,
    /// A due slot that is not started, and why.
    pub skipped: Option<Skip>,
    /// Look again at this time: the next slot.
    pub wake_at: Option<Timestamp>,
}

/// Why a due slot did not start.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Skip {
    /// The slot is older than `startingDeadlineSeconds`; it is given up.
    TooLate {
        /// The slot.
        slot: Timestamp,
        /// How long ago it was due.
        late_by: SignedDuration,
    },
    /// `Forbid`, and these Runs still go; the slot starts once they end,
    /// if it is still within the deadline.
    Busy {
        /// The slot.
        slot: Timestamp,
        /// The scheduled Runs still going.
        active: Vec<String>,
    },
}

impl Skip {
    /// The slot that was not started.
    pub fn slot(&self) -> Timestamp {
        match self {
            Skip::TooLate { slot, .. } | Skip::Busy { slot, .. } => *slot,
        }
    }

    /// Whether the slot is given up for good (recorded as settled).
    pub fn is_final(&self) -> bool {
        matches!(self, Skip::TooLate { .. })
    }
}

/// Decides what the schedule does at `now`.
pub fn decide(timetable: &Timetable, now: Timestamp, history: &History) -> Decision {
    let mut decision = Decision {
        start: None,
        cancel: Vec::new(),
        skipped: None,
        wake_at: timetable.next_slot(now),
    };
    let Some(slot) = timetable
        .latest_slot(now)
        .filter(|slot| *slot > history.settled_until)
    else {
        return decision;
    };
    let late_by = now.duration_since(slot);
    if timetable
        .deadline
        .is_some_and(|deadline| late_by > deadline)
    {
        decision.skipped = Some(Skip::TooLate { slot, late_by });
        return decision;
    }
    match timetable.policy {
        ConcurrencyPolicy::Forbid if !history.active.is_empty() => {
            decision.skipped = Some(Skip::Busy {
                slot,
                active: history.active.clone(),
            });
        }
        ConcurrencyPolicy::Replace => {
            decision.cancel = history.active.clone();
            decision.start = Some(slot);
        }
        _ => decision.start = Some(slot),
    }
    decision
}

#[cfg(test)]
mod tests {
    use super::*;

    fn at(text: &str) -> Timestamp {
        text.parse().expect("a test timestamp")
    }

    fn timetable(cron: &str, zone: Option<&str>) -> Timetable {
        Timetable::new(&Schedule {
            cron: cron.into(),
            time_zone: zone.map(Into::into),
            ..Default::default()
        })
        .expect("a valid schedule")
    }

    fn with(mut t: Timetable, policy: ConcurrencyPolicy, deadline: Option<i64>) -> Timetable {
        t.policy = policy;
        t.deadline = deadline.map(SignedDuration::from_secs);
        t
    }

    /// What `t` decides at `now`, settled until `settled_until` with the
    /// runs `active` still going.
    fn decide_at(t: &Timetable, now: &str, settled_until: &str, active: &[&str]) -> Decision {
        decide(t, at(now), &history(settled_until, active))
    }

    fn history(settled_until: &str, active: &[&str]) -> History {
        History {
            settled_until: at(settled_until),
            active: active.iter().map(|s| s.to_string()).collect(),
        }
    }

    #[test]
    fn a_due_slot_starts_and_the_next_one_is_the_wake_up() {
        let t = timetable("*/15 * * * *", None);
        let d = decide_at(&t, "2030-01-01T10:15:20Z", "2030-01-01T10:00:00Z", &[]);
        assert_eq!(d.start, Some(at("2030-01-01T10:15:00Z")));
        assert_eq!(d.wake_at, Some(at("2030-01-01T10:30:00Z")));
        assert_eq!(d.skipped, None);
    }

    #[test]
    fn a_settled_slot_does_not_start_again() {
        let t = timetable("*/15 * * * *", None);
        let d = decide_at(&t, "2030-01-01T10:29:59Z", "2030-01-01T10:15:00Z", &[]);
        assert_eq!(d.start, None);
        assert_eq!(d.skipped, None);
        assert_eq!(d.wake_at, Some(at("2030-01-01T10:30:00Z")));
    }

    #[test]
    fn a_slot_exactly_now_is_due() {
        let t = timetable("* * * * *", None);
        let d = decide_at(&t, "2030-01-01T10:01:00Z", "2030-01-01T10:00:00Z", &[]);
        assert_eq!(d.start, Some(at("2030-01-01T10:01:00Z")));
        assert_eq!(d.wake_at, Some(at("2030-01-01T10:02:00Z")));
    }

    #[test]
    fn slots_are_read_in_the_time_zone() {
        // 07:00 in Paris is 06:00 UTC in winter and 05:00 UTC in summer.
        let t = timetable("0 7 * * *", Some("Europe/Paris"));
        let winter = decide_at(&t, "2030-01-15T06:30:00Z", "2030-01-14T12:00:00Z", &[]);
        assert_eq!(winter.start, Some(at("2030-01-15T06:00:00Z")));
        let summer = decide_at(&t, "2030-07-15T05:30:00Z", "2030-07-14T12:00:00Z", &[]);
        assert_eq!(summer.start, Some(at("2030-07-15T05:00:00Z")));
        assert_eq!(summer.wake_at, Some(at("2030-07-16T05:00:00Z")));
    }

    #[test]
    fn across_a_dst_change_the_wall_clock_time_holds() {
        // Paris moves its clocks forward on 2030-03-31 at 02:00 (UTC+1 → UTC+2):
        // the 07:00 slot is 06:00 UTC the day before and 05:00 UTC that day.
        let t = timetable("0 7 * * *", Some("Europe/Paris"));
        let before = decide_at(&t, "2030-03-30T06:00:01Z", "2030-03-29T06:00:00Z", &[]);
        assert_eq!(before.start, Some(at("2030-03-30T06:00:00Z")));
        assert_eq!(before.wake_at, Some(at("2030-03-31T05:00:00Z")));
        let after = decide_at(&t, "2030-03-31T05:00:00Z", "2030-03-30T06:00:00Z", &[]);
        assert_eq!(after.start, Some(at("2030-03-31T05:00:00Z")));
    }

    #[test]
    fn a_slot_in_the_spring_gap_runs_once_right_after_it() {
        // 02:30 does not exist in Paris on 2030-03-31: croner runs a fixed-time
        // job at the first minute after the gap (03:00 local, 01:00 UTC), once.
        let t = timetable("30 2 * * *", Some("Europe/Paris"));
        let d = decide_at(&t, "2030-03-31T01:00:30Z", "2030-03-30T01:30:00Z", &[]);
        assert_eq!(d.start, Some(at("2030-03-31T01:00:00Z")));
        assert_eq!(d.wake_at, Some(at("2030-04-01T00:30:00Z")));
    }

    #[test]
    fn a_slot_in_the_autumn_repeat_runs_once() {
        // Paris turns its clocks back on 2030-10-27 at 03:00 (UTC+2 → UTC+1):
        // 02:30 happens twice (00:30 and 01:30 UTC); the job runs at the first.
        let t = timetable("30 2 * * *", Some("Europe/Paris"));
        let first = decide_at(&t, "2030-10-27T00:30:10Z", "2030-10-26T00:30:00Z", &[]);
        assert_eq!(first.start, Some(at("2030-10-27T00:30:00Z")));
        let repeat = decide_at(&t, "2030-10-27T01:30:10Z", "2030-10-27T00:30:00Z", &[]);
        assert_eq!(repeat.start, None);
        assert_eq!(repeat.wake_at, Some(at("2030-10-28T01:30:00Z")));
    }

    #[test]
    fn only_the_latest_missed_slot_starts() {
        // The controller was down from 10:00 to 10:47: 10:15, 10:30 and 10:45
        // were missed; only 10:45 starts.
        let t = timetable("*/15 * * * *", None);
        let d = decide_at(&t, "2030-01-01T10:47:00Z", "2030-01-01T10:00:00Z", &[]);
        assert_eq!(d.start, Some(at("2030-01-01T10:45:00Z")));
    }

    #[test]
    fn a_missed_slot_past_the_deadline_is_given_up() {
        let t = with(
            timetable("*/15 * * * *", None),
            ConcurrencyPolicy::Allow,
            Some(60),
        );
        let d = decide_at(&t, "2030-01-01T10:47:00Z", "2030-01-01T10:00:00Z", &[]);
        assert_eq!(d.start, None);
        assert_eq!(
            d.skipped,
            Some(Skip::TooLate {
                slot: at("2030-01-01T10:45:00Z"),
                late_by: SignedDuration::from_secs(120),
            })
        );
        assert!(d.skipped.as_ref().is_some_and(Skip::is_final));
        // Within the deadline it starts.
        let d = decide_at(&t, "2030-01-01T10:46:00Z", "2030-01-01T10:00:00Z", &[]);
        assert_eq!(d.start, Some(at("2030-01-01T10:45:00Z")));
    }

    #[test]
    fn allow_starts_beside_a_running_one() {
        let t = timetable("* * * * *", None);
        let d = decide_at(&t, "2030-01-01T10:02:05Z", "2030-01-01T10:01:00Z", &["f-1"]);
        assert_eq!(d.start, Some(at("2030-01-01T10:02:00Z")));
        assert!(d.cancel.is_empty());
    }

    #[test]
    fn forbid_holds_the_slot_while_one_runs_and_starts_it_after() {
        let t = with(
            timetable("* * * * *", None),
            ConcurrencyPolicy::Forbid,
            Some(30),
        );
        let busy = decide_at(&t, "2030-01-01T10:02:05Z", "2030-01-01T10:01:00Z", &["f-1"]);
        assert_eq!(busy.start, None);
        assert_eq!(
            busy.skipped,
            Some(Skip::Busy {
                slot: at("2030-01-01T10:02:00Z"),
                active: vec!["f-1".into()],
            })
        );
        assert!(!busy.skipped.as_ref().is_some_and(Skip::is_final));
        // The running one ends within the deadline: the held slot starts.
        let free = decide_at(&t, "2030-01-01T10:02:20Z", "2030-01-01T10:01:00Z", &[]);
        assert_eq!(free.start, Some(at("2030-01-01T10:02:00Z")));
    }

    #[test]
    fn replace_cancels_the_running_ones_and_starts() {
        let t = with(
            timetable("* * * * *", None),
            ConcurrencyPolicy::Replace,
            None,
        );
        let d = decide_at(
            &t,
            "2030-01-01T10:02:05Z",
            "2030-01-01T10:01:00Z",
            &["f-1", "f-0"],
        );
        assert_eq!(d.start, Some(at("2030-01-01T10:02:00Z")));
        assert_eq!(d.cancel, ["f-1", "f-0"]);
    }

    #[test]
    fn a_pattern_that_never_matches_never_starts_nor_wakes() {
        let t = timetable("0 0 30 2 *", None);
        let d = decide_at(&t, "2030-01-01T10:02:05Z", "2029-01-01T00:00:00Z", &[]);
        assert_eq!(d.start, None);
        assert_eq!(d.wake_at, None);
    }

    #[test]
    fn an_unknown_zone_is_an_error_naming_it() {
        let error = Timetable::new(&Schedule {
            cron: "* * * * *".into(),
            time_zone: Some("Mars/Olympus".into()),
            ..Default::default()
        })
        .expect_err("no such zone");
        assert_eq!(
            error.to_string(),
            "schedule.timeZone: `Mars/Olympus` is not a time zone of the IANA database"
        );
    }
}
