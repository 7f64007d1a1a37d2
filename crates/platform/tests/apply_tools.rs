//! The lines of `isobench_platform::apply` read by each tool's own parser, where the tool is
//! installed: docker's flag parser (`docker update|run FLAGS... --help` parses every flag
//! and value, then prints help; no daemon needed), systemd's unit parser
//! (`systemd-analyze verify` of a service with the printed properties) and kubectl's pod
//! decoder (`kubectl set image --local`, no cluster needed). Each check is shown to reject a
//! bad value too, so a tool that accepted anything would fail it. A missing tool skips its
//! test with the reason (scripts/test installs docker and builds kubectl).

mod common;

use std::io::Write;
use std::path::{Path, PathBuf};
use std::process::{Command, Output, Stdio};

use isobench_platform::apply::{recipes, Recipe, Target, CONTAINER, IMAGE, UNIT};
use isobench_platform::{device_for_path, Limits};

/// Every key the recipes map, at values a tuned setting could have.
const EVERY_KEY: &str = "cpus=0.6,cpu_burst=10ms,weight=50,cpuset=0,mems=0,memory=1G,\
                         memory_min=64M,memory_low=128M,memory_high=512M,swap=64M,pids=64,\
                         io_read_bps=10M,io_write_bps=40M,io_read_iops=100,\
                         io_write_iops=200,io_weight=50,io_latency=2500us";

/// More values: fractions of a CPU and of a percent, shares, a CPU list, odd byte counts.
const OTHER_VALUES: &str = "cpus=1.234,shares=100,cpuset=0-1,memory=123456789,pids=1,\
                            io_write_bps=1,io_weight=1000";

fn recipe(limits: &str, target: Target) -> Recipe {
    let l: Limits = limits.parse().unwrap();
    // The disk of this machine's root, as a run would find its workdir's.
    let dev = device_for_path(Path::new("/")).ok();
    recipes(&l, dev.as_ref())
        .into_iter()
        .find(|r| r.target == target)
        .unwrap()
}

fn words(line: &str) -> Vec<String> {
    shell_words::split(line).unwrap_or_else(|e| panic!("`{line}` is no shell line: {e}"))
}

fn run(cmd: &mut Command) -> Output {
    cmd.stdin(Stdio::null())
        .output()
        .unwrap_or_else(|e| panic!("{cmd:?}: {e}"))
}

fn tool(name: &str, test: &str, group: &str) -> Option<PathBuf> {
    let found = Command::new(name)
        .arg("--help")
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .status()
        .is_ok();
    if !found {
        common::skip(group, test, &format!("`{name}` is not installed"));
        return None;
    }
    Some(PathBuf::from(name))
}

/// Docker's verdict on a `docker update|run FLAGS... PLACEHOLDER` line: its flags with
/// `--help` after them, in place of the container or image.
fn docker_parses(docker: &Path, line: &str) -> Output {
    let mut w = words(line);
    assert_eq!(w[0], "docker", "{line}");
    let last = w.pop().unwrap();
    assert!(last == CONTAINER || last == IMAGE, "{line}");
    run(Command::new(docker).args(&w[1..]).arg("--help"))
}

#[test]
fn docker_parses_every_flag_and_value_printed() {
    let Some(docker) = tool(
        "docker",
        "docker_parses_every_flag_and_value_printed",
        "docker",
    ) else {
        return;
    };
    let mut seen = Vec::new();
    for limits in [EVERY_KEY, OTHER_VALUES] {
        let r = recipe(limits, Target::Docker);
        assert_eq!(r.lines.len(), 2, "{r:?}");
        for line in &r.lines {
            let out = docker_parses(&docker, line);
            assert!(
                out.status.success(),
                "docker refused `{line}`: {}",
                String::from_utf8_lossy(&out.stderr)
            );
            seen.extend(words(line).into_iter().filter(|w| w.starts_with("--")));
        }
    }
    for flag in [
        "--cpus",
        "--cpu-shares",
        "--cpuset-cpus",
        "--cpuset-mems",
        "--memory",
        "--memory-swap",
        "--memory-reservation",
        "--blkio-weight",
        "--pids-limit",
        "--device-read-bps",
        "--device-write-bps",
        "--device-read-iops",
        "--device-write-iops",
    ] {
        assert!(seen.iter().any(|s| s == flag), "{flag} was not checked");
    }
    // The check refuses what docker refuses: a value and a flag it has not.
    for bad in [
        "docker update --cpus 0,6 CONTAINER",
        "docker update --device-write-bps /dev/vda:1 CONTAINER",
        "docker run --device-write-bps /dev/vda:40x IMAGE",
    ] {
        assert!(!docker_parses(&docker, bad).status.success(), "{bad}");
    }
}

