//! `isobench serve`: the web UI and HTTP API (crates/server, docs/server.md) on an address,
//! until Ctrl-C or SIGTERM. Jobs run as child `isobench run --json-stream` of this binary.
//! Starting, it removes what killed runs left, as every command that starts runs does.

use std::path::PathBuf;
use std::process::ExitCode;

use isobench_server::{check_listen, token_from_file, Config};

use crate::args::ServeArgs;
use crate::exit::bad_input;

/// `isobench serve`.
pub fn run(a: &ServeArgs, exe: PathBuf) -> anyhow::Result<ExitCode> {
    let token = match &a.token_file {
        Some(f) => {
            let (token, made) = token_from_file(f).map_err(|e| bad_input(e.to_string()))?;
            if made {
                eprintln!("isobench: wrote a new token to {} (mode 0600)", f.display());
            }
            Some(token)
        }
        None => None,
    };
    check_listen(a.listen, token.as_deref()).map_err(|e| bad_input(e.to_string()))?;
    let state_dir = a.state_dir.clone().unwrap_or_else(|| {
        let mut s = a.db.path.clone().into_os_string();
        s.push(".serve");
        PathBuf::from(s)
    });
    // One server per state directory: taken before anything else is touched, so a second
    // server changes nothing (not even the first one's `running` rows) before it is refused.
    let lock =
        isobench_server::lock_state_dir(&state_dir).map_err(|e| bad_input(format!("{e:#}")))?;
    // What killed runs left: their objects on the host, their `running` rows.
    for line in isobench_platform::cleanup(false).summary() {
        eprintln!("isobench: removed what a dead run left: {line}");
    }
    if isobench_store::Store::is_writable(&a.db.path) {
        for o in crate::stores::mark_orphans_of(&a.db.path)? {
            eprintln!("isobench: {o}; resume it from its page or with `isobench run --resume`");
        }
    } else {
        eprintln!(
            "isobench: {} is read-only here: its runs are shown, and new jobs are refused",
            a.db.path.display()
        );
    }
    let config = Config {
        listen: a.listen,
        token,
        db: a.db.path.clone(),
        state_dir,
        exe,
        mode: crate::mode::mode(),
        header_timeout: isobench_server::HEADER_TIMEOUT,
    };
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()?;
    runtime.block_on(isobench_server::serve(config, Some(lock), |addr| {
        eprintln!("isobench: serving on http://{addr}/");
        println!("listening on http://{addr}/");
    }))?;
    Ok(ExitCode::SUCCESS)
}
