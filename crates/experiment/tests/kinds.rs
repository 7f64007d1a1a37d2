//! Each experiment kind end to end on the fake platform and the fake clock: the plan it
//! makes of its `[KIND]` table, the run, and the sections of its results, pinned as text.

use isobench_experiment::analysis::{analyze, Results};
use isobench_experiment::fake::{FakeBackend, FakeScript};
use isobench_experiment::orchestrator::{create_run, Engine, EngineIo, EngineOptions};
use isobench_experiment::progress::Transcript;
use isobench_experiment::stored::{
    analyzed, store_results, Trials, ANALYSIS_CODE, RESULTS_ENCODING,
};
use isobench_experiment::{HostView, Plan, PlanOptions, Scenario, Source};
use isobench_results::Section;
use isobench_store::{Condition, LoadedRun, RunId, RunStatus, Store};

/// Tenants, timing and one probe of every kind's scenario here; the kind adds the rest.
const COMMON: &str = r#"
seed = 11

[trial]
duration = "200ms"
warmup = "100ms"
solo = "0s"
baseline_every = 1

[repetitions]
min = 3
max = 4
ci_half_width = 2.0

[[tenant]]
name = "victim"
role = "victim"
limits = { memory = "512M", pids = 128 }

[[tenant]]
name = "aggressor"
role = "aggressor"
limits = { memory = "512M", pids = 64 }

[[probe]]
name = "cpu-int"
"#;

fn plan_of(text: &str) -> Plan {
    plan_on(text, 2)
}

/// The plan of `text` on a synthetic host of `cpus` CPUs.
fn plan_on(text: &str, cpus: usize) -> Plan {
    let sc = Scenario::parse(Source::new("kind.toml", text)).unwrap_or_else(|e| panic!("{e}"));
    let host = HostView::synthetic(cpus, 8 << 30, true);
    Plan::resolve(&sc, &host, &PlanOptions::default()).unwrap_or_else(|e| panic!("{e}"))
}

/// The results of a run of `text`; checks on the way that its results document, stored as a
/// run stores it, reads back as the same results (every kind's sections and tables).
fn run(text: &str) -> Results {
    let (mut store, id) = run_in_store(text);
    let r = analyze(&store.load_run(&id).unwrap());
    assert_eq!(store_results(&mut store, &id).unwrap(), r);
    assert!(store
        .document(&id, ANALYSIS_CODE, RESULTS_ENCODING)
        .unwrap()
        .is_some());
    assert_eq!(
        analyzed(&store, id.as_str(), Trials::WithSeries).unwrap(),
        r
    );
    r
}

/// A run of `text` to its end, as the store holds it.
fn run_stored(text: &str) -> LoadedRun {
    let (store, id) = run_in_store(text);
    store.load_run(&id).unwrap()
}

/// A run of `text` to its end, in a store of its own.
fn run_in_store(text: &str) -> (Store, RunId) {
    run_scripted(text, FakeScript::default())
}

/// [`run_in_store`] on a fake platform doing what `script` says.
fn run_scripted(text: &str, script: FakeScript) -> (Store, RunId) {
    run_on(text, 2, script)
}

/// [`run_scripted`] on a synthetic host of `cpus` CPUs.
fn run_on(text: &str, cpus: usize, script: FakeScript) -> (Store, RunId) {
    let plan = plan_on(text, cpus);
    let mut store = Store::open_in_memory().unwrap();
    let (mut backend, clock) = FakeBackend::new(plan.seed, script);
    let run = create_run(&mut store, &plan, text, "fake", serde_json::json!({}), 0).unwrap();
    let mut t = Transcript::default();
    let out = Engine::new(
        &plan,
        run.clone(),
        EngineIo::new(&mut store, &mut backend, &clock, &mut t),
        EngineOptions::default(),
    )
    .execute()
    .unwrap();
    assert_eq!(out.status, RunStatus::Complete, "{}", out.reason);
    (store, run)
}

/// A section as aligned text: title, headers, rows, notes.
fn text(s: &Section) -> String {
    let mut rows = vec![s.headers()];
    rows.extend(s.text_rows());
    let widths: Vec<usize> = (0..rows[0].len())
        .map(|i| rows.iter().map(|r| r[i].len()).max().unwrap_or(0))
        .collect();
    let mut out = format!("{} [{}]\n", s.title, s.id);
    for r in rows {
        let cells: Vec<String> = r
            .iter()
            .zip(&widths)
            .map(|(c, w)| format!("{c:>w$}"))
            .collect();
        out.push_str(cells.join("  ").trim_end());
        out.push('\n');
    }
    for n in &s.notes {
        out.push_str(&format!("  {n}\n"));
    }
    out
}

