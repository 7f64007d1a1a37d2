//! The host's measurement slot from the command line: a command the slot refuses fails with
//! exit code 5, naming who holds it, or with `--wait` waits for it, saying once per holder
//! what it waits for. A signal while waiting ends the wait.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::Duration;

use isobench_platform::{MeasureSlot, SharedSlot, SlotHolder};

/// Calls `take` until it gets the slot: at once, or (with `wait`) once a second while it is
/// held, noting each new holder. `Ok(None)`: a signal stopped the wait; `Err(holder)` inside:
/// refused without `wait`.
pub fn take<T>(
    wait: bool,
    mut note: impl FnMut(&str),
    mut take: impl FnMut() -> anyhow::Result<Result<T, SlotHolder>>,
) -> anyhow::Result<Option<Result<T, SlotHolder>>> {
    let stop = Arc::new(AtomicBool::new(false));
    let mut waiting_for: Option<SlotHolder> = None;
    loop {
        match take()? {
            Err(holder) if wait => {
                if waiting_for.as_ref() != Some(&holder) {
                    if waiting_for.is_none() {
                        crate::tenant::install_stop(stop.clone())?;
                    }
                    note(&format!(
                        "{holder} is measuring on this host; waiting for it to end"
                    ));
                    waiting_for = Some(holder);
                }
                if stop.load(Ordering::SeqCst) {
                    return Ok(None);
                }
                std::thread::sleep(Duration::from_secs(1));
            }
            r => return Ok(Some(r)),
        }
    }
}

/// A share of the slot for `probe` and `stress` (`what`): they run side by side, never
/// beside a run. `Ok(None)`: a signal stopped the wait.
pub fn share(wait: bool, what: &str) -> anyhow::Result<Option<SharedSlot>> {
    let got = take(wait, |n| eprintln!("isobench: {n}"), MeasureSlot::try_share)?;
    match got {
        None => Ok(None),
        Some(Ok(slot)) => Ok(Some(slot)),
        Some(Err(holder)) => Err(crate::exit::busy(format!(
            "{holder} is measuring on this host; {what} now would disturb its figures. Wait \
             for it to end (`--wait`), or stop it first"
        ))),
    }
}
