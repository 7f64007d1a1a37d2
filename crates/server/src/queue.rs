//! The job queue: what the server was asked to run, in order, with each job's state. One
//! measurement runs at a time (two would disturb each other's numbers), so the queue is a
//! plain ordered list that the worker takes from the front. It is saved on every change
//! (write a temporary file, then rename, so a crash leaves the old or the new file, never a
//! torn one) and read back at start: a job the server died under is put back at the head as
//! a resume of its run.

use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};
use utoipa::ToSchema;

/// Finished jobs listed at most.
const FINISHED_SHOWN: usize = 50;

/// Where a job stands.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, ToSchema)]
#[serde(rename_all = "lowercase")]
pub enum JobState {
    /// Waiting for its turn.
    Queued,
    /// Its run is measuring.
    Running,
    /// Asked to stop; its run is ending gracefully.
    Stopping,
    /// Its run ended (complete, possibly with flagged results: see `exit_code`).
    Done,
    /// Its run could not start or crashed (see `error`).
    Failed,
    /// Removed from the queue before it ran.
    Cancelled,
    /// Stopped part-way; its run is stored and can be resumed.
    Interrupted,
}

impl JobState {
    /// Whether the job is over.
    pub fn finished(self) -> bool {
        matches!(
            self,
            JobState::Done | JobState::Failed | JobState::Cancelled | JobState::Interrupted
        )
    }

    /// Whether its run is going on now.
    pub fn active(self) -> bool {
        matches!(self, JobState::Running | JobState::Stopping)
    }

    /// The word of the state.
    pub fn as_str(self) -> &'static str {
        match self {
            JobState::Queued => "queued",
            JobState::Running => "running",
            JobState::Stopping => "stopping",
            JobState::Done => "done",
            JobState::Failed => "failed",
            JobState::Cancelled => "cancelled",
            JobState::Interrupted => "interrupted",
        }
    }

    /// Every state.
    pub const ALL: [JobState; 7] = [
        JobState::Queued,
        JobState::Running,
        JobState::Stopping,
        JobState::Done,
        JobState::Failed,
        JobState::Cancelled,
        JobState::Interrupted,
    ];
}

/// What a job runs: a preset, an uploaded scenario, or the resume of a stored run; on this
/// host (on one platform, or on each of `platforms` in turn), or on every host of a fleet
/// (`hosts`).
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize, ToSchema)]
pub struct JobSpec {
    /// A built-in preset.
    pub preset: Option<String>,
    /// The name of an uploaded scenario (its text is kept in the server's state directory).
    pub scenario_name: Option<String>,
    /// Platform instead of the scenario's.
    pub platform: Option<String>,
    /// The platforms of a run on each in turn (`isobench run --platform A,B`), stored as
    /// linked runs; empty for a run on one platform.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub platforms: Vec<String>,
    /// Seed instead of the scenario's.
    pub seed: Option<u64>,
    /// The stored run this job resumes.
    pub resume: Option<String>,
    /// The hosts of a fleet run (`isobench run --hosts`), in order; empty for a run here.
    /// Their tokens are kept in the server's state directory, never shown.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub hosts: Vec<JobHost>,
}

impl JobSpec {
    /// Whether the job is a fleet run across hosts.
    pub fn is_fleet(&self) -> bool {
        !self.hosts.is_empty()
    }

    /// Whether the job runs the scenario on several platforms in turn.
    pub fn is_cross(&self) -> bool {
        !self.platforms.is_empty()
    }
}

/// One host of a fleet job.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, ToSchema)]
pub struct JobHost {
    /// Its name in the fleet table.
    pub name: String,
    /// `ADDR:PORT` of its host agent (`isobench agent --listen`).
    pub address: String,
    /// Its type, the column it is pooled under in the fleet table.
    #[serde(rename = "type")]
    pub host_type: Option<String>,
}

/// The last trial a running job reported.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, ToSchema)]
pub struct Progress {
    /// Trials done (the current one's number).
    pub n: u64,
    /// Trials planned.
    pub of: u64,
    /// Round.
    pub round: u64,
    /// Condition of the trial (`baseline`, `cpu@50`).
    pub condition: String,
    /// What it measures.
    pub what: String,
    /// Estimated seconds left.
    pub eta_s: Option<f64>,
    /// On a run on several platforms: the platform running now.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub platform: Option<PlatformStep>,
}