#[test]
fn sweep_runs_the_swept_setting_and_draws_its_curve() {
    let scenario = format!(
        "kind = \"sweep\"\n{COMMON}\n[[stressor]]\nname = \"cpu\"\n\n[[stressor]]\nname = \
         \"membw\"\n\n[sweep]\nstressor = \"cpu\"\nparam = \"intensity\"\nvalues = [25, 50, \
         100]\n"
    );
    let plan = plan_of(&scenario);
    let ids: Vec<&str> = plan.conditions.iter().map(|c| c.id.as_str()).collect();
    assert_eq!(ids, ["cpu@25", "cpu@50", "cpu@100"], "membw is not swept");
    let r = run(&scenario);
    assert_eq!(r.kind.as_str(), "sweep");
    assert_eq!(r.sections.len(), 1);
    insta::assert_snapshot!("sweep_curve", text(&r.sections[0]));
}

#[test]
fn sweep_of_a_parameter_names_each_point_after_it() {
    let scenario = format!(
        "kind = \"sweep\"\n{COMMON}\n[[stressor]]\nname = \"cpu\"\n\n[sweep]\nstressor = \
         \"cpu\"\nparam = \"threads\"\nvalues = [1, 2]\n"
    );
    let plan = plan_of(&scenario);
    let ids: Vec<&str> = plan.conditions.iter().map(|c| c.id.as_str()).collect();
    assert_eq!(ids, ["cpu:threads=1", "cpu:threads=2"]);
    let threads: Vec<String> = plan
        .conditions
        .iter()
        .map(|c| c.params.0["threads"].to_string())
        .collect();
    assert_eq!(threads, ["1", "2"]);
}

#[test]
fn sensitivity_finds_the_tolerated_intensity_of_each_stressor() {
    let scenario = format!(
        "kind = \"sensitivity\"\n{COMMON}\n[[stressor]]\nname = \"cpu\"\n\n[[stressor]]\nname \
         = \"membw\"\n\n[sensitivity]\nintensities = [10, 25, 50, 100]\nlimit = 5\n"
    );
    let r = run(&scenario);
    let ids: Vec<&str> = r.sections.iter().map(|s| s.id.as_str()).collect();
    assert_eq!(ids, ["tolerated", "curve-cpu", "curve-membw"]);
    // The fake slows a CPU probe by 30% x intensity beside the cpu stressor: 3% at 10,
    // 7.5% at 25, so 10 is the highest intensity under 5%; beside membw, by 8% x intensity
    // at most... 0.5% x intensity (another class), never 5%.
    let tol = text(&r.sections[0]);
    assert!(tol.contains("cpu-int ops_per_sec"), "{tol}");
    insta::assert_snapshot!("sensitivity_tolerated", tol);
    insta::assert_snapshot!("sensitivity_curve_cpu", text(&r.sections[1]));
}

#[test]
fn pairwise_reports_both_sides_of_every_pair() {
    let scenario = format!(
        "kind = \"pairwise\"\n{}\n[[probe]]\nname = \"disk-io\"\nlabel = \"disk\"\n\n\
         [[stressor]]\nname = \"cpu\"\n\n[[stressor]]\nname = \"disk\"\n\n[pairwise]\n\
         workloads = [\"cpu\", \"disk\"]\n",
        COMMON.replace("solo = \"0s\"", "solo = \"200ms\"").replace(
            "name = \"cpu-int\"",
            "name = \"cpu-int\"\nlabel = \"cpu\"\nmetrics = [\"ops_per_sec\"]"
        )
    );
    let r = run(&scenario);
    let pairs = r.sections.iter().find(|s| s.id == "pairs").expect("pairs");
    assert_eq!(pairs.rows.len(), 4, "cpu and disk on each side");
    // Same resource, the fake slows each side by about 30%: both take longer than alone.
    let row = &pairs.rows[0];
    assert_eq!(row[0].text(), "cpu");
    assert_eq!(row[1].text(), "cpu");
    assert!(row[2].as_f64().unwrap() > 1.1, "{}", row[2].text());
    insta::assert_snapshot!("pairwise_pairs", text(pairs));
    let bad = scenario.replace("solo = \"200ms\"", "solo = \"0s\"");
    let e = Scenario::parse(Source::new("kind.toml", bad))
        .expect_err("pairwise without solo")
        .to_string();
    assert!(e.contains("needs its rate alone"), "{e}");
}

