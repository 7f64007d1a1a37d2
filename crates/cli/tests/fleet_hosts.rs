//! `isobench run --hosts`: a fleet run against host agents in fake mode on loopback.

mod common;

use common::{agent, code, fleet_token, text};

#[test]
fn too_many_open_files_for_every_host_at_once_runs_them_a_few_at_a_time() {
    let dir = tempfile::tempdir().unwrap();
    fleet_token(dir.path());
    let mut agents = Vec::new();
    let mut hosts = String::from("token_file = \"token\"\n");
    for n in 0..3 {
        let (child, addr) = agent(dir.path(), n);
        agents.push(child);
        hosts.push_str(&format!(
            "\n[[host]]\nname = \"h{n}\"\naddress = \"{addr}\"\ntype = \"t\"\n"
        ));
    }
    std::fs::write(dir.path().join("hosts.toml"), hosts).unwrap();
    // 70 descriptors: room for one host's session (4) beside the 64 kept spare.
    let bin = assert_cmd::cargo::cargo_bin("isobench");
    let out = std::process::Command::new("sh")
        .arg("-c")
        .arg("ulimit -n 70 && exec \"$0\" run --hosts hosts.toml --db coord.db -q")
        .arg(&bin)
        .current_dir(dir.path())
        .env("ISOBENCH_DEBUG_FAKE", "1")
        .env("NO_COLOR", "1")
        .env_remove("ISOBENCH_DB")
        .output()
        .unwrap();
    for mut a in agents {
        let _ = a.kill();
        let _ = a.wait();
    }
    let (stdout, stderr) = (text(&out.stdout), text(&out.stderr));
    assert_eq!(code(&out), 0, "stdout: {stdout}\nstderr: {stderr}");
    assert!(
        stderr.contains("1 hosts at a time (the open-file limit is 70"),
        "{stderr}"
    );
    assert_eq!(stderr.matches(", imported").count(), 3, "{stderr}");
    assert!(stdout.contains("t (3 hosts)"), "{stdout}");
}
