//! `forkbomb`: processes that loop creating child processes (the fork bomb of Matthews et
//! al., table 2), held to a population limit.
//!
//! Process tree:
//!
//! ```text
//! stressor thread --fork--> leader (own session, child subreaper, never forks the bomb twice)
//!                             \--fork--> root (own process group R) --fork--> ... all in R
//! ```
//!
//! Two shapes (`child`). With `child = "exit"` (the default) the root starts forkers until
//! there are half the population limit (itself included); every forker loops: fork a child
//! that exits at once, sleep in `waitpid` until it has ended, fork again. Under a pids limit
//! lower than ours the root fills the tenant with forkers; every fork is then refused
//! (EAGAIN), and forkers other than the root exit until a quarter of the room the tenant
//! gives the bomb (its population at the first refusal) is free for children. The others
//! nap 1 ms and try again, so the tenant is held at its limit and forking goes on.
//! With `child = "fork"` (the classic tree) every bomb process loops: reap its exited
//! children, and fork if the population (bomb processes not yet reaped, zombies included, as
//! a pids cgroup counts them) is under the limit. A childless process (a leaf) that finds no
//! room exits, handing its slot back; a process with children that finds no room tries again
//! at once, yielding the CPU in between (`at_limit = "spin"`, the default), or sleeps until
//! one of its children ends (`at_limit = "block"`). A refused `fork` makes a leaf exit and
//! any other process nap 1 ms.
//!
//! Why forkers are the default: what a neighbour feels of a fork bomb is mostly
//! waiting for a CPU after it wakes, not the kernel's fork work. Beside a victim doing 8 KiB
//! O_DIRECT reads at queue depth 1 (bench/tail.py, 2 CPUs, population 4 against
//! `stress-ng --fork 2`, medians of 6 paired repetitions), the victim's run-queue delay per
//! read (its schedstat) was 32 us alone, 61 us beside the spinning tree, 47 us beside the
//! blocking tree, 73 us beside one exit-and-wait forker, 213 us beside stress-ng and 307 us
//! beside two forkers. The full tree has about one forker: its new children find no room and
//! exit at once, so nearly every fork is made by one parent. Every fork wakes a new task and
//! every exit wakes a sleeping parent, and these fresh wake-ups compete with the victim's as
//! equals, where a process that never sleeps loses to it; two forkers on two CPUs keep both
//! busy with them. Making each fork dearer did not help: forking from 16 or 64 MiB of touched
//! private memory cut the fork rate 5-20 times and left the victim's p99 rise (81% and 195%)
//! near the small tree's (137%), all below stress-ng's (392%). Spinning stays the tree's
//! default at the limit: blocked in `waitpid`, a tree of population 2 has one runnable
//! process at a time (`fork-latency` p99 rose 41% beside it, 822% beside two CPU-bound
//! threads).
//!
//! Why the bomb's processes hold extra mappings (`mappings`, 256 by default): a fork copies
//! every mapping of its parent and an exit tears them down, and on a kernel that does not
//! preempt itself (`preempt=none`, this machine's default) a neighbour that wakes while a
//! bomb process is inside `fork` or `exit` waits for that call to end. The bomb's own
//! address space is small (about 50 mappings, against 168 for a stress-ng fork worker and
//! 118 for redis-server), and its forks were the cheaper for it: beside the same O_DIRECT
//! reader (bench/tail.py, 8 paired repetitions, `--arm 'cN=cmd:forkloop 2 N'`, two
//! fork-and-wait loops in C), the reader's p99 rose 43% with 23 mappings, 153% with 343, 327%
//! with 823, and 138% beside `stress-ng --fork 2`.
//!
//! Containment and cleanup: every bomb process has `PR_SET_PDEATHSIG = SIGKILL` (a parent's
//! death kills its subtree; a forker's child, which exits at once, does without); the leader
//! too, tied to the stressor thread, so killing the
//! agent kills everything. On stop, the leader kills group R until its subreaper reaping
//! finds no child left, then exits; the stressor thread reaps the leader and sweeps group R
//! until nothing answers. Children run only async-signal-safe code (raw libc calls and
//! atomics in a shared anonymous page): no allocation, no locks, no Rust runtime.

use std::sync::atomic::{AtomicI32, AtomicU32, AtomicU64, Ordering};
use std::time::{Duration, Instant};

use anyhow::Context as _;
use serde::Deserialize;

use super::mapping::map_anon;
use crate::params::{ParamKind, ParamSpec, ParamValues};
use crate::{Class, Env, StressCtx, StressReport, Stressor, Unsupported};