#[test]
fn kind_settings_are_checked_where_they_are_written() {
    let bad = format!(
        "kind = \"sweep\"\n{COMMON}\n[[stressor]]\nname = \"cpu\"\n\n[sweep]\nstressor = \
         \"cpu\"\nparam = \"thread\"\nvalues = [1, 2]\n"
    );
    let e = Scenario::parse(Source::new("kind.toml", bad))
        .expect_err("unknown parameter")
        .to_string();
    insta::assert_snapshot!("sweep_unknown_param", e);
    let missing = format!("kind = \"sweep\"\n{COMMON}\n[[stressor]]\nname = \"cpu\"\n");
    let e = Scenario::parse(Source::new("kind.toml", missing))
        .expect_err("no [sweep]")
        .to_string();
    assert!(e.contains("needs a [sweep] table"), "{e}");
    let unsorted = format!(
        "kind = \"sensitivity\"\n{COMMON}\n[[stressor]]\nname = \"cpu\"\n\n[sensitivity]\n\
         intensities = [50, 10]\nlimits = 3\n"
    );
    let e = Scenario::parse(Source::new("kind.toml", unsorted))
        .expect_err("unsorted, and a misspelt key")
        .to_string();
    insta::assert_snapshot!("sensitivity_bad_table", e);
}

#[test]
fn every_preset_parses_and_says_what_it_reproduces_and_how_long_it_takes() {
    use isobench_experiment::scenario::{preset_header, PRESETS};
    for (name, what, text) in PRESETS {
        let sc = Scenario::parse(Source::new(format!("<preset:{name}>"), *text))
            .unwrap_or_else(|e| panic!("{e}"));
        assert_eq!(&sc.name, name);
        assert!(!what.is_empty());
        let (reproduces, takes) = preset_header(text);
        assert!(
            reproduces.is_some_and(|r| r.len() > 20),
            "{name}: no `# reproduces:`"
        );
        assert!(
            takes.is_some_and(|t| t.contains("minute")),
            "{name}: no `# takes:`"
        );
    }
}

/// `scale`'s scenario: the common victim and aggressor, plus a pool of five more aggressors.
fn scale_scenario(table: &str) -> String {
    format!(
        "kind = \"scale\"\n{COMMON}\n[[tenant]]\nname = \"pool\"\ncount = 5\nrole = \
         \"aggressor\"\nlimits = {{ memory = \"256M\", pids = 32 }}\n\n[[stressor]]\nname = \
         \"cpu\"\nintensity = 50\n\n{table}"
    )
}

#[test]
fn scale_grows_the_active_aggressors_and_draws_one_row_per_count() {
    let scenario = scale_scenario("[scale]\ncounts = [1, 3, 6]\n");
    let plan = plan_of(&scenario);
    let ids: Vec<&str> = plan.conditions.iter().map(|c| c.id.as_str()).collect();
    assert_eq!(
        ids,
        [
            "cpu@50:aggressors=1",
            "cpu@50:aggressors=3",
            "cpu@50:aggressors=6"
        ]
    );
    // The first N aggressors in file order run it; the others are idle.
    let active: Vec<Vec<&str>> = plan
        .conditions
        .iter()
        .map(|c| c.assignments.keys().map(String::as_str).collect())
        .collect();
    assert_eq!(active[0], ["aggressor"]);
    assert_eq!(active[1], ["aggressor", "pool-1", "pool-2"]);
    assert_eq!(active[2].len(), 6);
    assert!(plan
        .conditions
        .iter()
        .all(|c| c.design == isobench_experiment::plan::Design::Paired));

    let r = run(&scenario);
    assert_eq!(r.kind.as_str(), "scale");
    assert_eq!(r.sections.len(), 1);
    // The fake slows a CPU probe by 30% x intensity per running cpu stressor, so the curve
    // grows with the count: ~15%, ~45%, ~90%.
    insta::assert_snapshot!("scale_curve", text(&r.sections[0]));
}

#[test]
fn scale_counts_default_to_doubling_up_to_the_pool() {
    let plan = plan_of(&scale_scenario(""));
    let ids: Vec<&str> = plan.conditions.iter().map(|c| c.id.as_str()).collect();
    assert_eq!(
        ids,
        [
            "cpu@50:aggressors=1",
            "cpu@50:aggressors=2",
            "cpu@50:aggressors=4",
            "cpu@50:aggressors=6"
        ]
    );
}