/// The platform a run on several platforms is at.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, ToSchema)]
pub struct PlatformStep {
    /// The platform.
    pub name: String,
    /// Its place, from 1.
    pub n: u64,
    /// How many platforms.
    pub of: u64,
}

/// One job.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, ToSchema)]
pub struct Job {
    /// `j-<n>`.
    pub id: String,
    /// Where it stands.
    pub state: JobState,
    /// What it runs.
    pub spec: JobSpec,
    /// Its run, once the run is stored.
    pub run: Option<String>,
    /// 1-based place among the queued jobs.
    pub position: Option<usize>,
    /// When it was queued (RFC 3339).
    pub created_at: String,
    /// When its run started.
    pub started_at: Option<String>,
    /// When it finished.
    pub ended_at: Option<String>,
    /// Exit code of its run (4: ran, with flagged or partial results).
    pub exit_code: Option<i32>,
    /// Why it failed.
    pub error: Option<String>,
    /// Its run's last trial.
    pub progress: Option<Progress>,
}

/// Why the queue refused a change.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum QueueError {
    /// No job has that id.
    #[error("no job {0}; GET /api/v1/jobs lists the jobs")]
    Unknown(String),
    /// The job is not in a state that allows the change.
    #[error("job {id} is {state}: {what}")]
    State {
        /// The job.
        id: String,
        /// Its state.
        state: &'static str,
        /// What cannot be done, and what can.
        what: &'static str,
    },
}

/// Every job, in queue order for the queued ones; what `queue.json` holds.
#[derive(Debug, Clone, Default, Serialize, Deserialize)]
pub struct Queue {
    /// The number of the next job.
    next_id: u64,
    /// Every job.
    jobs: Vec<Job>,
    /// The process of the running job's run, while one runs.
    #[serde(default)]
    pub child_pid: Option<u32>,
}

fn now() -> String {
    isobench_store::Timestamp::now().to_rfc3339()
}

impl Queue {
    /// Adds a job at the end of the queue.
    pub fn push(&mut self, spec: JobSpec) -> Job {
        self.next_id += 1;
        let job = Job {
            id: format!("j-{}", self.next_id),
            state: JobState::Queued,
            spec,
            run: None,
            position: None,
            created_at: now(),
            started_at: None,
            ended_at: None,
            exit_code: None,
            error: None,
            progress: None,
        };
        self.jobs.push(job);
        self.view(&self.jobs.last().expect("just pushed").id.clone())
            .expect("just pushed")
    }

    /// A job as the API shows it (with its position).
    pub fn view(&self, id: &str) -> Option<Job> {
        let mut job = self.jobs.iter().find(|j| j.id == id)?.clone();
        job.position = self
            .queued_ids()
            .iter()
            .position(|q| *q == id)
            .map(|p| p + 1);
        Some(job)
    }

    /// A job, to change.
    pub fn get_mut(&mut self, id: &str) -> Option<&mut Job> {
        self.jobs.iter_mut().find(|j| j.id == id)
    }

    fn queued_ids(&self) -> Vec<&str> {
        self.jobs
            .iter()
            .filter(|j| j.state == JobState::Queued)
            .map(|j| j.id.as_str())
            .collect()
    }

    /// The jobs as the API lists them: running first, then queued in order, then the last
    /// finished ones, newest first.
    pub fn list(&self) -> Vec<Job> {
        let active = self.jobs.iter().filter(|j| j.state.active());
        let queued = self.jobs.iter().filter(|j| j.state == JobState::Queued);
        let mut finished: Vec<&Job> = self.jobs.iter().filter(|j| j.state.finished()).collect();
        finished.sort_by(|a, b| {
            let key = |j: &Job| (j.ended_at.clone().unwrap_or_default(), job_number(&j.id));
            key(b).cmp(&key(a))
        });
        finished.truncate(FINISHED_SHOWN);
        active
            .chain(queued)
            .chain(finished)
            .filter_map(|j| self.view(&j.id))
            .collect()
    }

    /// Every job, in storage order (for counting).
    pub fn all(&self) -> &[Job] {
        &self.jobs
    }

    /// The job that runs now.
    pub fn active(&self) -> Option<&Job> {
        self.jobs.iter().find(|j| j.state.active())
    }

    /// The next job to run, when none runs.
    pub fn next(&self) -> Option<&Job> {
        if self.active().is_some() {
            return None;
        }
        self.jobs.iter().find(|j| j.state == JobState::Queued)
    }