/// The `forkbomb` stressor.
pub struct Forkbomb;

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct Opts {
    max_procs: u32,
    child: String,
    at_limit: String,
    mappings: u32,
}

const PARAMS: &[ParamSpec] = &[
    ParamSpec {
        name: "max_procs",
        help: "bomb processes at intensity 100 (the tenant's pids limit and caps.max_tasks may \
               hold it lower)",
        kind: ParamKind::Int {
            min: 1,
            max: 1_000_000,
        },
        default: "1024",
    },
    ParamSpec {
        name: "child",
        help: "what a new bomb process does: exit (at once: half the population limit are \
               forkers, each forks one child, sleeps in waitpid until it has exited and forks \
               again, the fork/exit/wait churn of stress-ng --fork that delays a neighbour's \
               wake-ups most) or fork (it loops forking too: the classic tree, see at_limit)",
        kind: ParamKind::Choice {
            options: &["exit", "fork"],
        },
        default: "exit",
    },
    ParamSpec {
        name: "mappings",
        help: "memory mappings each bomb process holds beyond its own (one touched page each), \
               copied by every fork and torn down by every exit: a fork's cost, and how long \
               a neighbour waking meanwhile waits for the CPU, grows with them. 256 makes a \
               mid-size program (in all: bash 43, python3 105, redis-server 118, a stress-ng \
               fork worker 168, a JVM or a browser process hundreds to thousands); 0 forks \
               from the bomb's own ~50",
        kind: ParamKind::Int {
            min: 0,
            max: 60_000,
        },
        default: "256",
    },
    ParamSpec {
        name: "at_limit",
        help: "with child=fork, what a bomb process with children does at the population \
               limit: spin (reap without waiting, yield the CPU, try again: every process \
               stays runnable) or block (sleep in waitpid until a child ends)",
        kind: ParamKind::Choice {
            options: &["spin", "block"],
        },
        default: "spin",
    },
];

/// Nap of a process whose fork failed (or of the root at the limit with no child).
const BACKOFF_NS: libc::c_long = 1_000_000;

/// How long the leader gets to kill and reap the bomb before it is killed itself.
const LEADER_GRACE: Duration = Duration::from_secs(5);

/// Counters shared by every process of the bomb (one anonymous shared page).
#[repr(C)]
struct Shared {
    /// Set to 1 by the stressor thread to end the bomb.
    stop: AtomicU32,
    /// Population slots taken: bomb processes not yet reaped, plus forks in flight.
    live: AtomicU32,
    /// Bomb processes that exist (forked, not yet reaped).
    procs: AtomicU32,
    /// Highest `procs` seen.
    peak: AtomicU32,
    /// Process group of the bomb (the root's pid), 0 until known.
    pgid: AtomicI32,
    /// Successful forks.
    forks: AtomicU64,
    /// Failed forks (EAGAIN from a pids limit, ENOMEM).
    failures: AtomicU64,
    /// Fork attempts held back by the population limit.
    limit_waits: AtomicU64,
    /// Of those, the ones a process answered by yielding the CPU (`at_limit = "spin"`).
    limit_spins: AtomicU64,
    /// Leaves that exited to hand their slot back.
    leaf_exits: AtomicU64,
    /// Children of forkers (`child = "exit"`) that ran and exited at once.
    quick_exits: AtomicU64,
    /// Forker processes started (`child = "exit"`), the root included.
    forkers: AtomicU32,
    /// Set to 1 by the root once it has started every forker (`child = "exit"`): until then
    /// the forkers it started sleep on it (a futex), so that they do not slow its forks down.
    go: AtomicU32,
    /// Forkers that have not exited (`child = "exit"`).
    forkers_alive: AtomicU32,
    /// Bomb processes alive when the kernel first refused a fork, 0 until then: the room the
    /// tenant's pids limit leaves the bomb.
    ceiling: AtomicU32,
    /// Extra mappings the root made before it forked anything (`mappings`).
    mappings: AtomicU32,
}

/// The shared page, unmapped (in this process) on drop.
struct SharedPage(*mut Shared);

impl SharedPage {
    fn new() -> anyhow::Result<Self> {
        let len = std::mem::size_of::<Shared>().max(4096);
        // Zero bytes are valid atomics.
        let Some(p) = map_anon(len, libc::MAP_SHARED) else {
            return Err(std::io::Error::last_os_error()).context("forkbomb: shared page");
        };
        Ok(SharedPage(p.cast()))
    }

    fn get(&self) -> &Shared {
        // SAFETY: the page is mapped, zero-initialised and lives as long as `self`.
        unsafe { &*self.0 }
    }
}

