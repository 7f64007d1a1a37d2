//! Bad scenario files: every error names the file, line and column, the field, the allowed
//! values and the fix. Snapshots pin the exact text.

use isobench_experiment::{HostView, Plan, PlanOptions, Scenario, Source};

fn parse_err(text: &str) -> String {
    Scenario::parse(Source::new("bad.toml", text))
        .expect_err("scenario should be refused")
        .to_string()
}

fn plan_err(text: &str) -> String {
    let sc = Scenario::parse(Source::new("bad.toml", text)).expect("parses");
    let host = HostView::synthetic(2, 4 << 30, true);
    Plan::resolve(&sc, &host, &PlanOptions::default())
        .expect_err("plan should be refused")
        .to_string()
}

const GOOD_TAIL: &str = r#"
[[tenant]]
name = "v"
role = "victim"

[[tenant]]
name = "a"
role = "aggressor"

[[probe]]
name = "syscall"

[[stressor]]
name = "cpu"
"#;

#[test]
fn every_example_and_the_builtin_scenario_are_valid() {
    let q = Scenario::quick();
    assert_eq!(q.name, "quick");
    let dir = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../../examples");
    let mut n = 0;
    for e in std::fs::read_dir(dir).unwrap() {
        let p = e.unwrap().path();
        if p.extension().is_some_and(|x| x == "toml") {
            let text = std::fs::read_to_string(&p).unwrap();
            Scenario::parse(Source::new(p.display().to_string(), text))
                .unwrap_or_else(|e| panic!("{e}"));
            n += 1;
        }
    }
    assert!(n >= 2, "examples/ holds {n} scenarios");
}

#[test]
fn malformed_toml() {
    insta::assert_snapshot!(parse_err("kind = \"matrix\nseed = 1\n"));
}

#[test]
fn unknown_field_suggests_the_right_one() {
    insta::assert_snapshot!(parse_err(&format!(
        "kind = \"matrix\"\n[repetitions]\nmin = 3\nci_halfwidth = 2.0\n{GOOD_TAIL}"
    )));
}

#[test]
fn unknown_top_level_field_and_tables_of_other_kinds() {
    insta::assert_snapshot!(parse_err(&format!(
        "kind = \"matrix\"\nseeds = 3\n[matrix]\nfoo = 1\n[sweep]\nvalues = [1]\n{GOOD_TAIL}"
    )));
}

#[test]
fn wrong_type() {
    insta::assert_snapshot!(parse_err(&format!(
        "kind = \"matrix\"\nseed = true\n{GOOD_TAIL}"
    )));
}

#[test]
fn unknown_probe_and_stressor_in_probe_table() {
    let text = format!(
        "kind = \"matrix\"\n{GOOD_TAIL}\n[[probe]]\nname = \"cache-latncy\"\n\n[[probe]]\nname = \"membw\"\n"
    );
    // The list of allowed names is the registry's, in catalogue order; it is checked here and
    // left out of the snapshot, so that adding a probe does not touch this test.
    let names: Vec<&str> = isobench_workloads::PROBES
        .iter()
        .map(|p| p.name())
        .collect();
    let allowed = format!("allowed: {}", names.join(", "));
    let err = parse_err(&text);
    assert_eq!(err.matches(&allowed).count(), 2, "{err}");
    insta::assert_snapshot!(err.replace(&allowed, "allowed: <every probe, in catalogue order>"));
}

#[test]
fn many_problems_are_reported_together() {
    let text = r#"kind = "sideways"
[trial]
duration = "fast"
warmup = "2x"

[repetitions]
min = 5
max = 3
confidence = 1.5

[[tenant]]
name = "Victim One"
role = "bystander"

[[probe]]
name = "cpu-int"
params = { threads = 0, kernal = "mix" }

[[stressor]]
name = "cpu"
intensity = [50, 150]
"#;
    let e = parse_err(text);
    for needle in [
        "bad.toml:1:8: `kind`",
        "unknown value `sideways`",
        "`trial.duration`",
        "`trial.warmup`",
        "`repetitions.max`",
        "`repetitions.confidence`",
        "`tenant[0].name`",
        "`tenant[0].role`",
        "did you mean `kernel`",
        "`stressor[0].intensity`",
        "no tenant has role = \"aggressor\"",
    ] {
        assert!(e.contains(needle), "missing {needle:?} in:\n{e}");
    }
    insta::assert_snapshot!(e);
}

#[test]
fn impossible_limits_are_refused_at_plan_time() {
    let text = r#"kind = "matrix"
[[tenant]]
name = "v"
role = "victim"
limits = { cpus = 4, memory = "12Q" }

[[tenant]]
name = "a"
role = "aggressor"
limits = { cpuset = "0-7", memroy = "1G" }

[[probe]]
name = "syscall"

[[stressor]]
name = "cpu"
"#;
    insta::assert_snapshot!(plan_err(text));
}

