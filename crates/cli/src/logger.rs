//! Where the libraries' warnings go: the platform crate reports what it cannot undo on its
//! own (a teardown in `Drop`, a watchdog's kill) through `log`, and the command line prints
//! each as `isobench: warning: ...` on stderr, as its own warnings.

struct Stderr;

impl log::Log for Stderr {
    fn enabled(&self, m: &log::Metadata<'_>) -> bool {
        m.level() <= log::Level::Warn
    }

    fn log(&self, r: &log::Record<'_>) {
        if self.enabled(r.metadata()) {
            let level = if r.level() == log::Level::Error {
                "error"
            } else {
                "warning"
            };
            eprintln!("isobench: {level}: {}", r.args());
        }
    }

    fn flush(&self) {}
}

static STDERR: Stderr = Stderr;

/// Sends warnings and errors logged by the libraries to stderr; once, at start.
pub fn init() {
    if log::set_logger(&STDERR).is_ok() {
        log::set_max_level(log::LevelFilter::Warn);
    }
}