impl Drop for SharedPage {
    fn drop(&mut self) {
        let len = std::mem::size_of::<Shared>().max(4096);
        // SAFETY: unmapping the range mapped in `new`.
        unsafe { libc::munmap(self.0.cast(), len) };
    }
}

// ---- code run in forked processes: async-signal-safe only ----------------------------------

fn errno() -> libc::c_int {
    // SAFETY: thread-local errno location.
    unsafe { *libc::__errno_location() }
}

fn nap(ns: libc::c_long) {
    let ts = libc::timespec {
        tv_sec: 0,
        tv_nsec: ns,
    };
    // SAFETY: valid timespec; a null remainder is allowed.
    unsafe { libc::nanosleep(&ts, std::ptr::null_mut()) };
}

fn exit_now(code: libc::c_int) -> ! {
    // SAFETY: _exit ends the process without running anything of the parent's runtime.
    unsafe { libc::_exit(code) }
}

/// Reaps exited children without blocking, releasing their population slots; returns how
/// many were reaped (`None` when the process has no child at all).
fn reap(sh: &Shared) -> Option<u32> {
    let mut n = 0;
    loop {
        let mut status = 0;
        // SAFETY: plain waitpid with a valid status pointer.
        let r = unsafe { libc::waitpid(-1, &mut status, libc::WNOHANG) };
        if r > 0 {
            sh.procs.fetch_sub(1, Ordering::SeqCst);
            sh.live.fetch_sub(1, Ordering::SeqCst);
            n += 1;
        } else if r == 0 {
            return Some(n);
        } else if errno() == libc::EINTR {
            continue;
        } else {
            return if n > 0 { Some(n) } else { None };
        }
    }
}

/// Waits for one child to end and releases its slot; false when there is no child.
fn wait_one(sh: &Shared) -> bool {
    loop {
        let mut status = 0;
        // SAFETY: plain blocking waitpid with a valid status pointer.
        let r = unsafe { libc::waitpid(-1, &mut status, 0) };
        if r > 0 {
            sh.procs.fetch_sub(1, Ordering::SeqCst);
            sh.live.fetch_sub(1, Ordering::SeqCst);
            return true;
        }
        if errno() != libc::EINTR {
            return false;
        }
    }
}

/// `futex(2)` on a word of the shared page (not `FUTEX_PRIVATE`: the page is shared between
/// processes): `FUTEX_WAIT` sleeps while the word is `val`, at most 10 ms (so a stop is seen),
/// `FUTEX_WAKE` wakes up to `val` sleepers.
fn futex(word: &AtomicU32, op: libc::c_int, val: i32) {
    let timeout = libc::timespec {
        tv_sec: 0,
        tv_nsec: 10_000_000,
    };
    // SAFETY: the word lives in the shared page for the bomb's whole life; the timeout is a
    // valid timespec (ignored by FUTEX_WAKE).
    unsafe {
        libc::syscall(
            libc::SYS_futex,
            word.as_ptr(),
            op,
            val,
            &timeout as *const libc::timespec,
            std::ptr::null::<u32>(),
            0,
        )
    };
}

/// Arms the parent-death signal in a fresh child; exits if the parent is already gone.
fn die_with_parent(parent: libc::pid_t) {
    // SAFETY: prctl and getppid have no memory arguments.
    unsafe {
        libc::prctl(libc::PR_SET_PDEATHSIG, libc::SIGKILL, 0, 0, 0);
        if libc::getppid() != parent {
            libc::_exit(0);
        }
    }
}

/// The loop of every bomb process; `spin`: at the limit, yield and retry instead of waiting.
fn bomb_loop(sh: &Shared, limit: u32, spin: bool, mut is_root: bool) -> ! {
    let mut children: u32 = 0;
    loop {
        if sh.stop.load(Ordering::Relaxed) != 0 {
            exit_now(0);
        }
        if children > 0 {
            let n = reap(sh).unwrap_or(children);
            children = children.saturating_sub(n);
        }
        if sh.live.fetch_add(1, Ordering::SeqCst) >= limit {
            sh.live.fetch_sub(1, Ordering::SeqCst);
            sh.limit_waits.fetch_add(1, Ordering::Relaxed);
            if children == 0 && !is_root {
                sh.leaf_exits.fetch_add(1, Ordering::Relaxed);
                exit_now(0);
            }
            if spin {
                // Stays runnable: the next turn reaps whatever ended meanwhile.
                sh.limit_spins.fetch_add(1, Ordering::Relaxed);
                // SAFETY: sched_yield has no arguments.
                unsafe { libc::sched_yield() };
            } else if children > 0 && wait_one(sh) {
                children -= 1;
            } else {
                children = 0;
                nap(BACKOFF_NS);
            }
            continue;
        }
        // SAFETY: getpid/fork; the child runs only this async-signal-safe loop.
        let me = unsafe { libc::getpid() };
        let pid = unsafe { libc::fork() };
        if pid == 0 {
            die_with_parent(me);
            children = 0;
            is_root = false;
        } else if pid > 0 {
            children += 1;
            sh.forks.fetch_add(1, Ordering::Relaxed);
            let now = sh.procs.fetch_add(1, Ordering::SeqCst) + 1;
            sh.peak.fetch_max(now, Ordering::Relaxed);
        } else {
            sh.live.fetch_sub(1, Ordering::SeqCst);
            sh.failures.fetch_add(1, Ordering::Relaxed);
            if children == 0 && !is_root {
                sh.leaf_exits.fetch_add(1, Ordering::Relaxed);
                exit_now(0);
            }
            nap(BACKOFF_NS);
        }
    }
}