#[test]
fn scale_settings_are_checked_where_they_are_written() {
    let e = Scenario::parse(Source::new(
        "kind.toml",
        scale_scenario("[scale]\nstressor = \"cache\"\ncounts = [4, 2, 9]\n"),
    ))
    .expect_err("unknown stressor, unsorted and too many")
    .to_string();
    insta::assert_snapshot!("scale_bad_table", e);
    let e = Scenario::parse(Source::new(
        "kind.toml",
        scale_scenario("[scale]\ncounts = [4, 2, 9]\n"),
    ))
    .expect_err("unsorted and too many")
    .to_string();
    assert!(
        e.contains("not increasing") && e.contains("9 aggressors asked for"),
        "{e}"
    );
}

/// `fidelity`'s scenario: the common tenants, the victim on one core, a cpu load.
fn fidelity_scenario(table: &str) -> String {
    format!("kind = \"fidelity\"\n{COMMON}\n[[stressor]]\nname = \"cpu\"\n\n{table}").replace(
        "limits = { memory = \"512M\", pids = 128 }",
        "limits = { memory = \"512M\", pids = 128, cpuset = \"0\" }",
    )
}

#[test]
fn fidelity_sweeps_the_limit_idle_and_loaded_and_reports_q() {
    let scenario = fidelity_scenario("[fidelity]\nlimits = [25, 50, 100]\n");
    let plan = plan_of(&scenario);
    let ids: Vec<&str> = plan.conditions.iter().map(|c| c.id.as_str()).collect();
    assert_eq!(
        ids,
        [
            "25%",
            "25%+cpu@100",
            "50%",
            "50%+cpu@100",
            "100%",
            "100%+cpu@100"
        ]
    );
    // Idle conditions run nothing; each sets the victim's CPU limit to s x its one core.
    assert!(plan.conditions[0].assignments.is_empty());
    assert_eq!(plan.conditions[1].assignments.len(), 1);
    let cpus: Vec<Option<f64>> = plan
        .conditions
        .iter()
        .map(|c| c.limits["victim"].set.cpus)
        .collect();
    assert_eq!(
        cpus,
        [
            Some(0.25),
            Some(0.25),
            Some(0.5),
            Some(0.5),
            Some(1.0),
            Some(1.0)
        ]
    );

    let r = run(&scenario);
    assert_eq!(r.kind.as_str(), "fidelity");
    assert_eq!(r.sections.len(), 1);
    // The fake gives a probe limited to c < 1 CPU the share c x (1 - 0.1 x (1 - c)): q =
    // 92.5% at 25%, 95% at 50%, 100% at 100%; the cpu load costs it another 30%.
    insta::assert_snapshot!("fidelity_profile", text(&r.sections[0]));
}

