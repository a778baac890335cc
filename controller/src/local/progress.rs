//! Live progress on stderr: one line per step transition, with durations,
//! and the lines scripts write to stderr, under their step as they come.

use std::io::Write;
use std::sync::{Arc, Mutex, MutexGuard};

use jiff::Timestamp;

use coxswain_core::api::{RunPhase, RunStatus, StartedBy, StepPhase};
use coxswain_steps::script::{Attempt, Echo, Echoes};

/// Prints step transitions as they happen; silent when `quiet`.
#[derive(Debug, Default)]
pub struct Progress {
    quiet: bool,
    /// On a terminal, a status line under the step lines is redrawn in place.
    tty: bool,
    /// Shared with the script lines printed from other tasks, which clear
    /// the status line before they print.
    screen: Arc<Mutex<Screen>>,
    last: std::collections::HashMap<String, (StepPhase, usize, bool)>,
}

/// What stands on the terminal's last line.
#[derive(Debug, Default)]
struct Screen {
    status_shown: bool,
}

impl Screen {
    /// Clears the status line, when one is shown, so a line can be printed.
    fn clear(&mut self, err: &mut impl Write) {
        if self.status_shown {
            let _ = write!(err, "\r\x1b[K");
            self.status_shown = false;
        }
    }
}

impl Progress {
    /// A progress printer; `quiet` prints nothing.
    pub fn new(quiet: bool) -> Self {
        let tty = std::io::IsTerminal::is_terminal(&std::io::stderr());
        Progress {
            quiet,
            tty,
            screen: Arc::default(),
            last: Default::default(),
        }
    }

    /// What prints script attempts' stderr lines among the progress lines.
    pub fn script_lines(&self) -> Arc<dyn Echo> {
        Arc::new(ScriptLines {
            screen: self.screen.clone(),
        })
    }

    fn screen(&self) -> MutexGuard<'_, Screen> {
        self.screen.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Prints the state of each step whose status just changed.
    pub fn changed(&mut self, state: &RunStatus, touched: &[String]) {
        if self.quiet {
            return;
        }
        let screen = self.screen.clone();
        let mut screen = screen.lock().unwrap_or_else(|e| e.into_inner());
        let mut err = std::io::stderr().lock();
        screen.clear(&mut err);
        for key in touched {
            let Some(record) = state.steps.get(key) else {
                continue;
            };
            let seen = (
                record.status,
                record.attempts.len(),
                record.retry_at.is_some(),
            );
            if self.last.get(key) == Some(&seen) {
                continue;
            }
            self.last.insert(key.clone(), seen);
            let took = duration(record.started_at.as_deref(), record.finished_at.as_deref());
            let attempt = which_try(record);
            let line = match record.status {
                StepPhase::Running if record.retry_at.is_some() => {
                    let why = record
                        .error
                        .as_ref()
                        .map(|e| e.message.as_str())
                        .unwrap_or("");
                    format!("  ↻ {key} failed{attempt}, will retry: {}", first_line(why))
                }
                StepPhase::Running => match (record.iteration, record.started_by()) {
                    (None, StartedBy::SentBack { note, attempt, .. }) => {
                        let retry = if attempt > 1 {
                            format!(", attempt {attempt}")
                        } else {
                            String::new()
                        };
                        format!("  ▶ {key} started again: {}{retry}", note.sent_back())
                    }
                    _ => format!("  ▶ {key} started{attempt}"),
                },
                StepPhase::Waiting => format!("  … {key} waits for a person"),
                StepPhase::Completed => {
                    let exit = record
                        .exit
                        .as_ref()
                        .map(|e| format!(" → {e}"))
                        .unwrap_or_default();
                    format!("  ✓ {key} completed{exit}{took}")
                }
                StepPhase::Failed => {
                    let why = record
                        .error
                        .as_ref()
                        .map(|e| format!("{}: {}", e.code, first_line(&e.message)))
                        .unwrap_or_default();
                    format!("  ✗ {key} failed{took}: {why}")
                }
                StepPhase::Skipped => {
                    format!(
                        "  ↷ {key} skipped: {}",
                        record.reason.as_deref().unwrap_or("not on the path taken")
                    )
                }
                StepPhase::Pending => continue,
            };
            let _ = writeln!(err, "{line}");
        }
        if self.tty {
            let _ = write!(err, "{}", status_line(state));
            let _ = err.flush();
            screen.status_shown = true;
        }
    }

    /// Makes room for an interactive prompt.
    pub fn suspend(&mut self) {
        let mut err = std::io::stderr().lock();
        self.screen().clear(&mut err);
        let _ = err.flush();
    }

    /// Prints what the runner did around the steps (a checkout, a push).
    pub fn info(&mut self, message: &str) {
        if !self.quiet {
            self.suspend();
            eprintln!("  · {message}");
        }
    }

    /// Prints a remark about the run.
    pub fn note(&mut self, message: &str) {
        if !self.quiet {
            eprintln!("  ! {message}");
        }
    }

    /// Prints the run's outcome.
    pub fn finished(&mut self, state: &RunStatus) {
        if self.quiet {
            return;
        }
        self.suspend();
        let took = duration(state.started_at.as_deref(), state.finished_at.as_deref());
        let phase = match state.phase {
            RunPhase::Succeeded => "succeeded",
            RunPhase::Failed => "failed",
            RunPhase::Cancelled => "was cancelled",
            _ => "stopped",
        };
        let progress = state.progress.as_deref().unwrap_or("");
        eprintln!("run {phase}{took} ({progress} steps settled)");
        if let Some(e) = &state.error {
            eprintln!("  {}: {}", e.code, e.message);
        }
    }
}