#[test]
fn memory_too_small_for_the_workloads() {
    let text = r#"kind = "matrix"
[[tenant]]
name = "v"
role = "victim"
limits = { memory = "100M" }

[[tenant]]
name = "a"
role = "aggressor"

[[probe]]
name = "mem-bandwidth"
params = { size = "64M" }

[[stressor]]
name = "cpu"
"#;
    let e = plan_err(text);
    assert!(e.contains("`tenant[0].limits.memory`"), "{e}");
    assert!(e.contains("measure paging"), "{e}");
    insta::assert_snapshot!(e);
}

#[test]
fn a_tenant_pool_count_out_of_range_or_too_long_a_name() {
    insta::assert_snapshot!(parse_err(
        r#"kind = "matrix"

[[tenant]]
name = "v"
role = "victim"

[[tenant]]
name = "a"
count = 0
role = "aggressor"

[[tenant]]
name = "b"
count = "many"
role = "aggressor"

[[tenant]]
name = "an-aggressor-with-a-long-name-x"
count = 10
role = "aggressor"

[[tenant]]
name = "c"
count = 257
role = "aggressor"

[[probe]]
name = "syscall"

[[stressor]]
name = "cpu"
"#
    ));
}

#[test]
fn a_pool_member_named_like_another_tenant() {
    insta::assert_snapshot!(parse_err(
        r#"kind = "matrix"

[[tenant]]
name = "agg-2"
role = "victim"

[[tenant]]
name = "agg"
count = 3
role = "aggressor"

[[probe]]
name = "syscall"

[[stressor]]
name = "cpu"
"#
    ));
}

#[test]
fn a_pool_error_at_plan_time_names_its_table() {
    // Four tenants of the pool, one error at the pool's limit, naming the table's field.
    let e = plan_err(
        r#"kind = "matrix"

[[tenant]]
name = "v"
role = "victim"

[[tenant]]
name = "agg"
count = 4
role = "aggressor"
limits = { memory = "32M" }

[[probe]]
name = "syscall"

[[stressor]]
name = "cpu"
"#,
    );
    assert!(e.contains("`tenant[1].limits.memory`"), "{e}");
    assert_eq!(e.matches("too little for a tenant").count(), 1, "{e}");
}

#[test]
fn tenant_names_that_could_become_a_path_or_an_option_are_refused() {
    // As written in TOML. Each would reach a path (cgroup dir, workdir, netns name), split a
    // command line or read as an option of ip/tc.
    for name in [
        r#""../x""#,
        r#""a/b""#,
        r#"".""#,
        r#""a\u0000b""#,
        r#""a b""#,
        r#""a\nb""#,
        r#""-x""#,
        r#""--help""#,
        r#""a,b""#,
        r#""""#,
    ] {
        let text = format!(
            "[[tenant]]\nname = {name}\nrole = \"victim\"\n\n[[tenant]]\nname = \"a\"\n\
             role = \"aggressor\"\n\n[[probe]]\nname = \"syscall\"\n\n[[stressor]]\nname = \"cpu\"\n"
        );
        let e = parse_err(&text);
        assert!(e.contains("is not a valid tenant name"), "{name}: {e}");
        assert!(e.contains("tenant[0].name"), "{name}: {e}");
    }
}

/// A `command` probe's metric is the one its params declare (`name = "read_p99_ns"`), so a
/// scenario's `metrics = [...]` selects it by that name.
const COMMAND_SCENARIO: &str = r#"
kind = "matrix"

[[tenant]]
name = "v"
role = "victim"

[[tenant]]
name = "a"
role = "aggressor"

[[probe]]
name = "command"
params = { cmd = "fio --output-format=json", metric = 'json:jobs[0].read.clat_ns.percentile["99.000000"]', unit = "ns", direction = "lower", name = "read_p99_ns" }
metrics = [METRICS]

[[stressor]]
name = "cpu"
"#;

#[test]
fn a_command_probe_selects_the_metric_its_params_declare() {
    let text = COMMAND_SCENARIO.replace("METRICS", "\"read_p99_ns\"");
    let sc = Scenario::parse(Source::new("good.toml", text)).unwrap_or_else(|e| panic!("{e}"));
    assert_eq!(sc.probes[0].metrics, vec!["read_p99_ns".to_string()]);
}

#[test]
fn a_command_probe_metric_not_declared_names_the_field_and_the_declared_one() {
    let err = parse_err(&COMMAND_SCENARIO.replace("METRICS", "\"value\""));
    assert!(err.contains("probe[0].metrics"), "{err}");
    assert!(
        err.contains("command does not report a metric `value`"),
        "{err}"
    );
    assert!(
        err.contains("read_p99_ns"),
        "the declared name is listed: {err}"
    );
    insta::assert_snapshot!(err);
}

#[test]
fn a_command_probe_metric_near_the_declared_one_is_suggested() {
    let err = parse_err(&COMMAND_SCENARIO.replace("METRICS", "\"read_p99\""));
    assert!(err.contains("did you mean \"read_p99_ns\"?"), "{err}");
}
