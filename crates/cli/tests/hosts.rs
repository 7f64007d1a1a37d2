//! `isobench run --hosts` against host agents (`isobench agent --listen`) in network
//! namespaces of their own, one per "host", reached over veth links: the fleet table, the
//! noisy host, a host that is down, a wrong token, and the hosts file's errors. The hosts run
//! on the fake platform (deterministic figures); host `b`'s stressors hurt 1.6 times as much.

mod common;

use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use common::*;

/// A "host": a network namespace joined to this one by a veth pair, with a host agent
/// listening inside. Everything is removed on drop.
struct NsHost {
    ns: String,
    outer: String,
    addr: String,
    agent: Option<Child>,
}

fn ip(args: &[&str]) {
    let out = Command::new("ip").args(args).output().expect("ip");
    assert!(
        out.status.success(),
        "ip {}: {}",
        args.join(" "),
        String::from_utf8_lossy(&out.stderr)
    );
}

impl NsHost {
    /// Host `i` (1..): namespace `ibh<pid>-<i>`, 10.218.<i>.2 inside, 10.218.<i>.1 here.
    fn start(i: u8, dir: &Path, token: &Path, env: &[(&str, &str)]) -> NsHost {
        let tag = format!("{}-{i}", std::process::id() % 100_000);
        let ns = format!("ibh{tag}");
        let outer = format!("ibo{tag}");
        let inner = format!("ibi{tag}");
        ip(&["netns", "add", &ns]);
        let mut h = NsHost {
            ns: ns.clone(),
            outer: outer.clone(),
            addr: format!("10.218.{i}.2:7878"),
            agent: None,
        };
        ip(&[
            "link", "add", &outer, "type", "veth", "peer", "name", &inner,
        ]);
        ip(&["link", "set", &inner, "netns", &ns]);
        ip(&["addr", "add", &format!("10.218.{i}.1/30"), "dev", &outer]);
        ip(&["link", "set", &outer, "up"]);
        ip(&[
            "-n",
            &ns,
            "addr",
            "add",
            &format!("10.218.{i}.2/30"),
            "dev",
            &inner,
        ]);
        ip(&["-n", &ns, "link", "set", &inner, "up"]);
        ip(&["-n", &ns, "link", "set", "lo", "up"]);
        let exe = assert_cmd::cargo::cargo_bin("isobench");
        let mut c = Command::new("ip");
        c.args(["netns", "exec", &ns])
            .arg(exe)
            .args(["agent", "--listen", &h.addr, "--token-file"])
            .arg(token)
            .arg("--db")
            .arg(dir.join(format!("host{i}.db")))
            .env("ISOBENCH_DEBUG_FAKE", "1")
            .env("ISOBENCH_WAIT", "1")
            .env("NO_COLOR", "1")
            .env_remove("ISOBENCH_DB")
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::null());
        for (k, v) in env {
            c.env(k, v);
        }
        h.agent = Some(c.spawn().expect("host agent"));
        // Listening once a connection is accepted.
        let t0 = Instant::now();
        while std::net::TcpStream::connect_timeout(
            &h.addr.parse().unwrap(),
            Duration::from_millis(200),
        )
        .is_err()
        {
            assert!(
                t0.elapsed() < Duration::from_secs(20),
                "the agent in {ns} never listened"
            );
            std::thread::sleep(Duration::from_millis(50));
        }
        h
    }
}

impl Drop for NsHost {
    fn drop(&mut self) {
        if let Some(mut a) = self.agent.take() {
            // SAFETY: signalling our own child (`ip netns exec` execs the agent).
            unsafe { libc::kill(a.id() as libc::pid_t, libc::SIGTERM) };
            let t0 = Instant::now();
            while a.try_wait().ok().flatten().is_none() && t0.elapsed() < Duration::from_secs(10) {
                std::thread::sleep(Duration::from_millis(20));
            }
            let _ = a.kill();
            let _ = a.wait();
        }
        let _ = Command::new("ip")
            .args(["link", "del", &self.outer])
            .status();
        let _ = Command::new("ip").args(["netns", "del", &self.ns]).status();
    }
}

/// `isobench run --hosts HOSTS --db DB`: its output, and its stdout and stderr as text.
fn run_hosts(hosts: &str, db: &Path) -> (std::process::Output, String, String) {
    let out = isobench()
        .args(["run", "--hosts", hosts, "--db"])
        .arg(db)
        .output()
        .unwrap();
    let (stdout, stderr) = (text(&out.stdout), text(&out.stderr));
    (out, stdout, stderr)
}

/// A directory for a test, with the hosts' token file `token` in it.
fn dir_with_token() -> (tempfile::TempDir, PathBuf) {
    let dir = tempfile::tempdir().unwrap();
    let token = PathBuf::from(write_private(
        dir.path(),
        "token",
        "0123456789abcdef-fleet\n",
    ));
    (dir, token)
}

fn needs_root() -> bool {
    // SAFETY: geteuid has no preconditions.
    if unsafe { libc::geteuid() } != 0 {
        common::skip("root", "network namespaces need root");
        return false;
    }
    true
}