/// Waits (sleeping) until child `pid` has ended, releasing the slot of every process it
/// reaps meanwhile (the root also reaps the forkers it started).
fn wait_for(sh: &Shared, pid: libc::pid_t) {
    loop {
        let mut status = 0;
        // SAFETY: plain blocking waitpid with a valid status pointer.
        let r = unsafe { libc::waitpid(-1, &mut status, 0) };
        if r > 0 {
            sh.procs.fetch_sub(1, Ordering::SeqCst);
            sh.live.fetch_sub(1, Ordering::SeqCst);
            if r == pid {
                return;
            }
        } else if errno() != libc::EINTR {
            return;
        }
    }
}

/// What [`fork_slot`] did.
enum Slot {
    /// This is the new process.
    Child,
    /// A child was forked, with this pid.
    Parent(libc::pid_t),
    /// Our own population limit had no room (counted in `limit_waits`).
    Full,
    /// The kernel refused the fork (EAGAIN from a pids limit, ENOMEM; counted in `failures`).
    Refused,
}

/// Forks a process that takes one population slot.
fn fork_slot(sh: &Shared, limit: u32) -> Slot {
    if sh.live.fetch_add(1, Ordering::SeqCst) >= limit {
        sh.live.fetch_sub(1, Ordering::SeqCst);
        sh.limit_waits.fetch_add(1, Ordering::Relaxed);
        return Slot::Full;
    }
    // SAFETY: fork; the child runs only async-signal-safe code.
    let pid = unsafe { libc::fork() };
    if pid < 0 {
        sh.live.fetch_sub(1, Ordering::SeqCst);
        sh.failures.fetch_add(1, Ordering::Relaxed);
        // The population when the kernel first said no: what the tenant has room for.
        let _ = sh.ceiling.compare_exchange(
            0,
            sh.procs.load(Ordering::SeqCst),
            Ordering::SeqCst,
            Ordering::SeqCst,
        );
        return Slot::Refused;
    }
    if pid > 0 {
        sh.forks.fetch_add(1, Ordering::Relaxed);
        let now = sh.procs.fetch_add(1, Ordering::SeqCst) + 1;
        sh.peak.fetch_max(now, Ordering::Relaxed);
        return Slot::Parent(pid);
    }
    Slot::Child
}

/// A forker whose fork the kernel refused: true (and counted out) when it should exit,
/// handing its slot back, because more than three quarters of the room the tenant gives the
/// bomb (its population at the first refusal) are forkers. The rest stay, napping and trying
/// again: the tenant stays at its pids limit and a quarter of its room goes to the children.
fn forker_leaves(sh: &Shared) -> bool {
    let keep = (sh.ceiling.load(Ordering::SeqCst) * 3 / 4).max(1);
    let left = sh
        .forkers_alive
        .fetch_update(Ordering::SeqCst, Ordering::SeqCst, |f| {
            (f > keep).then(|| f - 1)
        })
        .is_ok();
    if left {
        sh.leaf_exits.fetch_add(1, Ordering::Relaxed);
    }
    left
}

