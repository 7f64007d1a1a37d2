//! `placement = "split"`: which CPUs each tenant gets, and what the plan says about it.

use isobench_experiment::cause::DiskIrq;
use isobench_experiment::{HostView, Plan, PlanOptions, Scenario, Source};

fn text(placement: &str, tenants: &str) -> String {
    format!(
        "name = \"p\"\nkind = \"matrix\"\nplatform = \"cgroup\"\n{placement}\n{tenants}\n\
         [[probe]]\nname = \"syscall\"\n\n[[stressor]]\nname = \"cpu\"\n"
    )
}

fn scenario(placement: &str, tenants: &str) -> Scenario {
    Scenario::parse(Source::new("p.toml", text(placement, tenants))).expect("parses")
}

/// `[[tenant]]` tables for (name, role, limits); empty limits are left out.
fn tenants(list: &[(&str, &str, &str)]) -> String {
    list.iter()
        .map(|(name, role, limits)| {
            let limits = if limits.is_empty() {
                String::new()
            } else {
                format!("limits = {{ {limits} }}\n")
            };
            format!("\n[[tenant]]\nname = \"{name}\"\nrole = \"{role}\"\n{limits}")
        })
        .collect()
}

/// The victim `web` and the aggressor `noisy`, with these limits.
fn web_and_noisy(web: &str, noisy: &str) -> String {
    tenants(&[("web", "victim", web), ("noisy", "aggressor", noisy)])
}

fn host(cpus: usize, irq: Option<Vec<usize>>) -> HostView {
    let mut h = HostView::synthetic(cpus, 8 << 30, true);
    h.disk_irq = irq.map(|cpus| DiskIrq {
        device: "vda".into(),
        handlers: vec!["virtio1-req.0".into()],
        cpus,
    });
    h
}

/// Each tenant's name and cpuset (as written in its limits), and the plan's notes.
fn placed(sc: &Scenario, host: &HostView) -> (Vec<(String, Option<String>)>, Vec<String>) {
    let plan = Plan::resolve(sc, host, &PlanOptions::default()).expect("plan");
    let tenants = plan
        .tenants
        .iter()
        .map(|t| {
            (
                t.name.clone(),
                t.limits.cpuset.as_ref().map(|c| c.to_string()),
            )
        })
        .collect();
    (tenants, plan.notes)
}

fn cpusets(v: &[(String, Option<String>)]) -> Vec<(&str, Option<&str>)> {
    v.iter().map(|(n, c)| (n.as_str(), c.as_deref())).collect()
}

#[test]
fn shared_is_the_default_and_sets_no_cpuset() {
    let (t, notes) = placed(
        &scenario("", &web_and_noisy("", "")),
        &host(2, Some(vec![1])),
    );
    assert_eq!(cpusets(&t), [("web", None), ("noisy", None)]);
    assert!(!notes.iter().any(|n| n.contains("placement")), "{notes:?}");
}

#[test]
fn the_victim_takes_the_cpu_of_the_disk_interrupts() {
    let sc = scenario("placement = \"split\"", &web_and_noisy("", ""));
    let (t, notes) = placed(&sc, &host(2, Some(vec![1])));
    assert_eq!(cpusets(&t), [("web", Some("1")), ("noisy", Some("0"))]);
    let note = notes
        .iter()
        .find(|n| n.contains("placement"))
        .expect("note");
    assert!(note.contains("web on cpu 1"), "{note}");
    assert!(note.contains("noisy on cpu 0"), "{note}");
    assert!(
        note.contains("vda's interrupts are delivered to cpu 1"),
        "{note}"
    );
}

#[test]
fn without_irq_facts_the_halves_are_in_cpu_order() {
    let sc = scenario("placement = \"split\"", &web_and_noisy("", ""));
    let (t, notes) = placed(&sc, &host(4, None));
    assert_eq!(cpusets(&t), [("web", Some("0-1")), ("noisy", Some("2-3"))]);
    assert!(!notes.iter().any(|n| n.contains("interrupts")), "{notes:?}");
    // Interrupts on every CPU say nothing about where to go either.
    let (t, _) = placed(&sc, &host(4, Some(vec![0, 1, 2, 3])));
    assert_eq!(cpusets(&t), [("web", Some("0-1")), ("noisy", Some("2-3"))]);
}

#[test]
fn tenants_of_a_group_share_its_half_evenly() {
    let tenants = tenants(&[
        ("a", "victim", ""),
        ("b", "victim", ""),
        ("x", "aggressor", ""),
        ("y", "aggressor", ""),
        ("z", "aggressor", ""),
    ]);
    let sc = scenario("placement = \"split\"", &tenants);
    let (t, notes) = placed(&sc, &host(5, Some(vec![4])));
    // Victims: cpu 4 (the IRQ's) and the next two in order, 0 and 1; aggressors: 2 and 3,
    // one of them shared by the third aggressor.
    assert_eq!(
        cpusets(&t),
        [
            ("a", Some("0-1")),
            ("b", Some("4")),
            ("x", Some("2")),
            ("y", Some("3")),
            ("z", Some("2")),
        ]
    );
    assert!(
        notes
            .iter()
            .any(|n| n.contains("3 aggressors sharing 2 CPU(s)")),
        "{notes:?}"
    );
}

#[test]
fn a_tenant_with_its_own_cpuset_keeps_it() {
    let tenants = web_and_noisy("cpuset = \"0\"", "");
    let sc = scenario("placement = \"split\"", &tenants);
    // The aggressor gets what the victim left, even the disk's interrupt CPU.
    let (t, _) = placed(&sc, &host(2, Some(vec![1])));
    assert_eq!(cpusets(&t), [("web", Some("0")), ("noisy", Some("1"))]);
    let (t, _) = placed(&sc, &host(4, None));
    assert_eq!(cpusets(&t), [("web", Some("0")), ("noisy", Some("1-3"))]);
}

#[test]
fn one_cpu_cannot_be_split_and_the_plan_says_so() {
    let sc = scenario("placement = \"split\"", &web_and_noisy("", ""));
    let (t, notes) = placed(&sc, &host(1, None));
    assert_eq!(cpusets(&t), [("web", None), ("noisy", None)]);
    assert!(
        notes.iter().any(|n| n.contains("only cpu 0 is free")),
        "{notes:?}"
    );
}

#[test]
fn an_unknown_placement_is_refused_with_the_choices() {
    let text = text("placement = \"spread\"", &web_and_noisy("", ""));
    let e = Scenario::parse(Source::new("p.toml", &text))
        .expect_err("refused")
        .to_string();
    assert!(e.contains("placement"), "{e}");
    assert!(e.contains("split"), "{e}");
}

#[test]
fn nothing_to_place_says_so() {
    let tenants = web_and_noisy("cpuset = \"0\"", "cpuset = \"1\"");
    let sc = scenario("placement = \"split\"", &tenants);
    let (t, notes) = placed(&sc, &host(2, Some(vec![1])));
    assert_eq!(cpusets(&t), [("web", Some("0")), ("noisy", Some("1"))]);
    assert!(
        notes
            .iter()
            .any(|n| n.contains("every tenant has a cpuset of its own")),
        "{notes:?}"
    );
}