#[test]
fn fidelity_sweeps_the_core_count_and_measures_each_variant_on_its_own_cores() {
    let scenario = fidelity_scenario("[fidelity]\nlimits = [50, 100]\ncores = [1, 2]\n")
        .replace("cpuset = \"0\"", "cpuset = \"0-1\"");
    let plan = plan_of(&scenario);
    // One variant of the probe per count, with as many threads, each its own baseline.
    let probes: Vec<(&str, Option<u64>)> = plan
        .probes
        .iter()
        .map(|p| (p.id.as_str(), p.params.0["threads"].as_u64()))
        .collect();
    assert_eq!(probes, [("cpu-int-1c", Some(1)), ("cpu-int-2c", Some(2))]);
    let conds: Vec<(&str, Option<f64>)> = plan
        .conditions
        .iter()
        .map(|c| (c.id.as_str(), c.limits["victim"].set.cpus))
        .collect();
    assert_eq!(
        conds,
        [
            ("50%/1c", Some(0.5)),
            ("50%/1c+cpu@100", Some(0.5)),
            ("100%/1c", Some(1.0)),
            ("100%/1c+cpu@100", Some(1.0)),
            ("50%/2c", Some(1.0)),
            ("50%/2c+cpu@100", Some(1.0)),
            ("100%/2c", Some(2.0)),
            ("100%/2c+cpu@100", Some(2.0)),
        ]
    );
    // Each variant under the conditions of its own count only: half of the matrix's cells.
    let mut all = plan.clone();
    all.kind = isobench_experiment::Kind::named("matrix").unwrap();
    let every = all.kind.experiment().estimate(&all);
    assert_eq!(plan.estimate.trials_per_round * 2, every.trials_per_round);
    assert!(plan.estimate.secs_max < every.secs_max);

    let loaded = run_stored(&scenario);
    let cores_of_probe = |p: &str| p.rsplit_once('-').map(|(_, k)| k.to_string());
    let cores_of_condition = |c: &str| {
        c.split_once('/')
            .map(|(_, k)| k.split('+').next().unwrap_or(k).to_string())
    };
    let mut contended = 0;
    for t in &loaded.trials {
        if let Condition::Contended(c) = &t.condition {
            contended += 1;
            assert_eq!(
                cores_of_probe(&t.probe),
                cores_of_condition(c),
                "trial {} ran {} under {c}",
                t.key,
                t.probe
            );
        }
    }
    assert!(contended > 0);
    // The estimate counts the trials a round runs (paired-only conditions repeat their pair).
    let first_round = loaded.trials.iter().filter(|t| t.key.round == 0).count();
    assert_eq!(first_round as u32, plan.estimate.trials_per_round);
    for p in ["cpu-int-1c", "cpu-int-2c"] {
        assert!(
            loaded
                .trials
                .iter()
                .any(|t| t.probe == p && t.condition == Condition::Baseline),
            "{p} has baseline trials"
        );
    }
    let r = analyze(&loaded);
    assert!(
        r.cells
            .iter()
            .all(|c| cores_of_probe(&c.probe) == cores_of_condition(&c.condition)),
        "no cell of a variant under another count"
    );
    let profile = &r.sections[0];
    let headers = profile.headers();
    let col = |name: &str| headers.iter().position(|h| h == name).unwrap();
    let rows = profile.text_rows();
    // A row per setting, load, count and metric of cpu-int (four), counts in order.
    assert_eq!(rows.len(), 2 * 2 * 2 * 4);
    let mut counts: Vec<&str> = rows.iter().map(|row| row[col("cores")].as_str()).collect();
    counts.dedup();
    assert_eq!(counts, ["1", "2"], "rows for both core counts, in order");
    // The benchmark is the declared probe; cpus = s x cores.
    assert_eq!(rows[0][col("benchmark")], "cpu-int ops_per_sec [ops/s]");
    let limits: Vec<(&str, &str, &str)> = rows
        .iter()
        .map(|row| {
            (
                row[col("s [%]")].as_str(),
                row[col("cores")].as_str(),
                row[col("cpus")].as_str(),
            )
        })
        .collect();
    assert!(limits.contains(&("50", "2", "1.00")), "{limits:?}");
    assert!(limits.contains(&("100", "2", "2.00")), "{limits:?}");
    assert!(limits.contains(&("50", "1", "0.50")), "{limits:?}");
    // The fake gives k threads limited to c CPUs the share c/k x (1 - 0.1 x (1 - c/k)): idle,
    // q is about 95% at 50% on one core and on two alike (a variant compared with the
    // baseline of its own count; against the other count's it would be off by a factor 2).
    for row in rows
        .iter()
        .filter(|row| row[col("s [%]")] == "50" && row[col("load")] == "none")
    {
        let q: f64 = row[col("q [%]")]
            .split_whitespace()
            .next()
            .and_then(|x| x.parse().ok())
            .unwrap_or_else(|| panic!("{row:?}"));
        assert!((90.0..100.0).contains(&q), "{row:?}");
    }
    assert!(profile.notes.iter().any(|n| n.starts_with("cores: ")));
    insta::assert_snapshot!("fidelity_cores_profile", text(profile));
}

#[test]
fn fidelity_core_counts_are_checked_where_they_are_written() {
    // Not increasing, more cores than the cpuset has, and a probe that cannot use them.
    let e = Scenario::parse(Source::new(
        "kind.toml",
        fidelity_scenario("[fidelity]\ncores = [2, 1]\n").replace(
            "[[stressor]]",
            "[[probe]]\nname = \"syscall\"\n\n[[stressor]]",
        ),
    ))
    .expect_err("unsorted, too many, no threads")
    .to_string();
    assert!(e.starts_with("kind.toml: 3 problems found"), "{e}");
    for problem in [
        "kind.toml:36:9: `fidelity.cores`: the core counts are not increasing",
        "fix: write cores = [1, 2]",
        "kind.toml:36:9: `fidelity.cores`: tenant `victim`'s cpuset has 1 CPU(s), fewer than 2",
        "fix: write cores = [1], or give tenant `victim` a cpuset of 2 CPU(s) (cpuset = \"0-1\")",
        "kind.toml:36:9: `fidelity.cores`: probe `syscall` (syscall) has no `threads` parameter",
        "fix: write cores = [1], or remove the [[probe]] syscall from this file",
    ] {
        assert!(e.contains(problem), "{problem}\n{e}");
    }
    // No cpuset at all: the counts are not the tenant's own.
    let e = Scenario::parse(Source::new(
        "kind.toml",
        fidelity_scenario("[fidelity]\ncores = [1]\n").replace(", cpuset = \"0\"", ""),
    ))
    .expect_err("no cpuset")
    .to_string();
    assert!(
        e.contains("has no cpuset") && e.contains("cpuset = \"0\""),
        "{e}"
    );
    // One core, a probe without threads: fine, it runs as written.
    let plan = plan_of(&fidelity_scenario("[fidelity]\ncores = [1]\n").replace(
        "[[stressor]]",
        "[[probe]]\nname = \"syscall\"\n\n[[stressor]]",
    ));
    let ids: Vec<&str> = plan.probes.iter().map(|p| p.id.as_str()).collect();
    assert_eq!(ids, ["cpu-int", "syscall"]);
}

