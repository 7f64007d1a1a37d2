//! The server's shared state: its settings, the queue behind one lock (saved on every change),
//! the broadcast channel that carries job changes and run events to the live views, and the
//! per-process CSRF value.

use std::path::PathBuf;
use std::sync::{Arc, Mutex, MutexGuard};

use serde::Serialize;
use tokio::sync::{broadcast, Notify};

use crate::queue::{Job, Queue};
use crate::results::RunCache;

/// What the server needs to know.
#[derive(Debug, Clone)]
pub struct Config {
    /// The address to listen on.
    pub listen: std::net::SocketAddr,
    /// The token clients must present; required on a non-loopback address.
    pub token: Option<String>,
    /// The results database.
    pub db: PathBuf,
    /// Where the queue and uploaded scenarios are kept.
    pub state_dir: PathBuf,
    /// The isobench binary that runs the jobs.
    pub exe: PathBuf,
    /// Where runs happen: scenarios are planned against this mode's host (a synthetic one
    /// for the fake platform of `ISOBENCH_DEBUG_FAKE`).
    pub mode: isobench_experiment::session::Mode,
    /// How long a client may take to send a request's headers before its connection is
    /// closed ([`crate::HEADER_TIMEOUT`]).
    pub header_timeout: std::time::Duration,
}

/// One message to the live views.
#[derive(Debug, Clone)]
pub enum Broadcast {
    /// A job changed (`event: job`).
    Job(Box<Job>),
    /// A run reported an event (`event: run`).
    Run(RunEvent),
}

/// A run's event, with the job that runs it.
#[derive(Debug, Clone, Serialize, utoipa::ToSchema)]
pub struct RunEvent {
    /// The job.
    pub job: String,
    /// The run, once known.
    pub run: Option<String>,
    /// The event as `isobench run --json-stream` wrote it.
    pub event: serde_json::Value,
}

/// A platform and whether it can run here.
#[derive(Debug, Clone, Serialize, utoipa::ToSchema)]
pub struct PlatformInfo {
    /// Its name.
    pub name: String,
    /// Whether it works here.
    pub available: bool,
    /// Why not.
    pub why: Option<String>,
}

/// The server's state, shared by the handlers and the worker.
#[derive(Debug)]
pub struct App {
    /// Settings.
    pub config: Config,
    /// The CSRF value of this process.
    pub csrf: String,
    queue: Mutex<Queue>,
    /// Job changes and run events.
    pub events: broadcast::Sender<Broadcast>,
    /// Woken when a job is queued or the server stops.
    pub wake: Notify,
    /// Analysed facts of stored runs.
    pub runs: RunCache,
    /// The platforms (checked once, at start).
    pub platforms: Mutex<Vec<PlatformInfo>>,
    /// Set when the server is shutting down.
    pub shutting_down: std::sync::atomic::AtomicBool,
    /// Becomes true when the server is shutting down (ends the event streams).
    stopping: tokio::sync::watch::Sender<bool>,
    /// Wrong tokens per client address.
    pub throttle: crate::throttle::Throttle,
    /// The state directory's lock, held as long as the server lives.
    pub state_lock: Mutex<crate::statelock::StateLock>,
}

/// A random hex string of `bytes` bytes.
pub fn random_hex(bytes: usize) -> String {
    use rand::RngCore;
    let mut buf = vec![0u8; bytes];
    rand::thread_rng().fill_bytes(&mut buf);
    buf.iter().map(|b| format!("{b:02x}")).collect()
}

impl App {
    /// The state of a server with `config`, the queue it found and its state directory's
    /// lock.
    pub fn new(config: Config, queue: Queue, lock: crate::statelock::StateLock) -> Arc<App> {
        let (events, _) = broadcast::channel(1024);
        Arc::new(App {
            config,
            csrf: random_hex(16),
            queue: Mutex::new(queue),
            events,
            wake: Notify::new(),
            runs: RunCache::default(),
            platforms: Mutex::new(Vec::new()),
            shutting_down: false.into(),
            stopping: tokio::sync::watch::Sender::new(false),
            throttle: Default::default(),
            state_lock: Mutex::new(lock),
        })
    }

    /// Marks the server as shutting down: the worker starts no other job and the event
    /// streams end (an open stream would keep the server waiting for it).
    pub fn begin_shutdown(&self) {
        self.shutting_down
            .store(true, std::sync::atomic::Ordering::SeqCst);
        self.stopping.send_replace(true);
        self.wake.notify_one();
    }

    /// Whether the server is shutting down, watched.
    pub fn stopping(&self) -> tokio::sync::watch::Receiver<bool> {
        self.stopping.subscribe()
    }

    /// `queue.json` in the state directory.
    pub fn queue_path(&self) -> PathBuf {
        self.config.state_dir.join("queue.json")
    }

    /// Where an uploaded scenario of job `id` is kept.
    pub fn scenario_path(&self, id: &str) -> PathBuf {
        self.config
            .state_dir
            .join("jobs")
            .join(format!("{id}.toml"))
    }

    /// Where the hosts file of fleet job `id` is kept, its hosts' tokens beside it
    /// ([`crate::fleet::write_hosts_file`]).
    pub fn hosts_path(&self, id: &str) -> PathBuf {
        self.config
            .state_dir
            .join("jobs")
            .join(format!("{id}.hosts.toml"))
    }

    /// The queue, to read.
    pub fn queue(&self) -> MutexGuard<'_, Queue> {
        self.queue.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Changes the queue, saves it, and tells the live views about the jobs `change`
    /// returns as changed.
    pub fn update<T>(&self, change: impl FnOnce(&mut Queue) -> T) -> std::io::Result<T> {
        self.update_jobs(|q| {
            let out = change(q);
            (out, Vec::new())
        })
    }

    /// [`App::update`], announcing the jobs whose ids `change` returns.
    pub fn update_jobs<T>(
        &self,
        change: impl FnOnce(&mut Queue) -> (T, Vec<String>),
    ) -> std::io::Result<T> {
        let mut q = self.queue();
        let (out, changed) = change(&mut q);
        q.save(&self.queue_path())?;
        for id in changed {
            if let Some(job) = q.view(&id) {
                let _ = self.events.send(Broadcast::Job(Box::new(job)));
            }
        }
        Ok(out)
    }

    /// Tells the live views about every listed job (their positions may have changed).
    pub fn announce_all(&self) {
        for job in self.queue().list() {
            let _ = self.events.send(Broadcast::Job(Box::new(job)));
        }
    }
}
