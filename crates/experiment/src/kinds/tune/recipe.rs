//! How to apply each search's recommended setting on the user's own systems
//! ([`isobench_platform::apply`]): a row per line of each target's recipe, the knobs a target
//! has no equivalent of named with why.

use isobench_platform::{apply, Limits};
use isobench_results::{Column, Section, Value};

use super::settings::TuneSettings;

/// The section `tune-apply`: for each `(stressor, knob index, grid step)` recommended, the
/// setting's recipes. The disk and the unit, container or cgroup are placeholders: the
/// analysis does not know the user's.
pub fn section(set: &TuneSettings, recommended: &[(String, usize, usize)]) -> Option<Section> {
    if recommended.is_empty() {
        return None;
    }
    let mut s = Section::new(
        "tune-apply",
        "How to apply the recommended settings",
        vec![
            Column::text("aggressor"),
            Column::text("setting"),
            Column::text("how"),
        ],
    );
    for (stressor, ki, g) in recommended {
        let k = &set.knobs[*ki];
        let setting = format!("{}={}", k.key, k.value_text(*g));
        let Ok(limits) = Limits::parse(&setting) else {
            continue;
        };
        let name = format!("{} {setting}", k.tenant);
        for line in apply::render(&apply::recipes(&limits, None)) {
            s.push(vec![
                Value::text_of(stressor.clone()),
                Value::text_of(name.clone()),
                Value::text_of(line),
            ]);
        }
    }
    s.notes.push(format!(
        "UNIT, CONTAINER, IMAGE and GROUP stand for the {}'s unit, container, image and cgroup, \
         /dev/DEVICE and MAJ:MIN for the disk of its data (lsblk shows both).",
        set.knobs.first().map_or("tenant", |k| k.tenant.as_str())
    ));
    Some(s)
}
