//! The mode sessions run in: the real platform and clock, or the hidden fakes of the tests.

use isobench_experiment::session::Mode;

/// Hidden test mode: `ISOBENCH_DEBUG_FAKE=1` runs on the fake platform and clock (instant),
/// `=slow` lets real time pass as well; `ISOBENCH_DEBUG_FAKE_SCALE=F` multiplies every
/// stressor's effect by F (a host with worse isolation, for fleet tests).
pub fn mode() -> Mode {
    let effect_scale = std::env::var("ISOBENCH_DEBUG_FAKE_SCALE")
        .ok()
        .and_then(|v| v.parse::<f64>().ok())
        .filter(|f| f.is_finite() && *f >= 0.0)
        .unwrap_or(1.0);
    match std::env::var("ISOBENCH_DEBUG_FAKE").as_deref() {
        Err(_) | Ok("" | "0") => Mode::Real,
        Ok("slow") => Mode::Fake {
            real_time: 1.0,
            effect_scale,
        },
        Ok(_) => Mode::Fake {
            real_time: 0.0,
            effect_scale,
        },
    }
}