#[test]
fn two_namespace_hosts_give_the_fleet_table_with_the_noisy_one_flagged() {
    if !needs_root() {
        return;
    }
    let (dir, token) = dir_with_token();
    let a = NsHost::start(1, dir.path(), &token, &[]);
    let b = NsHost::start(
        2,
        dir.path(),
        &token,
        &[("ISOBENCH_DEBUG_FAKE_SCALE", "1.6")],
    );
    let hosts = write(
        dir.path(),
        "hosts.toml",
        &format!(
            "token_file = \"token\"\n\
             [[host]]\nname = \"a\"\naddress = \"{}\"\ntype = \"small\"\n\
             [[host]]\nname = \"b\"\naddress = \"{}\"\ntype = \"small\"\n\
             labels = {{ rack = \"r2\" }}\n",
            a.addr, b.addr
        ),
    );
    let db = dir.path().join("fleet.db");
    let (out, stdout, stderr) = run_hosts(&hosts, &db);
    assert_eq!(code(&out), 0, "{stdout}\n{stderr}");
    assert!(stdout.contains("small (2 hosts)"), "{stdout}");
    assert!(stdout.contains("noisy host: b (small, run "), "{stdout}");
    assert!(!stdout.contains("noisy host: a "), "{stdout}");
    assert!(stderr.contains("[a] run "), "progress of a: {stderr}");
    assert!(stderr.contains("[b] complete"), "progress of b: {stderr}");
    assert!(stdout.contains("rack=r2"), "{stdout}");

    // Both runs are here, linked: either shows the fleet table.
    let ids = run_ids(&db);
    assert_eq!(ids.len(), 2, "{ids:?}");
    for id in &ids {
        let shown = isobench()
            .args(["show", id, "--db"])
            .arg(&db)
            .output()
            .unwrap();
        let s = text(&shown.stdout);
        assert!(s.contains("noisy host: b"), "show {id}: {s}");
    }
    // `compare` of one of them compares the fleet's hosts.
    let cmp = isobench()
        .args(["compare", &ids[0], "--db"])
        .arg(&db)
        .output()
        .unwrap();
    let c = text(&cmp.stdout);
    assert!(
        c.contains("Comparison of 2 runs"),
        "{c}{}",
        text(&cmp.stderr)
    );
    // And each host kept its own run, in its own database.
    for i in [1, 2] {
        assert_eq!(run_ids(&dir.path().join(format!("host{i}.db"))).len(), 1);
    }
}

#[test]
fn a_host_that_is_down_or_refuses_the_token_is_listed_and_the_others_still_run() {
    if !needs_root() {
        return;
    }
    let (dir, token) = dir_with_token();
    write_private(dir.path(), "wrong", "not-the-token-at-all\n");
    let a = NsHost::start(3, dir.path(), &token, &[]);
    let b = NsHost::start(4, dir.path(), &token, &[]);
    let hosts = write(
        dir.path(),
        "hosts.toml",
        &format!(
            "token_file = \"token\"\n\
             [[host]]\nname = \"up\"\naddress = \"{}\"\n\
             [[host]]\nname = \"locked\"\naddress = \"{}\"\ntoken_file = \"wrong\"\n\
             [[host]]\nname = \"down\"\naddress = \"10.218.3.2:7999\"\n",
            a.addr, b.addr
        ),
    );
    let db = dir.path().join("fleet.db");
    let (out, stdout, stderr) = run_hosts(&hosts, &db);
    assert_eq!(code(&out), 4, "partial: {stdout}\n{stderr}");
    assert!(
        stdout.contains("not run: down: cannot connect to 10.218.3.2:7999"),
        "{stdout}"
    );
    assert!(stdout.contains("not run: locked: "), "{stdout}");
    assert!(stderr.to_lowercase().contains("token"), "{stderr}");
    assert_eq!(run_ids(&db).len(), 1);
    assert!(stdout.contains("up  run "), "{stdout}");
}

#[test]
fn the_hosts_file_is_checked_field_by_field() {
    let dir = tempfile::tempdir().unwrap();
    write_private(dir.path(), "token", "0123456789abcdef-fleet\n");
    let loose = dir.path().join("loose");
    std::fs::write(&loose, "0123456789abcdef\n").unwrap();
    {
        use std::os::unix::fs::PermissionsExt;
        std::fs::set_permissions(&loose, std::fs::Permissions::from_mode(0o644)).unwrap();
    }
    let cases: &[(&str, &str)] = &[
        ("", "no host; add one [[host]] table"),
        (
            "[[host]]\nname = \"a\"\naddress = \"10.0.0.1:1\"\n",
            "host[0] has no token_file",
        ),
        (
            "token_file = \"token\"\n[[host]]\nname = \"a\"\naddress = \"nowhere\"\n",
            "host[0].address `nowhere` is not ADDR:PORT",
        ),
        (
            "token_file = \"token\"\n[[host]]\nname = \"a\"\naddress = \"10.0.0.1:1\"\n\
             [[host]]\nname = \"a\"\naddress = \"10.0.0.2:1\"\n",
            "host[1].name `a` is given twice",
        ),
        (
            "token_file = \"token\"\n[[host]]\nname = \"a\"\naddres = \"10.0.0.1:1\"\n",
            "unknown field `addres`",
        ),
        (
            "[[host]]\nname = \"a\"\naddress = \"10.0.0.1:1\"\ntoken_file = \"loose\"\n",
            "chmod 600",
        ),
    ];
    for (body, wanted) in cases {
        let hosts = write(dir.path(), "hosts.toml", body);
        let out = isobench()
            .args(["run", "--hosts"])
            .arg(&hosts)
            .arg("--db")
            .arg(dir.path().join("x.db"))
            .output()
            .unwrap();
        let err = text(&out.stderr);
        assert_eq!(code(&out), 2, "{body}: {err}");
        assert!(err.contains("hosts.toml"), "{body}: names the file: {err}");
        assert!(err.contains(wanted), "{body}: wanted {wanted:?} in {err}");
    }
    assert!(!dir.path().join("x.db").exists(), "nothing was created");
}
