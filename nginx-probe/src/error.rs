//! Typed errors. Each one renders as a single line that says what to do; `main` maps
//! them to exit codes (see [`ProbeError::exit_code`]).

use thiserror::Error;

/// Exit code for bad input: wrong pid, not root, bad option. Nothing was attached.
pub const EXIT_USAGE: i32 = 2;
/// Exit code for a failure after validation: eBPF load or attach failed, map errors.
pub const EXIT_RUNTIME: i32 = 1;

/// Everything nginx-probe can fail with.
#[derive(Debug, Error)]
pub enum ProbeError {
    /// `--pid` names no live process.
    #[error("no process with pid {0}: it is not running (check `pgrep -af 'nginx: master'`)")]
    NoSuchProcess(u32),
    /// `--pid` names a process that has exited but was not reaped yet.
    #[error("pid {0} has exited (a zombie not yet reaped by its parent): pass the pid of a running nginx master")]
    Zombie(u32),
    /// `--pid` names an nginx worker.
    #[error("pid {pid} is an nginx worker, not the master: run with --pid {master}")]
    IsWorker { pid: u32, master: u32 },
    /// `--pid` names something that is not an nginx master.
    #[error("pid {pid} is {what}: pass the pid of an nginx master process (nginx's pid file, or `pgrep -af 'nginx: master'`)")]
    NotMaster { pid: u32, what: String },
    /// `--pid` names an nginx that runs without a master (`master_process off`).
    #[error("pid {pid} is nginx without a master process (`{title}`, master_process off?): nginx-probe follows a master's workers; run nginx with master_process on")]
    NoMasterProcess { pid: u32, title: String },
    /// Options that contradict each other.
    #[error("{0}")]
    Usage(String),
    /// The `--listen` address cannot be listened on (busy, not an address of this host,
    /// a privileged port).
    #[error("--listen {addr}: cannot listen there ({source}): choose a free port or an address of this host")]
    Listen {
        addr: std::net::SocketAddr,
        source: std::io::Error,
    },
    /// Not running as root.
    #[error("nginx-probe must run as root to load eBPF programs: run it as root (for example with sudo)")]
    NotRoot,
    /// tracefs is not mounted and could not be mounted.
    #[error("tracefs is not mounted and mounting it at /sys/kernel/tracing failed: {0} (mount it with `mount -t tracefs tracefs /sys/kernel/tracing`)")]
    Tracefs(String),
    /// The kernel lacks a feature the programs need (see [`crate::collect::kernel`]).
    #[error("{0}")]
    Kernel(String),
    /// No nginx master was found without `--pid`, or several were.
    #[error("{0}")]
    Discovery(String),
    /// None of the syscall tracepoints could be attached.
    #[error("no syscall tracepoint could be attached (is CONFIG_FTRACE_SYSCALLS enabled?): {0}")]
    NothingAttached(String),
    /// Loading the eBPF object failed.
    #[error("loading the eBPF programs failed: {0}")]
    Ebpf(#[from] aya::EbpfError),
    /// A program failed to load or attach.
    #[error("eBPF program error: {0}")]
    Program(#[from] aya::programs::ProgramError),
    /// Reading or writing a map failed.
    #[error("eBPF map error: {0}")]
    Map(#[from] aya::maps::MapError),
    /// The eBPF object lacks a map or program this binary expects (a build mismatch).
    #[error("the embedded eBPF object has no {0}: rebuild nginx-probe")]
    Missing(String),
    /// A recording could not be read (`report`, `compare`).
    #[error("{0}")]
    Recording(#[from] RecordingError),
    /// The `--record` file stopped being written during the run (the live report and
    /// the summary on stdout are complete).
    #[error("the recording is incomplete: {0} (the report above is complete)")]
    RecordIncomplete(String),
    /// Reading `/proc` failed for a reason other than the process being gone (EMFILE,
    /// ENFILE, EACCES, ENOMEM): the process may well be alive, so nothing is concluded.
    #[error(
        "cannot read {path}: {source} (the process may be running; nothing was concluded from it)"
    )]
    Proc {
        path: String,
        source: std::io::Error,
    },
    /// nginx-probe's own open-file limit ran out (see `collect::fd_limit`).
    #[error("{0}")]
    FdLimit(String),
    /// Writing the report failed.
    #[error("writing the report failed: {0}")]
    Io(#[from] std::io::Error),
}

impl ProbeError {
    /// The process exit code for this error: [`EXIT_USAGE`] when the input was wrong
    /// (nothing attached), [`EXIT_RUNTIME`] otherwise.
    pub fn exit_code(&self) -> i32 {
        match self {
            ProbeError::NoSuchProcess(_)
            | ProbeError::Zombie(_)
            | ProbeError::IsWorker { .. }
            | ProbeError::NotMaster { .. }
            | ProbeError::NoMasterProcess { .. }
            | ProbeError::Usage(_)
            | ProbeError::Recording(_)
            | ProbeError::Listen { .. }
            | ProbeError::Discovery(_)
            | ProbeError::NotRoot => EXIT_USAGE,
            _ => EXIT_RUNTIME,
        }
    }
}

use crate::model::SCHEMA_VERSION;

/// Why a recording could not be read. Each renders as one line.
#[derive(Debug, thiserror::Error)]
pub enum RecordingError {
    /// The file could not be read.
    #[error("cannot read {path}: {source}")]
    Read {
        path: String,
        source: std::io::Error,
    },
    /// A line is not a report of this schema.
    #[error("{path}:{line}: not an nginx-probe recording line ({reason})")]
    BadLine {
        path: String,
        line: usize,
        reason: String,
    },
    /// Written by a newer nginx-probe.
    #[error("{path}: recorded with schema {found}, this nginx-probe reads schema {SCHEMA_VERSION}: use a newer nginx-probe")]
    Schema { path: String, found: u64 },
    /// No report in the file.
    #[error("{path}: no reports in it (an empty recording, or not a recording)")]
    Empty { path: String },
}