/// `child = "exit"`: the root starts `forkers - 1` more forkers, which sleep until it has
/// started them all (or the kernel refused one more); then every forker loops: fork a child
/// that exits at once, sleep until it has ended, again; after its first child it makes its
/// own `mappings` (see [`add_mappings`]), which every later child copies. So the bomb fills its population at
/// once, even on a slow CPU, instead of the root's forks competing with the loops of the
/// forkers already started. Under a pids limit lower than ours the root has filled the
/// tenant with forkers and every fork is refused: forkers then exit (see [`forker_leaves`])
/// until a quarter of the room is free for children, and the rest nap 1 ms and try again,
/// so the tenant is held at its limit and forking goes on.
fn forker_root(sh: &Shared, limit: u32, forkers: u32, mappings: u32) -> ! {
    // SAFETY: getpid has no arguments.
    let root = unsafe { libc::getpid() };
    sh.forkers.fetch_add(1, Ordering::Relaxed);
    sh.forkers_alive.fetch_add(1, Ordering::SeqCst);
    let mut is_root = true;
    for _ in 1..forkers {
        match fork_slot(sh, limit) {
            Slot::Child => {
                die_with_parent(root);
                is_root = false;
                break;
            }
            Slot::Parent(_) => {
                sh.forkers.fetch_add(1, Ordering::Relaxed);
                sh.forkers_alive.fetch_add(1, Ordering::SeqCst);
            }
            Slot::Full | Slot::Refused => break,
        }
    }
    if is_root {
        sh.go.store(1, Ordering::Release);
        futex(&sh.go, libc::FUTEX_WAKE, i32::MAX);
    } else {
        while sh.go.load(Ordering::Acquire) == 0 && sh.stop.load(Ordering::Relaxed) == 0 {
            futex(&sh.go, libc::FUTEX_WAIT, 0);
        }
    }
    // Each forker makes its own mappings once its first child has been and gone, so the
    // population fills at once even on a slow (emulated) CPU; the children it forks after
    // that copy them.
    let mut mapped = false;
    loop {
        if sh.stop.load(Ordering::Relaxed) != 0 {
            exit_now(0);
        }
        match fork_slot(sh, limit) {
            Slot::Child => {
                sh.quick_exits.fetch_add(1, Ordering::Relaxed);
                exit_now(0);
            }
            Slot::Parent(pid) => {
                wait_for(sh, pid);
                if !mapped {
                    mapped = true;
                    let made = add_mappings(mappings);
                    if is_root {
                        sh.mappings.store(made, Ordering::Relaxed);
                    }
                }
            }
            Slot::Refused if !is_root && forker_leaves(sh) => exit_now(0),
            Slot::Full | Slot::Refused => {
                if is_root {
                    // Forkers that left are the root's zombies until reaped, still counted
                    // by the pids limit.
                    reap(sh);
                }
                nap(BACKOFF_NS);
            }
        }
    }
}

/// How the bomb's processes behave, from the parameters.
#[derive(Clone, Copy)]
enum Shape {
    /// Every process loops forking (`child = "fork"`); `spin`: at the limit, yield and retry.
    Tree { spin: bool },
    /// This many forkers each fork a child that exits at once and wait for it.
    Forkers(u32),
}

/// Gives the calling process `n` more memory mappings, each of one touched page, so that
/// every fork copies them and every exit tears them down: one anonymous region of `2n`
/// pages, every other page made read-only, which the kernel cannot merge back. Returns how
/// many it made (0 when the region cannot be had, e.g. under a tenant's memory limit).
fn add_mappings(n: u32) -> u32 {
    if n == 0 {
        return 0;
    }
    const PAGE: usize = 4096;
    let Some(base) = map_anon(2 * n as usize * PAGE, libc::MAP_PRIVATE) else {
        return 0;
    };
    let mut made = 0;
    for i in 0..n as usize {
        // SAFETY: both pages lie inside the region mapped above.
        unsafe {
            base.add(2 * i * PAGE).write_volatile(1);
            base.add((2 * i + 1) * PAGE).write_volatile(1);
            if libc::mprotect(base.add((2 * i + 1) * PAGE).cast(), PAGE, libc::PROT_READ) == 0 {
                made += 1;
            }
        }
    }
    made
}