    /// Moves a queued job to `position` (1-based among the queued jobs; past the end is the
    /// end).
    pub fn move_to(&mut self, id: &str, position: usize) -> Result<(), QueueError> {
        let at = self.queued_at(id, "only a queued job can be moved")?;
        let job = self.jobs.remove(at);
        let queued: Vec<usize> = (0..self.jobs.len())
            .filter(|&i| self.jobs[i].state == JobState::Queued)
            .collect();
        let target = match queued.get(position.saturating_sub(1)) {
            Some(&i) => i,
            None => queued.last().map_or(self.jobs.len(), |&i| i + 1),
        };
        self.jobs.insert(target, job);
        Ok(())
    }

    /// Cancels a queued job.
    pub fn cancel(&mut self, id: &str) -> Result<(), QueueError> {
        let at = self.queued_at(
            id,
            "only a queued job can be cancelled (stop a running one)",
        )?;
        let job = &mut self.jobs[at];
        job.state = JobState::Cancelled;
        job.ended_at = Some(now());
        Ok(())
    }

    fn queued_at(&self, id: &str, what: &'static str) -> Result<usize, QueueError> {
        let at = self
            .jobs
            .iter()
            .position(|j| j.id == id)
            .ok_or_else(|| QueueError::Unknown(id.to_string()))?;
        let state = self.jobs[at].state;
        if state != JobState::Queued {
            return Err(QueueError::State {
                id: id.to_string(),
                state: state.as_str(),
                what,
            });
        }
        Ok(at)
    }

    /// Puts a job back at the head of the queue, as a resume of its run when the run is
    /// known (else it runs again from its spec). A fleet run cannot be resumed here (its
    /// runs are the hosts'), nor a run on several platforms (a resume is of one run, and
    /// the set is linked only once every platform ran): they run again from their spec.
    pub fn requeue_front(&mut self, id: &str) {
        let Some(at) = self.jobs.iter().position(|j| j.id == id) else {
            return;
        };
        let mut job = self.jobs.remove(at);
        if job.spec.is_fleet() || job.spec.is_cross() {
            job.run = None;
        } else if let Some(run) = &job.run {
            job.spec.resume = Some(run.clone());
        }
        job.state = JobState::Queued;
        job.ended_at = None;
        job.exit_code = None;
        job.error = None;
        job.progress = None;
        let head = self
            .jobs
            .iter()
            .position(|j| j.state == JobState::Queued)
            .unwrap_or(self.jobs.len());
        self.jobs.insert(head, job);
    }

    /// After a restart: the job that was running when the server died goes back to the head
    /// of the queue. Returns the process of its run, which may still be ending.
    pub fn recover(&mut self) -> Option<u32> {
        let pid = self.child_pid.take();
        let active: Vec<String> = self
            .jobs
            .iter()
            .filter(|j| j.state.active())
            .map(|j| j.id.clone())
            .collect();
        for id in active {
            self.requeue_front(&id);
        }
        pid
    }

    /// Whether a job that is queued or running will run `run`.
    pub fn has_live_run(&self, run: &str) -> bool {
        self.jobs.iter().any(|j| {
            !j.state.finished()
                && (j.run.as_deref() == Some(run) || j.spec.resume.as_deref() == Some(run))
        })
    }

    /// The newest job that ran (or runs) `run`.
    pub fn job_of_run(&self, run: &str) -> Option<&str> {
        self.jobs
            .iter()
            .rev()
            .find(|j| j.run.as_deref() == Some(run))
            .map(|j| j.id.as_str())
    }

    /// Reads `path`; an absent file is an empty queue.
    pub fn load(path: &Path) -> anyhow::Result<Queue> {
        match std::fs::read(path) {
            Ok(bytes) => serde_json::from_slice(&bytes).map_err(|e| {
                anyhow::anyhow!(
                    "{} is not a job queue ({e}); move it away to start with an empty queue",
                    path.display()
                )
            }),
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(Queue::default()),
            Err(e) => Err(anyhow::anyhow!("reading {}: {e}", path.display())),
        }
    }

    /// Writes the queue to `path` atomically, readable by its owner only (mode 0600).
    pub fn save(&self, path: &Path) -> std::io::Result<()> {
        let bytes = serde_json::to_vec_pretty(self).map_err(std::io::Error::other)?;
        crate::private::replace(path, &tmp_path(path), &bytes)
    }
}

