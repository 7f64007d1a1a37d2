//! Where the libraries' events go: the libraries report through `tracing` what they cannot
//! return (the platform's teardown in `Drop`, a watchdog's kill, the sentinel's), and the
//! command line prints each event as `isobench: LEVEL: ...` on stderr, warnings and errors
//! as its own (`isobench: warning: ...`). `-v` and `-q` move the level from warnings;
//! `RUST_LOG`, when set, replaces it with its own directives (`RUST_LOG=debug`,
//! `RUST_LOG=isobench_platform=trace`). Events of dependencies that use `log` come the same
//! way.

use std::fmt;

use tracing::{Event, Level, Subscriber};
use tracing_subscriber::filter::{Directive, EnvFilter, LevelFilter};
use tracing_subscriber::fmt::format::DefaultFields;
use tracing_subscriber::fmt::format::Writer;
use tracing_subscriber::fmt::{
    FmtContext, FormatEvent, FormatFields, MakeWriter, SubscriberBuilder,
};
use tracing_subscriber::registry::LookupSpan;

/// The level `-v` and `-q` choose: warnings and errors by default; each `-v` one more
/// (info, debug, trace), `-q` errors only, `-qq` nothing.
pub fn level(verbose: u8, quiet: u8) -> LevelFilter {
    const LEVELS: [LevelFilter; 6] = [
        LevelFilter::OFF,
        LevelFilter::ERROR,
        LevelFilter::WARN,
        LevelFilter::INFO,
        LevelFilter::DEBUG,
        LevelFilter::TRACE,
    ];
    let i = (2 + i32::from(verbose) - i32::from(quiet)).clamp(0, 5);
    LEVELS[i as usize]
}

/// What gets printed: `rust_log`'s directives when it has any (it wins over `-v`/`-q`),
/// else `level` for every target; and the directives that do not parse, each with why,
/// which are left out.
fn filter(level: LevelFilter, rust_log: Option<&str>) -> (EnvFilter, Vec<String>) {
    let mut valid = Vec::new();
    let mut ignored = Vec::new();
    for d in rust_log.unwrap_or("").split(',').filter(|d| !d.is_empty()) {
        match d.parse::<Directive>() {
            Ok(_) => valid.push(d),
            Err(e) => ignored.push(format!("`{d}`: {e}")),
        }
    }
    let filter = EnvFilter::builder()
        .with_default_directive(level.into())
        .parse_lossy(valid.join(","));
    (filter, ignored)
}

/// `isobench: warning: MESSAGE`, the command line's own form of a message.
struct Line;

impl<S, N> FormatEvent<S, N> for Line
where
    S: Subscriber + for<'a> LookupSpan<'a>,
    N: for<'a> FormatFields<'a> + 'static,
{
    fn format_event(
        &self,
        ctx: &FmtContext<'_, S, N>,
        mut w: Writer<'_>,
        event: &Event<'_>,
    ) -> fmt::Result {
        write!(w, "isobench: {}: ", level_name(*event.metadata().level()))?;
        ctx.format_fields(w.by_ref(), event)?;
        writeln!(w)
    }
}

fn level_name(level: Level) -> &'static str {
    match level {
        Level::ERROR => "error",
        Level::WARN => "warning",
        Level::INFO => "info",
        Level::DEBUG => "debug",
        _ => "trace",
    }
}

/// The subscriber that prints what `filter` lets through to `writer`.
fn subscriber<W>(
    filter: EnvFilter,
    writer: W,
) -> SubscriberBuilder<DefaultFields, Line, EnvFilter, W>
where
    W: for<'w> MakeWriter<'w> + Send + Sync + 'static,
{
    tracing_subscriber::fmt()
        // A closed stderr loses the messages, never the command (docs/cli.md).
        .log_internal_errors(false)
        .with_env_filter(filter)
        .event_format(Line)
        .with_writer(writer)
}

/// Sends what the libraries log to stderr at the level of `-v`/`-q` (or `RUST_LOG`); once,
/// at start.
pub fn init(verbose: u8, quiet: u8) {
    let rust_log = std::env::var("RUST_LOG").ok();
    let (filter, ignored) = filter(level(verbose, quiet), rust_log.as_deref());
    let _ = subscriber(filter, std::io::stderr).try_init();
    for i in ignored {
        tracing::warn!("RUST_LOG: ignoring {i}");
    }
}

#[cfg(test)]
mod tests {
    use std::sync::{Arc, Mutex};

    use super::*;

    /// What a subscriber wrote, shared with the test.
    #[derive(Clone, Default)]
    struct Captured(Arc<Mutex<Vec<u8>>>);

    impl std::io::Write for Captured {
        fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
            self.0.lock().unwrap().extend_from_slice(buf);
            Ok(buf.len())
        }

        fn flush(&mut self) -> std::io::Result<()> {
            Ok(())
        }
    }

    /// The text printed for one warning and one debug event under `-v`×`verbose`,
    /// `-q`×`quiet` and `rust_log`.
    fn printed(verbose: u8, quiet: u8, rust_log: Option<&str>) -> String {
        let out = Captured::default();
        let sink = out.clone();
        let (filter, _) = filter(level(verbose, quiet), rust_log);
        let s = subscriber(filter, move || sink.clone()).finish();
        tracing::subscriber::with_default(s, || {
            tracing::warn!("cleanup of run r1: could not remove x");
            tracing::debug!("tenant {} started", "a");
        });
        let text = out.0.lock().unwrap().clone();
        String::from_utf8(text).unwrap()
    }

    #[test]
    fn warnings_print_as_the_command_line_s_own_by_default() {
        assert_eq!(
            printed(0, 0, None),
            "isobench: warning: cleanup of run r1: could not remove x\n"
        );
        assert_eq!(printed(0, 0, Some("")), printed(0, 0, None));
    }

    #[test]
    fn quiet_silences_a_warning() {
        assert_eq!(printed(0, 1, None), "");
        assert_eq!(printed(0, 2, None), "");
    }

    #[test]
    fn verbose_shows_debug_lines_at_two() {
        assert!(!printed(1, 0, None).contains("debug"));
        assert!(printed(2, 0, None).ends_with("isobench: debug: tenant a started\n"));
    }

    #[test]
    fn rust_log_wins_over_the_flags() {
        let text = printed(0, 1, Some("debug"));
        assert_eq!(
            text,
            "isobench: warning: cleanup of run r1: could not remove x\n\
             isobench: debug: tenant a started\n"
        );
        assert_eq!(printed(2, 0, Some("error")), "");
        // A directive for another target only: this one's events are off.
        assert_eq!(printed(0, 0, Some("hyper=debug")), "");
    }

    #[test]
    fn a_directive_that_does_not_parse_is_left_out_and_named() {
        let (_, ignored) = filter(LevelFilter::WARN, Some("debug,=x,,hyper=bogus"));
        assert_eq!(ignored.len(), 2, "{ignored:?}");
        assert!(ignored[0].starts_with("`=x`: "), "{ignored:?}");
        assert!(printed(0, 0, Some("hyper=bogus,debug")).contains("isobench: debug: "));
    }

    #[test]
    fn levels_of_the_flags() {
        assert_eq!(level(0, 0), LevelFilter::WARN);
        assert_eq!(level(1, 0), LevelFilter::INFO);
        assert_eq!(level(3, 0), LevelFilter::TRACE);
        assert_eq!(level(9, 0), LevelFilter::TRACE);
        assert_eq!(level(0, 1), LevelFilter::ERROR);
        assert_eq!(level(0, 5), LevelFilter::OFF);
        assert_eq!(level(1, 1), LevelFilter::WARN);
    }
}
