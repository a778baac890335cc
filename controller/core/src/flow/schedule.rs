//! Checking a flow's `schedule` when it is saved: the cron expression with
//! the `croner` crate (the parser the controller's scheduler uses), and the
//! time zone against the IANA database that jiff bundles.

use croner::parser::{CronParser, Seconds, Year};

use super::FlowError;
use crate::api::Schedule;

/// The five fields of a cron expression, in order, with what each allows.
const FIELDS: [(&str, &str); 5] = [
    ("minute", "0-59"),
    ("hour", "0-23"),
    ("day of month", "1-31"),
    ("month", "1-12 or JAN-DEC"),
    ("day of week", "0-7 or SUN-SAT"),
];

/// Every problem of a schedule, as `(field, message)` with the field
/// relative to the flow's spec (`schedule.cron`, `schedule.timeZone`).
pub fn check_schedule(schedule: &Schedule) -> Vec<(&'static str, String)> {
    let mut problems = Vec::new();
    if let Err(error) = check_cron(&schedule.cron) {
        problems.push(("schedule.cron", error.to_string()));
    }
    if let Some(zone) = &schedule.time_zone
        && jiff::tz::TimeZone::get(zone).is_err()
    {
        problems.push((
            "schedule.timeZone",
            format!(
                "`{zone}` is not a time zone of the IANA database; write one such as `Europe/Paris` or `UTC`"
            ),
        ));
    }
    if let Some(seconds) = schedule.starting_deadline_seconds
        && !(0..=MAX_STARTING_DEADLINE).contains(&seconds)
    {
        problems.push((
            "schedule.startingDeadlineSeconds",
            format!(
                "{seconds} is out of range; it is between 0 and {MAX_STARTING_DEADLINE} seconds (30 days)"
            ),
        ));
    }
    problems
}

/// The longest `startingDeadlineSeconds`: a start missed by longer is
/// missed; a larger number would only overflow the scheduler's arithmetic.
const MAX_STARTING_DEADLINE: i64 = 30 * 86_400;

/// A parser for exactly five fields (no seconds, no year), as Kubernetes
/// CronJobs and crontab read them; `@daily` and friends are allowed.
fn parser() -> CronParser {
    CronParser::builder()
        .seconds(Seconds::Disallowed)
        .year(Year::Disallowed)
        .build()
}

/// Ok when croner reads the expression; else a message naming the field
/// that is wrong and what it allows.
fn check_cron(cron: &str) -> Result<(), FlowError> {
    let parser = parser();
    let Err(whole) = parser.parse(cron) else {
        return Ok(());
    };
    let fields: Vec<&str> = cron.split_whitespace().collect();
    if fields.len() != 5 && !cron.trim_start().starts_with('@') {
        return Err(FlowError::CronFieldCount {
            cron: cron.into(),
            count: fields.len(),
        });
    }
    // Each field alone, the others `*`: the first one croner refuses is it.
    for (i, (name, allowed)) in FIELDS.iter().enumerate() {
        let Some(field) = fields.get(i) else { break };
        let probe: Vec<&str> = (0..5).map(|j| if j == i { *field } else { "*" }).collect();
        if parser.parse(&probe.join(" ")).is_err() {
            return Err(FlowError::CronField {
                cron: cron.into(),
                name,
                field: field.to_string(),
                allowed,
            });
        }
    }
    Err(FlowError::NotCron {
        cron: cron.into(),
        reason: whole.to_string(),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn schedule(cron: &str, zone: Option<&str>) -> Schedule {
        Schedule {
            cron: cron.into(),
            time_zone: zone.map(Into::into),
            ..Default::default()
        }
    }

    #[test]
    fn usual_schedules_pass() {
        for cron in [
            "0 9 * * 1-5",
            "*/15 * * * *",
            "0 0 1 JAN *",
            "30 6 * * MON,FRI",
            "@daily",
        ] {
            assert_eq!(
                check_schedule(&schedule(cron, Some("Europe/Paris"))),
                [],
                "{cron}"
            );
        }
        assert_eq!(check_schedule(&schedule("0 * * * *", Some("UTC"))), []);
    }

    #[test]
    fn a_field_out_of_range_is_named() {
        let problems = check_schedule(&schedule("61 * * * *", None));
        assert_eq!(
            problems,
            [(
                "schedule.cron",
                "`61 * * * *`: the minute field `61` is not valid; it takes 0-59, `*`, lists `a,b`, ranges `a-b` and steps `*/n`".to_string()
            )]
        );
        let problems = check_schedule(&schedule("0 9 * 13 *", None));
        assert!(
            problems[0].1.contains("the month field `13`"),
            "{problems:?}"
        );
        let problems = check_schedule(&schedule("0 9 * * funday", None));
        assert!(
            problems[0].1.contains("the day of week field `funday`"),
            "{problems:?}"
        );
    }

    #[test]
    fn five_fields_exactly() {
        for cron in ["* * * *", "0 * * * * *", "0 0 * * * * 2030"] {
            let problems = check_schedule(&schedule(cron, None));
            assert_eq!(problems.len(), 1, "{cron}");
            assert!(
                problems[0].1.contains("a cron schedule has five"),
                "{problems:?}"
            );
        }
    }

    #[test]
    fn the_starting_deadline_is_bounded_with_the_bound_in_the_message() {
        let mut s = schedule("0 9 * * *", None);
        s.starting_deadline_seconds = Some(2_592_000);
        assert_eq!(check_schedule(&s), []);
        for seconds in [-1, 2_592_001, i64::MAX] {
            s.starting_deadline_seconds = Some(seconds);
            assert_eq!(
                check_schedule(&s),
                [(
                    "schedule.startingDeadlineSeconds",
                    format!(
                        "{seconds} is out of range; it is between 0 and 2592000 seconds (30 days)"
                    )
                )]
            );
        }
    }

    #[test]
    fn an_unknown_time_zone_is_refused() {
        let problems = check_schedule(&schedule("0 9 * * *", Some("Europe/Pariss")));
        assert_eq!(
            problems,
            [(
                "schedule.timeZone",
                "`Europe/Pariss` is not a time zone of the IANA database; write one such as `Europe/Paris` or `UTC`".to_string()
            )]
        );
    }
}