#[test]
fn fidelity_settings_are_checked_where_they_are_written() {
    let e = Scenario::parse(Source::new(
        "kind.toml",
        fidelity_scenario(
            "[fidelity]\ntenant = \"aggressor\"\nlimits = [50, 0]\nload = \"membw\"\n",
        ),
    ))
    .expect_err("an aggressor, 0%, an unknown load")
    .to_string();
    insta::assert_snapshot!("fidelity_bad_table", e);
    // A victim with a CPU limit of its own has no unlimited baseline.
    let own = fidelity_scenario("").replace("cpuset = \"0\"", "cpuset = \"0\", cpus = 0.5");
    let e = Scenario::parse(Source::new("kind.toml", own))
        .expect_err("cpus on the swept tenant")
        .to_string();
    assert!(e.contains("CPU limit of its own"), "{e}");
}

#[test]
fn fidelity_refuses_the_host_platform() {
    let sc = Scenario::parse(Source::new("kind.toml", fidelity_scenario(""))).unwrap();
    let host = HostView::synthetic(2, 8 << 30, false);
    let e = Plan::resolve(&sc, &host, &PlanOptions::default())
        .expect_err("the host enforces no limit")
        .to_string();
    assert!(e.contains("enforces no limit"), "{e}");
}

/// A tune of the aggressor's CPU quota against a loss bound of 10%, on `cpuset`-shared
/// tenants of the fake platform.
fn tune_scenario(table: &str) -> String {
    format!(
        "kind = \"tune\"\n{COMMON}\nmetrics = [\"ops_per_sec\"]\n\n[[stressor]]\nname = \
         \"cpu\"\n\n[tune]\nmetric = \"ops_per_sec\"\n{table}\n"
    )
}

#[test]
fn tune_finds_the_quota_at_which_the_loss_bound_holds() {
    // The fake slows a CPU probe by 30% beside the cpu stressor at full intensity, and with
    // `quota_scales_harm` an aggressor under a quota of q CPUs does q of that: the probe
    // keeps 1 / (1 + 0.3 q) of its rate, a loss of at most 10% while q <= 1 / 2.7 = 0.370.
    let scenario = tune_scenario(
        "slo_loss = 10\nresolution = 0.1\n\n[[tune.knob]]\ntenant = \"aggressor\"\nkey = \
         \"cpus\"\nrange = [0.05, 1.0]\n",
    );
    let plan = plan_of(&scenario);
    // One condition per setting: the grid's 257 steps round to hundredths of a CPU.
    assert_eq!(plan.conditions.len(), 96, "0.05 to 1.00 CPUs");
    assert!(plan.conditions.iter().all(|c| c.candidate));
    // Noise well under the loss's change across a resolution step (2.3 points), so the
    // points beside the boundary are decided.
    let script = FakeScript {
        quota_scales_harm: true,
        noise: 0.003,
        ..FakeScript::default()
    };
    let (store, id) = run_scripted(&scenario, script);
    let r = analyze(&store.load_run(&id).unwrap());
    let ids: Vec<&str> = r.sections.iter().map(|s| s.id.as_str()).collect();
    assert_eq!(
        ids,
        [
            "tune",
            "tune-apply",
            "tune-points",
            "frontier-cpu@100",
            "knob-cpu@100-aggressor.cpus",
            "tune-boundaries"
        ]
    );
    let answer = &r.sections[0];
    let row = answer.text_rows().remove(0);
    let col = |name: &str| answer.columns.iter().position(|c| c.name == name).unwrap();
    assert_eq!(row[col("answer")], "boundary", "{}", text(answer));
    let interval = &row[col("boundary interval")];
    let (lo, hi) = interval
        .trim_matches(|c| c == '[' || c == ']')
        .split_once(", ")
        .map(|(a, b)| (a.parse::<f64>().unwrap(), b.parse::<f64>().unwrap()))
        .unwrap();
    assert!(lo <= 0.370 && 0.370 <= hi, "{}", text(answer));
    assert!(hi - lo <= 0.1 * 0.95 + 1e-9, "resolved: {}", text(answer));
    let recommended: f64 = row[col("recommended")].parse().unwrap();
    assert!(
        recommended <= 0.370 && recommended >= lo,
        "{}",
        text(answer)
    );
    // Only the settings measured show as conditions, and the search spent fewer figures
    // than a grid at the same resolution.
    assert!(r.conditions().len() < 12, "{:?}", r.conditions());
    // The aggressor's work follows its quota: the recommended one costs it about 1 - q.
    let cost: f64 = row[col("aggressor cost")]
        .parse()
        .unwrap_or_else(|_| panic!("{}\n{}", text(answer), text(&r.sections[2])));
    assert!(
        (cost - (1.0 - recommended) * 100.0).abs() < 5.0,
        "{}",
        text(answer)
    );
}