/// The longest script line shown whole; the rest of it is left out.
const MAX_SHOWN_LINE: usize = 4096;

/// Prints each line a script attempt writes to stderr as
/// `    STEP │ line` (`STEP[PART]` for a part).
struct ScriptLines {
    screen: Arc<Mutex<Screen>>,
}

impl Echo for ScriptLines {
    fn open(&self, attempt: &Attempt) -> Echoes {
        let label = match &attempt.part_key {
            Some(part) => format!("{}[{part}]", attempt.step_key),
            None => attempt.step_key.clone(),
        };
        Echoes {
            stdout: None,
            stderr: Some(Box::new(LineWriter {
                label,
                screen: self.screen.clone(),
                pending: Vec::new(),
            })),
        }
    }
}

/// Splits what a script writes into lines and prints each under its step;
/// an unfinished last line is printed when the attempt ends.
struct LineWriter {
    label: String,
    screen: Arc<Mutex<Screen>>,
    pending: Vec<u8>,
}

impl LineWriter {
    fn print(&self, line: &[u8]) {
        let line = &line[..line.len().min(MAX_SHOWN_LINE)];
        let text = String::from_utf8_lossy(line);
        let text = text.trim_end_matches('\r');
        let mut screen = self.screen.lock().unwrap_or_else(|e| e.into_inner());
        let mut err = std::io::stderr().lock();
        screen.clear(&mut err);
        let _ = writeln!(err, "    {} │ {text}", self.label);
    }
}

impl Write for LineWriter {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        self.pending.extend_from_slice(buf);
        while let Some(end) = self.pending.iter().position(|&b| b == b'\n') {
            let line: Vec<u8> = self.pending.drain(..=end).collect();
            self.print(&line[..end]);
        }
        if self.pending.len() > MAX_SHOWN_LINE {
            let line = std::mem::take(&mut self.pending);
            self.print(&line);
        }
        Ok(buf.len())
    }

    fn flush(&mut self) -> std::io::Result<()> {
        Ok(())
    }
}

impl Drop for LineWriter {
    fn drop(&mut self) {
        if !self.pending.is_empty() {
            let line = std::mem::take(&mut self.pending);
            self.print(&line);
        }
    }
}

/// `⋯ 3 settled, 2 running (draft, review), 1 waiting for a person`
fn status_line(state: &RunStatus) -> String {
    let mut settled = 0;
    let mut running = Vec::new();
    let mut waiting = Vec::new();
    for (key, record) in &state.steps {
        match record.status {
            StepPhase::Completed | StepPhase::Failed | StepPhase::Skipped => settled += 1,
            StepPhase::Running => running.push(key.as_str()),
            StepPhase::Waiting => waiting.push(key.as_str()),
            StepPhase::Pending => {}
        }
    }
    let mut line = format!("  ⋯ {settled} settled");
    if !running.is_empty() {
        line.push_str(&format!(
            ", {} running ({})",
            running.len(),
            running.join(", ")
        ));
    }
    if !waiting.is_empty() {
        line.push_str(&format!(", {} waiting for a person", waiting.len()));
    }
    line
}

/// ` in 12 ms`, ` in 1.3 s` between two record times; nothing when either
/// is missing or unreadable. The kubectl plugin's tree says times the same way.
pub(crate) fn duration(start: Option<&str>, end: Option<&str>) -> String {
    let (Some(start), Some(end)) = (start, end) else {
        return String::new();
    };
    let (Ok(start), Ok(end)) = (start.parse::<Timestamp>(), end.parse::<Timestamp>()) else {
        return String::new();
    };
    let ms = end.as_millisecond() - start.as_millisecond();
    if ms < 1000 {
        format!(" in {ms} ms")
    } else {
        format!(" in {:.1} s", ms as f64 / 1000.0)
    }
}

fn first_line(s: &str) -> &str {
    s.lines().next().unwrap_or("")
}

/// ` (pass 3)`, ` (pass 3, attempt 2)` inside a loop, ` (attempt 2)`
/// outside one; nothing for a first try.
fn which_try(record: &coxswain_core::api::StepStatus) -> String {
    let in_round = record.attempts.len() as i32 - record.round_start;
    let notes: Vec<String> = match record.iteration {
        Some(pass) if pass > 1 || in_round > 1 => [
            Some(format!("pass {pass}")),
            (in_round > 1).then(|| format!("attempt {in_round}")),
        ]
        .into_iter()
        .flatten()
        .collect(),
        Some(_) => Vec::new(),
        None if in_round > 1 => vec![format!("attempt {in_round}")],
        None => Vec::new(),
    };
    if notes.is_empty() {
        String::new()
    } else {
        format!(" ({})", notes.join(", "))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use coxswain_core::api::{Attempt, StepStatus};

    fn record(attempts: usize, round_start: i32, iteration: Option<i32>) -> StepStatus {
        StepStatus {
            attempts: vec![Attempt::default(); attempts],
            round_start,
            iteration,
            ..Default::default()
        }
    }

    #[test]
    fn tries_are_named_by_pass_and_attempt() {
        assert_eq!(which_try(&record(1, 0, None)), "");
        assert_eq!(which_try(&record(2, 0, None)), " (attempt 2)");
        assert_eq!(which_try(&record(1, 0, Some(1))), "");
        assert_eq!(which_try(&record(3, 2, Some(3))), " (pass 3)");
        assert_eq!(which_try(&record(4, 2, Some(3))), " (pass 3, attempt 2)");
        assert_eq!(which_try(&record(2, 0, Some(1))), " (pass 1, attempt 2)");
    }
}