/// The leader: detaches into its own session, becomes the subreaper of the bomb, forks the
/// root, reaps orphans while the bomb runs, and on stop kills and reaps everything.
fn leader_main(sh: &Shared, agent: libc::pid_t, limit: u32, shape: Shape, mappings: u32) -> ! {
    // SAFETY: raw libc calls with valid arguments; nothing here allocates or locks.
    unsafe {
        die_with_parent(agent);
        libc::setsid();
        libc::prctl(libc::PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0);
        // Whatever the agent installed, the bomb gets default signal handling.
        for sig in [
            libc::SIGCHLD,
            libc::SIGINT,
            libc::SIGTERM,
            libc::SIGHUP,
            libc::SIGPIPE,
        ] {
            libc::signal(sig, libc::SIG_DFL);
        }
        let mut empty: libc::sigset_t = std::mem::zeroed();
        libc::sigemptyset(&mut empty);
        libc::sigprocmask(libc::SIG_SETMASK, &empty, std::ptr::null_mut());
        // The bomb must not keep the agent's pipes and sockets open.
        libc::syscall(libc::SYS_close_range, 3u32, u32::MAX, 0u32);
    }
    // SAFETY: see bomb_loop.
    let me = unsafe { libc::getpid() };
    sh.live.fetch_add(1, Ordering::SeqCst);
    let root = unsafe { libc::fork() };
    if root == 0 {
        die_with_parent(me);
        // SAFETY: moves this process into its own new process group.
        unsafe { libc::setpgid(0, 0) };
        match shape {
            Shape::Tree { spin } => {
                // Every process of the tree inherits them.
                sh.mappings.store(add_mappings(mappings), Ordering::Relaxed);
                bomb_loop(sh, limit, spin, true)
            }
            Shape::Forkers(n) => forker_root(sh, limit, n, mappings),
        }
    }
    if root < 0 {
        sh.live.fetch_sub(1, Ordering::SeqCst);
        sh.failures.fetch_add(1, Ordering::Relaxed);
        exit_now(2);
    }
    sh.procs.fetch_add(1, Ordering::SeqCst);
    sh.peak.fetch_max(1, Ordering::Relaxed);
    // Both sides set the group, so it is set before either goes on.
    // SAFETY: root is our child.
    unsafe { libc::setpgid(root, root) };
    sh.pgid.store(root, Ordering::SeqCst);
    while sh.stop.load(Ordering::SeqCst) == 0 {
        reap(sh);
        nap(2_000_000);
    }
    loop {
        // SAFETY: root > 1 is the bomb's own group.
        unsafe { libc::killpg(root, libc::SIGKILL) };
        if reap(sh).is_none() {
            exit_now(0);
        }
        nap(BACKOFF_NS);
    }
}

// ---- stressor side ---------------------------------------------------------------------------

/// How the leader ended.
struct Ended {
    /// It exited 0: it killed and reaped the whole bomb itself, so group R is empty.
    clean: bool,
    how: String,
}

/// `waitpid(pid, WNOHANG)`: Some once `pid` has ended (or is not our child any more).
fn try_reap(pid: libc::pid_t) -> Option<Ended> {
    loop {
        let mut status = 0;
        // SAFETY: plain waitpid.
        let r = unsafe { libc::waitpid(pid, &mut status, libc::WNOHANG) };
        if r == pid {
            let clean = libc::WIFEXITED(status) && libc::WEXITSTATUS(status) == 0;
            let how = if libc::WIFSIGNALED(status) {
                format!("killed by signal {}", libc::WTERMSIG(status))
            } else {
                format!("exit status {}", libc::WEXITSTATUS(status))
            };
            return Some(Ended { clean, how });
        }
        if r == 0 {
            return None;
        }
        let e = std::io::Error::last_os_error();
        if e.raw_os_error() == Some(libc::EINTR) {
            continue;
        }
        return Some(Ended {
            clean: false,
            how: format!("no longer our child ({e})"),
        });
    }
}

/// Processes of group `pgid` that are still running (not zombies), and the zombies.
fn group_members(pgid: libc::pid_t) -> (usize, usize) {
    let Some(states) = crate::util::group_states(pgid) else {
        return (0, 0);
    };
    let zombies = states.iter().filter(|s| matches!(s, 'Z' | 'X')).count();
    (states.len() - zombies, zombies)
}

/// Kills the bomb's group until none of it runs (reaping members that are our own children);
/// returns (still running, zombies) at the end. Used only when the leader did not finish its
/// own cleanup: killed bomb processes whose parents are gone then belong to init, which reaps
/// them in its own time. A group keeps its id while any member, zombies included, exists,
/// so the signal never reaches a reused id.
fn sweep_group(pgid: libc::pid_t) -> (usize, usize) {
    // SAFETY: getpgrp has no arguments.
    let own = unsafe { libc::getpgrp() };
    if pgid <= 1 || pgid == own {
        return (0, 0);
    }
    let mut last = (0, 0);
    for _ in 0..1000 {
        let mut status = 0;
        // SAFETY: plain kill/waitpid on the bomb's group only.
        unsafe {
            while libc::waitpid(-pgid, &mut status, libc::WNOHANG) > 0 {}
            if libc::killpg(pgid, libc::SIGKILL) != 0 {
                return (0, 0);
            }
        }
        last = group_members(pgid);
        if last.0 == 0 {
            return last;
        }
        std::thread::sleep(Duration::from_millis(1));
    }
    last
}