/// The answer table of a tune of the aggressor's CPU quota over `range` against a loss
/// bound of `loss`%, on the fake platform whose aggressor harms in proportion to its quota.
fn quota_tune_answer(loss: u32, range: &str) -> String {
    let scenario = tune_scenario(&format!(
        "slo_loss = {loss}\n\n[[tune.knob]]\ntenant = \"aggressor\"\nkey = \"cpus\"\nrange = \
         {range}\n"
    ));
    let script = FakeScript {
        quota_scales_harm: true,
        ..FakeScript::default()
    };
    let (store, id) = run_scripted(&scenario, script);
    text(&analyze(&store.load_run(&id).unwrap()).sections[0])
}

#[test]
fn tune_reports_an_slo_that_holds_without_any_limit_as_exactly_that() {
    // A loss bound of 50% holds even at the loose end (the probe loses 23% there).
    let answer = quota_tune_answer(50, "[0.05, 1.0]");
    assert!(answer.contains("holds even at the loose end"), "{answer}");
    assert!(!answer.contains("recommended 0"), "{answer}");
    // And a bound of 1% fails even at the tightest quota of 0.3 CPUs (the probe loses 8.3%
    // there).
    let answer = quota_tune_answer(1, "[0.3, 1.0]");
    assert!(answer.contains("fails even at the tight end"), "{answer}");
}

#[test]
fn tune_splits_the_cpus_and_keeps_the_aggressor_off_the_victims_cpu() {
    // The victim is pinned to CPU 0; a count of k CPUs gives the aggressor CPUs 4-k..3, so
    // only 4 (0-3) shares CPU 0, where the CPU hog costs the probe 23% of its rate.
    let scenario = tune_scenario(
        "slo_loss = 10\n\n[[tune.knob]]\ntenant = \"aggressor\"\nkey = \"cpuset\"\nrange = \
         [1, 4]\n",
    )
    .replace(
        "limits = { memory = \"512M\", pids = 128 }",
        "limits = { memory = \"512M\", pids = 128, cpuset = \"0\" }",
    );
    let plan = plan_on(&scenario, 4);
    let ids: Vec<&str> = plan.conditions.iter().map(|c| c.id.as_str()).collect();
    assert_eq!(
        ids,
        [
            "cpu@100+aggressor.cpuset=3",
            "cpu@100+aggressor.cpuset=2-3",
            "cpu@100+aggressor.cpuset=1-3",
            "cpu@100+aggressor.cpuset=0-3"
        ],
        "one condition per count of CPUs"
    );
    let script = FakeScript {
        cpuset_gates_harm: true,
        ..FakeScript::default()
    };
    let (store, id) = run_on(&scenario, 4, script);
    let loaded = store.load_run(&id).unwrap();
    let r = analyze(&loaded);
    let answer = &r.sections[0];
    let row = answer.text_rows().remove(0);
    let col = |name: &str| answer.columns.iter().position(|c| c.name == name).unwrap();
    assert_eq!(row[col("answer")], "boundary", "{}", text(answer));
    assert_eq!(row[col("recommended")], "1-3", "{}", text(answer));
    assert_eq!(
        row[col("boundary interval")],
        "[1-3, 0-3]",
        "{}",
        text(answer)
    );
    // Every point visited is a whole count, each once.
    let points = r.sections.iter().find(|s| s.id == "tune-points").unwrap();
    let setting = points
        .columns
        .iter()
        .position(|c| c.name == "setting")
        .unwrap_or_else(|| panic!("{}", text(points)));
    let seen: Vec<String> = points
        .text_rows()
        .iter()
        .map(|r| r[setting].clone())
        .collect();
    let mut sorted = seen.clone();
    sorted.sort();
    sorted.dedup();
    assert_eq!(sorted.len(), seen.len(), "{}", text(points));
    assert!(
        seen.iter()
            .all(|s| ["3", "2-3", "1-3", "0-3"].contains(&s.as_str())),
        "{}",
        text(points)
    );
    // How to apply it: systemd, docker and the cgroup file; Kubernetes cannot choose CPUs.
    let apply = text(r.sections.iter().find(|s| s.id == "tune-apply").unwrap());
    for line in [
        "AllowedCPUs=1-3",
        "--cpuset-cpus 1-3",
        "echo 1-3 > /sys/fs/cgroup/GROUP/cpuset.cpus",
        "static CPU manager policy",
    ] {
        assert!(apply.contains(line), "{line}: {apply}");
    }
}