/// What `systemd-analyze verify` says about a service holding the properties of a
/// `systemctl set-property UNIT ...` line: its complaints about the unit file.
fn systemd_complaints(line: &str) -> Vec<String> {
    let w = words(line);
    assert_eq!(w[..3], ["systemctl", "set-property", UNIT], "{line}");
    let dir = tempfile::tempdir().unwrap();
    let unit = dir.path().join("isobench-apply-check.service");
    let mut f = std::fs::File::create(&unit).unwrap();
    writeln!(f, "[Service]\nExecStart=/bin/true").unwrap();
    for p in &w[3..] {
        writeln!(f, "{p}").unwrap();
    }
    drop(f);
    let out = run(Command::new("systemd-analyze").arg("verify").arg(&unit));
    let text =
        String::from_utf8_lossy(&out.stdout).into_owned() + &String::from_utf8_lossy(&out.stderr);
    text.lines()
        .filter(|l| l.contains("isobench-apply-check.service"))
        .map(String::from)
        .collect()
}

#[test]
fn systemd_parses_every_property_printed() {
    let test = "systemd_parses_every_property_printed";
    if tool("systemd-analyze", test, "systemd").is_none() {
        return;
    }
    for limits in [EVERY_KEY, OTHER_VALUES] {
        let r = recipe(limits, Target::Systemd);
        assert_eq!(r.lines.len(), 1, "{r:?}");
        let complaints = systemd_complaints(&r.lines[0]);
        assert!(
            complaints.is_empty(),
            "systemd refused part of `{}`:\n{}",
            r.lines[0],
            complaints.join("\n")
        );
    }
    // The check sees what systemd refuses: a name and a value.
    let complaints =
        systemd_complaints("systemctl set-property UNIT CPUQuotaa=60% MemoryHigh=12X CPUQuota=60");
    assert_eq!(complaints.len(), 3, "{complaints:?}");
}

/// `resources` with each CPU quantity in millicores.
fn canonical(resources: &serde_json::Value) -> serde_json::Value {
    let mut r = resources.clone();
    for side in ["limits", "requests"] {
        if let Some(cpu) = r[side].get("cpu").and_then(|c| c.as_str()) {
            let millis = match cpu.strip_suffix('m') {
                Some(m) => m.parse::<u64>().unwrap(),
                None => cpu.parse::<u64>().unwrap() * 1000,
            };
            r[side]["cpu"] = millis.into();
        }
    }
    r
}

#[test]
fn kubectl_decodes_the_printed_resources() {
    let test = "kubectl_decodes_the_printed_resources";
    let Ok(kubectl) = isobench_platform::k8s::kubectl::find_kubectl() else {
        common::skip(
            "k8s",
            test,
            "no kubectl (scripts/k8s-up --build-only builds one)",
        );
        return;
    };
    let decode = |resources: &serde_json::Value| -> Result<serde_json::Value, String> {
        let pod = serde_json::json!({
            "apiVersion": "v1",
            "kind": "Pod",
            "metadata": {"name": "check"},
            "spec": {"containers": [{"name": "c", "image": "busybox", "resources": resources}]},
        });
        let mut child = Command::new(&kubectl)
            .args([
                "set", "image", "--local", "-f", "-", "c=check", "-o", "json",
            ])
            .args(["--kubeconfig", "/dev/null"])
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap();
        child
            .stdin
            .take()
            .unwrap()
            .write_all(pod.to_string().as_bytes())
            .unwrap();
        let out = child.wait_with_output().unwrap();
        if !out.status.success() {
            return Err(String::from_utf8_lossy(&out.stderr).into_owned());
        }
        let back: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
        Ok(back["spec"]["containers"][0]["resources"].clone())
    };
    for limits in [
        "cpus=0.6,memory=1G",
        "weight=50",
        "cpus=2,shares=100,memory=123456789",
        "cpus=0.01",
    ] {
        let r = recipe(limits, Target::Kubernetes);
        assert_eq!(r.lines.len(), 1, "{r:?}");
        let json = r.lines[0]
            .strip_prefix("resources: ")
            .unwrap_or_else(|| panic!("{}", r.lines[0]));
        let resources: serde_json::Value = serde_json::from_str(json).unwrap();
        let back =
            decode(&resources).unwrap_or_else(|e| panic!("kubectl refused `{}`: {e}", r.lines[0]));
        // Every field came back, the same amount (kubectl writes 2000m as 2): none was
        // unknown to the pod's schema.
        assert_eq!(canonical(&back), canonical(&resources), "{limits}: {back}");
    }
    let bad = serde_json::json!({"limits": {"cpu": "0.6 cpus"}});
    assert!(decode(&bad).is_err(), "kubectl took {bad}");
}