/// User plus system CPU seconds of this process's reaped children and their reaped
/// descendants.
fn children_cpu_s() -> f64 {
    // SAFETY: all-zero bytes are a valid rusage.
    let mut ru: libc::rusage = unsafe { std::mem::zeroed() };
    // SAFETY: getrusage fills the struct it is given.
    unsafe { libc::getrusage(libc::RUSAGE_CHILDREN, &mut ru) };
    let tv = |t: libc::timeval| t.tv_sec as f64 + t.tv_usec as f64 * 1e-6;
    tv(ru.ru_utime) + tv(ru.ru_stime)
}

/// The population limit: ceil(max_procs x intensity / 100), at least 1, never more than
/// `caps.max_tasks - 1` (the leader counts as one task).
fn population_limit(ctx: &StressCtx, max_procs: u32) -> anyhow::Result<u32> {
    let mut limit = (u64::from(max_procs) * u64::from(ctx.intensity)).div_ceil(100) as u32;
    if let Some(t) = ctx.caps.max_tasks {
        anyhow::ensure!(
            t >= 2,
            "forkbomb needs caps.max_tasks >= 2 (the leader and at least one bomb process), \
             got {t}"
        );
        limit = limit.min(t - 1);
    }
    Ok(limit.max(1))
}

/// The report's first note: the population limit and the shape of the bomb.
fn shape_note(sh: &Shared, limit: u32, shape: Shape) -> String {
    match shape {
        Shape::Tree { spin } => format!(
            "population_limit={limit} child=fork at_limit={}",
            if spin { "spin" } else { "block" }
        ),
        Shape::Forkers(n) => format!(
            "population_limit={limit} child=exit forkers_planned={n} forkers={} \
             forkers_alive={} room_at_first_refusal={}",
            sh.forkers.load(Ordering::Relaxed),
            sh.forkers_alive.load(Ordering::SeqCst),
            sh.ceiling.load(Ordering::SeqCst)
        ),
    }
}

/// Waits (up to [`LEADER_GRACE`]) for the leader to clean up after the stop, killing it after
/// that; true when it killed and reaped the whole bomb itself. `ended_early`: the leader was
/// already reaped before the stop.
fn finish_leader(leader: libc::pid_t, ended_early: Option<Ended>, notes: &mut Vec<String>) -> bool {
    if let Some(e) = ended_early {
        notes.push(format!(
            "leader ended before the stop ({}): the tenant killed it?",
            e.how
        ));
        return false;
    }
    let deadline = Instant::now() + LEADER_GRACE;
    loop {
        if let Some(e) = try_reap(leader) {
            return e.clean;
        }
        if Instant::now() >= deadline {
            // SAFETY: leader > 0 is our child, not yet reaped.
            unsafe { libc::kill(leader, libc::SIGKILL) };
            let mut status = 0;
            // SAFETY: blocking wait for our own child, which was just killed.
            unsafe { libc::waitpid(leader, &mut status, 0) };
            notes.push("leader did not finish within 5 s and was killed".into());
            return false;
        }
        std::thread::sleep(Duration::from_millis(1));
    }
}

/// [`sweep_group`], noting what it could not clean up.
fn sweep_group_noting(pgid: libc::pid_t, notes: &mut Vec<String>) {
    let (alive, zombies) = sweep_group(pgid);
    if alive > 0 {
        notes.push(format!(
            "{alive} processes of group {pgid} still running after cleanup"
        ));
    }
    if zombies > 0 {
        notes.push(format!(
            "{zombies} killed bomb processes left for init to reap"
        ));
    }
}

