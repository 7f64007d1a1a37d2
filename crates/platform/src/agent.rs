//! Starting the agent inside a tenant: each platform starts `isobench agent` its own way
//! and returns an [`AgentConnection`], a byte stream to the agent plus the local process
//! that carries it (the agent itself, `docker run -i`, QEMU).

use std::fmt;
use std::io::{Read, Write};
use std::path::PathBuf;
use std::process::Child;
use std::time::Duration;

use anyhow::Result;
use serde::Serialize;

use crate::procs;

/// How a controller talks to an agent.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum Transport {
    /// The agent's standard input and output.
    Stdio,
    /// A unix socket.
    Unix,
    /// A virtio-serial port of a VM guest.
    VirtioSerial,
    /// TCP with a token.
    Tcp,
}

impl fmt::Display for Transport {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.pad(match self {
            Transport::Stdio => "stdio",
            Transport::Unix => "unix socket",
            Transport::VirtioSerial => "virtio-serial",
            Transport::Tcp => "tcp",
        })
    }
}

/// What a tenant needs to start the agent.
#[derive(Debug, Clone)]
pub struct AgentLaunch {
    /// The isobench binary on this host. Platforms that run local processes start it; those
    /// with their own root filesystem (`oci`, `vm`) carry a static copy instead.
    pub exe: PathBuf,
    /// The file the agent's standard error (or a guest's console) is appended to.
    pub log: PathBuf,
}

/// A started agent.
pub struct AgentConnection {
    /// Bytes from the agent.
    pub reader: Box<dyn Read + Send>,
    /// Bytes to the agent.
    pub writer: Box<dyn Write + Send>,
    /// How the bytes travel.
    pub transport: Transport,
    /// The local process behind the connection, ended by [`AgentConnection::close`].
    process: Option<Child>,
}

impl fmt::Debug for AgentConnection {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("AgentConnection")
            .field("transport", &self.transport)
            .field("process", &self.process.as_ref().map(Child::id))
            .finish_non_exhaustive()
    }
}

impl AgentConnection {
    /// A connection over any stream; `process` (if any) is ended with it.
    pub fn new(
        reader: impl Read + Send + 'static,
        writer: impl Write + Send + 'static,
        transport: Transport,
        process: Option<Child>,
    ) -> AgentConnection {
        AgentConnection {
            reader: Box::new(reader),
            writer: Box::new(writer),
            transport,
            process,
        }
    }

    /// A connection over the standard input and output of `child` (spawned with both piped).
    pub fn stdio(mut child: Child) -> Result<AgentConnection> {
        let (Some(stdin), Some(stdout)) = (child.stdin.take(), child.stdout.take()) else {
            let _ = child.kill();
            let _ = child.wait();
            anyhow::bail!("the agent process was started without piped stdin and stdout");
        };
        Ok(AgentConnection::new(
            stdout,
            stdin,
            Transport::Stdio,
            Some(child),
        ))
    }

    /// Takes the stream out, leaving the process to [`close`](Self::close) later.
    pub fn split(self) -> (Box<dyn Read + Send>, Box<dyn Write + Send>, AgentProcess) {
        (
            self.reader,
            self.writer,
            AgentProcess {
                transport: self.transport,
                process: self.process,
            },
        )
    }
}

/// The local process behind an agent connection, once the stream has been taken.
#[derive(Debug)]
pub struct AgentProcess {
    /// How the bytes travel.
    pub transport: Transport,
    process: Option<Child>,
}

impl AgentProcess {
    /// The local process id, if there is one.
    pub fn id(&self) -> Option<u32> {
        self.process.as_ref().map(Child::id)
    }

    /// Whether the local process has exited (always false without one).
    pub fn exited(&mut self) -> bool {
        self.process
            .as_mut()
            .is_some_and(|c| matches!(c.try_wait(), Ok(Some(_))))
    }

    /// Waits up to `grace` for the process to exit, then kills it.
    pub fn close(&mut self, grace: Duration) {
        if let Some(c) = self.process.as_mut() {
            procs::wait_or_kill(c, grace);
        }
    }

    /// Kills the process now and reaps it.
    pub fn kill(&mut self) {
        if let Some(c) = self.process.as_mut() {
            let _ = c.kill();
            procs::wait_or_kill(c, Duration::from_secs(5));
        }
    }
}
