//! What `isobench doctor` and `isobench list` tell a user: text for people, and advice that
//! the commands it names accept. `doctor` writes and reads back cgroup limits as root
//! (under CI's root-test lock).

mod common;

use std::collections::BTreeSet;

use common::{code, isobench, json_of, text};

/// Rust's own debug text (`Some(0.5)`, `Shares(512)`, `Fifo(50)`, `None`), which a user
/// should never have to read.
fn debug_text(s: &str) -> Option<String> {
    for word in [
        "Some(", "None", "Ok(", "Err(", "Shares(", "Weight(", "Fifo(", "Nice(",
    ] {
        if let Some(i) = s.find(word) {
            // `None` as a word only.
            let before = s[..i].chars().last();
            let after = s[i + word.len()..].chars().next();
            if word == "None"
                && (before.is_some_and(char::is_alphanumeric)
                    || after.is_some_and(char::is_alphanumeric))
            {
                continue;
            }
            return Some(s[i.saturating_sub(30)..(i + 40).min(s.len())].to_string());
        }
    }
    None
}

/// Regression: doctor printed `limit written and read back (cpus=Some(0.5)
/// weight=Some(Shares(512)))` and `heartbeat thread priority: Fifo(50)`.
#[test]
fn doctor_prints_no_debug_text() {
    let out = isobench().arg("doctor").output().unwrap();
    assert_eq!(code(&out), 0, "{}", text(&out.stderr));
    let shown = text(&out.stdout);
    assert!(
        debug_text(&shown).is_none(),
        "{:?}\n{shown}",
        debug_text(&shown)
    );
    let doc = json_of(&isobench().args(["doctor", "--json"]).output().unwrap());
    for c in doc["checks"].as_array().unwrap() {
        let detail = c["detail"].as_str().unwrap_or_default();
        assert!(debug_text(detail).is_none(), "{c}");
    }
    // As root, the cgroup checks say what they read back in the words of --limits.
    if let Some(line) = shown.lines().find(|l| l.starts_with("ok  cgroup cpu ")) {
        assert!(
            line.contains("read back: cpus=0.5,shares=512") || line.contains("weight="),
            "{line}"
        );
    }
}

/// The code spans (`...`) of `s`.
fn code_spans(s: &str) -> Vec<String> {
    s.split('`')
        .skip(1)
        .step_by(2)
        .map(str::to_string)
        .collect()
}

/// Regression: doctor and list advised `--engine podman`, which `isobench run` refuses.
/// Every flag an advice names is one the command it names (`run` when it names none)
/// accepts; the engine is chosen with ISOBENCH_OCI_ENGINE, which every command reads.
#[test]
fn advice_flags_are_accepted_by_run() {
    let empty = tempfile::tempdir().unwrap();
    // No Docker daemon answers and no podman is on PATH: both engines give their advice.
    let env = [
        (
            "DOCKER_HOST",
            "unix:///nonexistent/isobench-docker.sock".to_string(),
        ),
        ("PATH", empty.path().display().to_string()),
    ];
    let mut advice = Vec::new();
    let list = json_of(
        &isobench()
            .args(["list", "--json"])
            .envs(env.clone())
            .output()
            .unwrap(),
    );
    for group in ["platforms", "probes", "stressors"] {
        for e in list[group].as_array().unwrap() {
            if let Some(r) = e["supported"]["reason"].as_str() {
                advice.push(r.to_string());
            }
        }
    }
    let doctor = json_of(
        &isobench()
            .args(["doctor", "--json"])
            .envs(env)
            .output()
            .unwrap(),
    );
    for c in doctor["checks"].as_array().unwrap() {
        advice.push(c["detail"].as_str().unwrap_or_default().to_string());
    }
    let all = advice.join("\n");
    // SAFETY: geteuid has no preconditions.
    if unsafe { libc::geteuid() } == 0 {
        assert!(all.contains("`ISOBENCH_OCI_ENGINE=podman`"), "{all}");
        assert!(all.contains("`ISOBENCH_OCI_ENGINE=docker`"), "{all}");
    }
    let mut helps: std::collections::BTreeMap<Vec<String>, String> = Default::default();
    let mut checked = BTreeSet::new();
    for span in advice.iter().flat_map(|a| code_spans(a)) {
        let words: Vec<&str> = span.split_whitespace().collect();
        // `isobench image build --engine podman`: the command is the words before the
        // first flag; a bare `--flag value` is advice for `run`.
        let (command, flags): (Vec<String>, Vec<&str>) = match words.first() {
            Some(&"isobench") => {
                let cmd: Vec<String> = words[1..]
                    .iter()
                    .take_while(|w| {
                        !w.starts_with('-') && w.chars().all(|c| c.is_ascii_lowercase())
                    })
                    .map(|w| w.to_string())
                    .collect();
                let flags = words
                    .iter()
                    .copied()
                    .filter(|w| w.starts_with("--"))
                    .collect();
                (cmd, flags)
            }
            Some(w) if w.starts_with("--") => (vec!["run".into()], vec![*w]),
            _ => continue,
        };
        for flag in flags {
            let flag = flag.split('=').next().unwrap().to_string();
            let help = helps.entry(command.clone()).or_insert_with(|| {
                let out = isobench().args(&command).arg("--help").output().unwrap();
                assert_eq!(code(&out), 0, "isobench {command:?} --help");
                text(&out.stdout)
            });
            assert!(
                help.contains(&flag),
                "the advice `{span}` names {flag}, which `isobench {}` does not take",
                command.join(" ")
            );
            checked.insert(format!("{} {flag}", command.join(" ")));
        }
    }
    assert!(
        !all.contains("(`--engine"),
        "no bare --engine advice, which run would refuse: {all}"
    );
    eprintln!("advice flags checked: {checked:?}");
}
