//! Logs: `tracing` events on stderr, one readable line each or one JSON
//! object each (`--log-format json`) for log collectors, filtered by
//! `--log-level`.

use std::io::IsTerminal;

use tracing::Subscriber;
use tracing_subscriber::{EnvFilter, fmt::MakeWriter, util::SubscriberInitExt};

use super::{LogFormat, LogSettings, OpsError};

/// Sends this process's logs to stderr as `settings` say. Call once, first
/// thing: a second call fails with [`OpsError::Logging`].
pub fn init_tracing(settings: &LogSettings) -> Result<(), OpsError> {
    let ansi = std::io::stderr().is_terminal();
    subscriber(settings, std::io::stderr, ansi)?
        .try_init()
        .map_err(OpsError::Logging)
}

/// The subscriber [`init_tracing`] installs, writing to `writer`.
fn subscriber<W>(
    settings: &LogSettings,
    writer: W,
    ansi: bool,
) -> Result<Box<dyn Subscriber + Send + Sync>, OpsError>
where
    W: for<'w> MakeWriter<'w> + Send + Sync + 'static,
{
    let filter = EnvFilter::try_new(&settings.level).map_err(|source| OpsError::LogLevel {
        text: settings.level.clone(),
        source,
    })?;
    let builder = tracing_subscriber::fmt()
        .with_env_filter(filter)
        .with_writer(writer);
    Ok(match settings.format {
        LogFormat::Text => Box::new(builder.with_ansi(ansi).finish()),
        LogFormat::Json => Box::new(builder.json().with_ansi(false).finish()),
    })
}

#[cfg(test)]
mod tests {
    use std::sync::{Arc, Mutex};

    use super::*;

    /// A writer the test reads back.
    #[derive(Clone, Default)]
    struct Captured(Arc<Mutex<Vec<u8>>>);

    impl std::io::Write for Captured {
        fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
            self.0.lock().expect("not poisoned").extend_from_slice(buf);
            Ok(buf.len())
        }
        fn flush(&mut self) -> std::io::Result<()> {
            Ok(())
        }
    }

    impl<'w> MakeWriter<'w> for Captured {
        type Writer = Captured;
        fn make_writer(&'w self) -> Self::Writer {
            self.clone()
        }
    }

    fn logged(settings: &LogSettings) -> String {
        let out = Captured::default();
        let subscriber = subscriber(settings, out.clone(), false).expect("valid settings");
        tracing::subscriber::with_default(subscriber, || {
            tracing::info!(run = "post-x7k2", "run finished");
            tracing::debug!("details");
        });
        let bytes = out.0.lock().expect("not poisoned").clone();
        String::from_utf8(bytes).expect("utf-8 logs")
    }

    #[test]
    fn json_lines_carry_the_message_and_fields() {
        let settings = LogSettings {
            format: LogFormat::Json,
            ..LogSettings::default()
        };
        let text = logged(&settings);
        let lines: Vec<&str> = text.lines().collect();
        assert_eq!(lines.len(), 1, "debug is filtered out at info: {text}");
        let line: serde_json::Value = serde_json::from_str(lines[0]).expect("a JSON line");
        assert_eq!(line["level"], "INFO");
        assert_eq!(line["fields"]["message"], "run finished");
        assert_eq!(line["fields"]["run"], "post-x7k2");
    }

    #[test]
    fn text_lines_follow_the_level() {
        let settings = LogSettings {
            level: "debug".into(),
            ..LogSettings::default()
        };
        let text = logged(&settings);
        assert!(
            text.contains("run finished") && text.contains("run=\"post-x7k2\""),
            "{text}"
        );
        assert!(text.contains("details"), "debug is on: {text}");
        assert!(
            serde_json::from_str::<serde_json::Value>(text.lines().next().unwrap_or("")).is_err()
        );
    }

    #[test]
    fn a_bad_filter_names_the_flag() {
        let settings = LogSettings {
            level: "info,[oops".into(),
            ..LogSettings::default()
        };
        let err = subscriber(&settings, Captured::default(), false)
            .err()
            .expect("refused");
        assert!(err.to_string().contains("--log-level"), "{err}");
    }
}