impl Stressor for Forkbomb {
    fn name(&self) -> &'static str {
        "forkbomb"
    }
    fn help(&self) -> &'static str {
        "Fork bomb held to a population limit. By default (child=exit) half the limit are \
         forkers, each forking a child that exits at once and sleeping until it has ended, \
         then forking again (stress-ng --fork's churn, the hardest on a neighbour's wake-up \
         latency); child=fork is the classic tree: every process loops forking, children \
         loop too; with no room, childless leaves exit to hand their slot back while parents \
         reap without waiting, yield the CPU and try again (at_limit=spin, the default: every \
         process stays runnable; at_limit=block sleeps until a child ends). Under a pids limit \
         lower than its own, forkers exit until a quarter of the tenant's room is free for \
         children and the rest nap 1 ms after a refused fork, so the tenant stays at its \
         limit and forking never stops. Every bomb process holds 256 extra memory mappings \
         (mappings=), as a large program does, so each fork and exit costs the kernel what a \
         real program's would. Runs in its own session and process group, every \
         process dies with its parent, and all are killed and reaped on stop. One operation \
         is one successful fork. Pressure: forks_per_sec. Frozen, it stops forking but keeps \
         its processes: the pids stay taken in its own tenant (up to the population limit) \
         until it is stopped. Its effect on other tenants (fork, exit and scheduler work) \
         stops with it, so it has no lingering effect."
    }
    fn class(&self) -> Class {
        Class::Process
    }
    fn intensity_knob(&self) -> &'static str {
        "population limit: ceil(max_procs x intensity / 100) bomb processes (default max_procs \
         1024), never more than caps.max_tasks - 1 (the leader counts as one task); the \
         tenant's pids limit may hold it lower; 0 = idle"
    }
    fn params(&self) -> &'static [ParamSpec] {
        PARAMS
    }
    fn aggressive(&self) -> bool {
        true
    }
    fn supported(&self, _env: &Env) -> Result<(), Unsupported> {
        if cfg!(target_os = "linux") {
            Ok(())
        } else {
            Err(Unsupported::new(
                "needs Linux (parent-death signal, child subreaper)",
            ))
        }
    }
    fn run(&self, ctx: &StressCtx, params: &ParamValues) -> anyhow::Result<StressReport> {
        let o: Opts = params.decode(self.name())?;
        let unit = "successful fork";
        if ctx.intensity == 0 {
            return Ok(super::pool::idle_report(ctx, unit));
        }
        let limit = population_limit(ctx, o.max_procs)?;
        let spin = o.at_limit != "block";
        let shape = if o.child == "fork" {
            Shape::Tree { spin }
        } else {
            Shape::Forkers((limit / 2).max(1))
        };
        let page = SharedPage::new()?;
        let cpu0 = children_cpu_s();
        let sh = page.get();
        // SAFETY: getpid has no arguments.
        let agent = unsafe { libc::getpid() };
        let t0 = Instant::now();
        // SAFETY: the child runs only async-signal-safe code (leader_main) and never returns.
        let leader = unsafe { libc::fork() };
        if leader < 0 {
            return Err(std::io::Error::last_os_error())
                .context("forkbomb: cannot fork the leader process (a pids limit?)");
        }
        if leader == 0 {
            leader_main(sh, agent, limit, shape, o.mappings);
        }

        let mut counted = 0u64;
        let mut ended_early: Option<Ended> = None;
        while ctx.running() {
            std::thread::sleep(Duration::from_millis(10));
            let f = sh.forks.load(Ordering::Relaxed);
            ctx.add_ops(f - counted);
            counted = f;
            if ended_early.is_none() {
                ended_early = try_reap(leader);
            }
        }
        let elapsed_s = t0.elapsed().as_secs_f64();
        let forks = sh.forks.load(Ordering::Relaxed);
        ctx.add_ops(forks - counted);
        sh.stop.store(1, Ordering::SeqCst);

        let mut notes = vec![shape_note(sh, limit, shape)];
        let clean = finish_leader(leader, ended_early, &mut notes);
        let pgid = sh.pgid.load(Ordering::SeqCst);
        if !clean {
            sweep_group_noting(pgid, &mut notes);
        }
        let peak = sh.peak.load(Ordering::Relaxed);
        notes.push(format!(
            "peak_population={peak} fork_failures={} limit_waits={} limit_spins={} \
             leaf_exits={} quick_exits={}",
            sh.failures.load(Ordering::Relaxed),
            sh.limit_waits.load(Ordering::Relaxed),
            sh.limit_spins.load(Ordering::Relaxed),
            sh.leaf_exits.load(Ordering::Relaxed),
            sh.quick_exits.load(Ordering::Relaxed)
        ));
        if clean {
            // The leader reaped the whole bomb and was reaped itself: their CPU time is in
            // this process's children's usage (other children of the agent may add to it).
            notes.push(format!(
                "bomb_cpu_s={:.3}",
                (children_cpu_s() - cpu0).max(0.0)
            ));
        }
        notes.push(format!(
            "mappings={} (asked {})",
            sh.mappings.load(Ordering::Relaxed),
            o.mappings
        ));
        notes.push(format!("leader_pid={leader} bomb_pgid={pgid}"));
        drop(page);
        let pressure = vec![crate::Pressure::rate(
            "forks_per_sec",
            "forks/s",
            forks as f64,
            elapsed_s,
        )];
        Ok(StressReport {
            ops: forks,
            elapsed_s,
            ops_per_sec: super::pool::rate(forks, elapsed_s),
            op_unit: unit.into(),
            // The leader and the most bomb processes alive at once.
            workers: peak + 1,
            bytes: 0,
            notes,
            pressure,
        })
    }
}