#[test]
fn a_cpuset_knob_counts_whole_cpus_of_an_aggressor_on_a_linear_scale() {
    let knob = |tenant: &str, range: &str, scale: &str| {
        tune_scenario(&format!(
            "slo_loss = 5\n[[tune.knob]]\ntenant = \"{tenant}\"\nkey = \"cpuset\"\nrange = \
             {range}\n{scale}"
        ))
    };
    for (scenario, problem) in [
        (
            knob("aggressor", "[\"0\", \"0-1\"]", ""),
            "not a count of CPUs",
        ),
        (knob("aggressor", "[0, 2]", ""), "not a count of CPUs"),
        (knob("aggressor", "[1.5, 2]", ""), "not a count of CPUs"),
        (knob("aggressor", "[2, 2]", ""), "two different counts"),
        (
            knob("aggressor", "[1, 2]", "scale = \"log\"\n"),
            "does not fit a count",
        ),
        (knob("victim", "[1, 2]", ""), "searched on an aggressor"),
    ] {
        let err = Scenario::parse(Source::new("kind.toml", &scenario))
            .err()
            .unwrap_or_else(|| panic!("accepted: {scenario}"))
            .to_string();
        assert!(
            err.contains("tune.knob[0]") && err.contains(problem),
            "{problem}: {err}"
        );
    }
    // The command line's ends are strings: whole numbers there count CPUs too.
    plan_of(&knob("aggressor", "[\"1\", \"2\"]", ""));
    let plan = plan_of(&knob("aggressor", "[2, 1]", "scale = \"linear\"\n"));
    let set = isobench_experiment::kinds::tune::TuneSettings::of(&plan.settings).unwrap();
    let k = &set.knobs[0];
    assert_eq!((k.tight, k.loose, k.log), (1.0, 2.0, false));
    assert_eq!(
        (
            k.value_text(0),
            k.value_text(isobench_experiment::kinds::tune::GRID)
        ),
        ("1".to_string(), "0-1".to_string())
    );
    // The search's resolution is one CPU at least, on whole counts.
    let c = set.config_for(0);
    assert_eq!((c.steps, c.resolution), (Some(1), 1.0));
    // A split of more CPUs than the host has is refused at plan time.
    let sc = Scenario::parse(Source::new("kind.toml", knob("aggressor", "[1, 4]", ""))).unwrap();
    let e = Plan::resolve(
        &sc,
        &HostView::synthetic(2, 8 << 30, true),
        &PlanOptions::default(),
    )
    .expect_err("CPUs 2-3 are not on the host")
    .to_string();
    assert!(
        e.contains("aggressor.cpuset splits CPUs 0..N-1") && e.contains("not online"),
        "{e}"
    );
}

#[test]
fn tune_settings_are_checked_where_they_are_written() {
    for (table, field) in [
        ("slo_max = 10\nslo_loss = 5\n[[tune.knob]]\ntenant = \"aggressor\"\nkey = \"cpus\"\nrange = [0.1, 1]\n", "tune.slo_max"),
        ("slo_loss = 5\n[[tune.knob]]\ntenant = \"aggressor\"\nkey = \"cpuset\"\nrange = [0.1, 1]\n", "tune.knob[0]"),
        ("slo_loss = 5\n[[tune.knob]]\ntenant = \"nobody\"\nkey = \"cpus\"\nrange = [0.1, 1]\n", "tune.knob[0]"),
        ("slo_loss = 5\n[[tune.knob]]\ntenant = \"aggressor\"\nkey = \"cpus\"\nrange = [1, 1]\n", "tune.knob[0]"),
        ("slo_loss = 5\n", "tune.knob"),
    ] {
        let scenario = tune_scenario(table);
        let err = Scenario::parse(Source::new("kind.toml", &scenario))
            .err()
            .unwrap_or_else(|| panic!("accepted: {table}"))
            .to_string();
        assert!(err.contains(field), "{table}: {err}");
    }
}