fn tmp_path(path: &Path) -> PathBuf {
    let mut name = path.file_name().unwrap_or_default().to_os_string();
    name.push(".tmp");
    path.with_file_name(name)
}

fn job_number(id: &str) -> u64 {
    id.trim_start_matches("j-").parse().unwrap_or(0)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn preset(name: &str) -> JobSpec {
        JobSpec {
            preset: Some(name.into()),
            ..JobSpec::default()
        }
    }

    fn ids(q: &Queue) -> Vec<String> {
        q.list().into_iter().map(|j| j.id).collect()
    }

    #[test]
    fn queued_jobs_keep_their_order_and_move() {
        let mut q = Queue::default();
        for _ in 0..3 {
            q.push(preset("quick"));
        }
        assert_eq!(ids(&q), ["j-1", "j-2", "j-3"]);
        q.move_to("j-3", 1).unwrap();
        assert_eq!(ids(&q), ["j-3", "j-1", "j-2"]);
        assert_eq!(q.view("j-3").unwrap().position, Some(1));
        q.move_to("j-3", 99).unwrap();
        assert_eq!(ids(&q), ["j-1", "j-2", "j-3"]);
        assert_eq!(q.next().unwrap().id, "j-1");
    }

    #[test]
    fn running_comes_first_and_only_queued_jobs_move_or_cancel() {
        let mut q = Queue::default();
        q.push(preset("quick"));
        q.push(preset("quick"));
        q.get_mut("j-2").unwrap().state = JobState::Running;
        assert_eq!(ids(&q), ["j-2", "j-1"]);
        assert!(q.next().is_none(), "one run at a time");
        assert!(matches!(q.move_to("j-2", 1), Err(QueueError::State { .. })));
        assert!(matches!(q.cancel("j-2"), Err(QueueError::State { .. })));
        assert!(matches!(q.cancel("j-9"), Err(QueueError::Unknown(_))));
        q.cancel("j-1").unwrap();
        assert_eq!(q.view("j-1").unwrap().state, JobState::Cancelled);
        assert_eq!(q.view("j-1").unwrap().position, None);
    }

    #[test]
    fn a_job_the_server_died_under_comes_back_first_as_a_resume() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("queue.json");
        let mut q = Queue::default();
        q.push(preset("quick"));
        q.push(preset("standard"));
        let j = q.get_mut("j-2").unwrap();
        j.state = JobState::Running;
        j.run = Some("20261125-000000-ab".into());
        q.child_pid = Some(4242);
        q.save(&path).unwrap();

        let mut back = Queue::load(&path).unwrap();
        assert_eq!(back.recover(), Some(4242));
        let list = back.list();
        assert_eq!(list[0].id, "j-2");
        assert_eq!(list[0].state, JobState::Queued);
        assert_eq!(list[0].spec.resume.as_deref(), Some("20261125-000000-ab"));
        assert_eq!(list[1].id, "j-1");
        assert_eq!(back.next().unwrap().id, "j-2");
    }

    #[test]
    fn a_job_without_a_run_yet_runs_again_from_its_spec() {
        let mut q = Queue::default();
        q.push(preset("quick"));
        q.get_mut("j-1").unwrap().state = JobState::Stopping;
        q.recover();
        let j = q.view("j-1").unwrap();
        assert_eq!(j.state, JobState::Queued);
        assert_eq!(j.spec, preset("quick"));
    }

    #[test]
    fn a_fleet_job_the_server_died_under_runs_again_on_its_hosts() {
        let mut q = Queue::default();
        let spec = JobSpec {
            preset: Some("quick".into()),
            hosts: vec![JobHost {
                name: "a".into(),
                address: "127.0.0.1:7878".into(),
                host_type: None,
            }],
            ..JobSpec::default()
        };
        q.push(spec.clone());
        let j = q.get_mut("j-1").unwrap();
        j.state = JobState::Running;
        j.run = Some("20261125-000000-ab".into());
        q.recover();
        let j = q.view("j-1").unwrap();
        assert_eq!(j.state, JobState::Queued);
        assert_eq!(j.spec, spec, "not a resume of one host's run here");
        assert_eq!(j.run, None);
    }

    #[test]
    fn no_file_is_an_empty_queue_and_a_torn_one_is_named() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("queue.json");
        assert!(Queue::load(&path).unwrap().list().is_empty());
        std::fs::write(&path, "{").unwrap();
        let e = Queue::load(&path).unwrap_err().to_string();
        assert!(e.contains("queue.json"), "{e}");
    }
}
