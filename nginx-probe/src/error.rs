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
    IsWorker {
        /// The pid given.
        pid: u32,
        /// Its master's pid (`/proc/<pid>/stat` ppid).
        master: u32,
    },
    /// `--pid` names something that is not an nginx master.
    #[error("pid {pid} is {what}: pass the pid of an nginx master process (nginx's pid file, or `pgrep -af 'nginx: master'`)")]
    NotMaster {
        /// The pid given.
        pid: u32,
        /// What it is (its name or title, escaped and bounded).
        what: String,
    },
    /// `--pid` names an nginx that runs without a master (`master_process off`).
    #[error("pid {pid} is nginx without a master process (`{title}`, master_process off?): nginx-probe follows a master's workers; run nginx with master_process on")]
    NoMasterProcess {
        /// The pid given.
        pid: u32,
        /// Its process title (`/proc/<pid>/cmdline`, escaped and bounded).
        title: String,
    },
    /// Bad arguments: options that contradict each other, `compare`'s paths, an output
    /// path that cannot be written (the kind in [`UsageError`]).
    #[error(transparent)]
    Usage(#[from] UsageError),
    /// The `--listen` address cannot be listened on (busy, not an address of this host,
    /// a privileged port).
    #[error("--listen {addr}: cannot listen there ({source}): choose a free port or an address of this host")]
    Listen {
        /// The address given.
        addr: std::net::SocketAddr,
        /// bind(2)'s or listen(2)'s error.
        source: std::io::Error,
    },
    /// Not running as root.
    #[error("nginx-probe must run as root to load eBPF programs: run it as root (for example with sudo)")]
    NotRoot,
    /// The kernel cannot run the programs: tracefs, syscall tracepoints or a BPF
    /// feature missing (checked by `collect::kernel::check` and
    /// `collect::tracefs::ensure_mounted`).
    #[error(transparent)]
    Kernel(#[from] KernelError),
    /// No nginx master was found without `--pid`, or several were, or `--pid-file`
    /// names none (`collect::discover::find_master`).
    #[error(transparent)]
    Discovery(#[from] DiscoveryError),
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
        /// The `/proc` file.
        path: String,
        /// The read's error.
        source: std::io::Error,
    },
    /// nginx-probe's own open-file limit ran out (the one-line message names the limit
    /// and what ran out of fds; built by `collect::fd_limit`, named here without a link:
    /// errors sit below collect).
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

/// Why the arguments cannot be used. Each renders as one line; all are bad input (exit
/// code 2), found before anything is attached or written.
#[derive(Debug, Error)]
pub enum UsageError {
    /// Options that contradict each other (the line names them and what to do).
    #[error("{0}")]
    Conflict(&'static str),
    /// `--hist` of a syscall that is not traced.
    #[error("--hist {syscall}: {syscall} is not traced; add it with --syscalls all (or a list naming it)")]
    HistNotTraced {
        /// The syscall named by `--hist`.
        syscall: String,
    },
    /// `--detail-window`/`--detail-every` that make no schedule (the model's reason).
    #[error("{0}")]
    Schedule(String),
    /// `compare` given neither two paths nor `--` between its sides.
    #[error("compare takes BEFORE AFTER, or the runs of BEFORE, `--`, then the runs of AFTER ({given} paths given without `--`)")]
    CompareSides {
        /// How many paths were given.
        given: usize,
    },
    /// A `compare` side is a directory without recordings.
    #[error("{dir}: a directory with no *.jsonl recording in it")]
    NoRecordingsIn {
        /// The directory, as given.
        dir: String,
    },
    /// More runs on one side of `compare` than it reads.
    #[error("more than {max} runs on one side of compare")]
    TooManyRuns {
        /// The most runs a side may hold.
        max: usize,
    },
    /// `--record FILE` is a directory.
    #[error("--record {path}: it is a directory: give the path of a new file in it")]
    RecordIsDirectory {
        /// The path, as given.
        path: String,
    },
    /// `--record FILE` exists: a recording is never overwritten.
    #[error("--record {path}: it exists, and a recording is never overwritten: choose a new name or remove it")]
    RecordExists {
        /// The path, as given.
        path: String,
    },
    /// `--record FILE` is not a path a file can be made at (a device node, FIFO,
    /// socket): what it is.
    #[error("--record {path}: {what}: give the path of a new file")]
    RecordNotAFile {
        /// The path, as given.
        path: String,
        /// What is there instead.
        what: String,
    },
    /// `--record FILE` cannot be written (no directory, no permission, a full disk).
    #[error("--record {path}: cannot write it ({reason}): choose a writable path with free space")]
    RecordUnwritable {
        /// The path, as given.
        path: String,
        /// The write's error.
        reason: std::io::Error,
    },
    /// An output file of another option (`--html`) cannot be written or replaced.
    #[error("{flag} {path}: cannot write it ({reason}): choose a writable file path")]
    OutputUnwritable {
        /// The option that gave the path.
        flag: String,
        /// The path, as given.
        path: String,
        /// Why: the write's error, or what is at the path.
        reason: String,
    },
}

/// Why the kernel cannot run nginx-probe's programs. Each renders as one line that says
/// what to do.
#[derive(Debug, Error)]
pub enum KernelError {
    /// tracefs is not mounted and mounting it failed: why (the mount's errno text, or
    /// what was missing after it).
    #[error("tracefs is not mounted and mounting it at /sys/kernel/tracing failed: {0} (mount it with `mount -t tracefs tracefs /sys/kernel/tracing`)")]
    TracefsMount(String),
    /// The syscall tracepoints are missing: `events` (the tracefs directory looked in)
    /// has no `sys_enter_accept4`/`sys_exit_accept4`.
    #[error("syscall tracepoints are missing ({events} has no sys_enter_accept4/sys_exit_accept4): the kernel needs CONFIG_FTRACE_SYSCALLS")]
    NoSyscallTracepoints {
        /// The tracefs `events/syscalls` directory looked in.
        events: String,
    },
    /// bpf(2) returned EPERM creating a map.
    #[error("BPF is not permitted here (bpf(2) returned EPERM: run as root, outside a container that filters bpf(2), and check kernel lockdown); nginx-probe needs Linux {}.{} or later", .min_kernel.0, .min_kernel.1)]
    BpfNotPermitted {
        /// The oldest kernel the programs load on (major, minor).
        min_kernel: (u32, u32),
    },
    /// bpf(2) returned ENOSYS.
    #[error("the kernel has no bpf(2) (CONFIG_BPF_SYSCALL); nginx-probe needs Linux {}.{} or later", .min_kernel.0, .min_kernel.1)]
    NoBpfSyscall {
        /// The oldest kernel the programs load on (major, minor).
        min_kernel: (u32, u32),
    },
    /// Creating a map of a kind the programs use failed for another reason.
    #[error("the kernel lacks {feature} ({source}); nginx-probe needs Linux {}.{} or later", .min_kernel.0, .min_kernel.1)]
    MissingFeature {
        /// The feature and the kernel that brought it (`BPF LRU hash maps (Linux
        /// 4.10)`).
        feature: &'static str,
        /// bpf(2)'s error creating the map.
        source: std::io::Error,
        /// The oldest kernel the programs load on (major, minor).
        min_kernel: (u32, u32),
    },
}

/// Why no nginx master could be chosen without `--pid`. Each renders as one line; all
/// are bad input (exit code 2).
#[derive(Debug, Error)]
pub enum DiscoveryError {
    /// `--pid-file` names a pid that is not an nginx master to trace; with
    /// `container_hint`, the line adds that a container's pid file holds the pid in its
    /// own namespace.
    #[error("--pid-file {path}: {source}{}", container_hint_text(*.container_hint))]
    PidFileNotMaster {
        /// The pid file, as given.
        path: String,
        /// Why its pid is not a master to trace.
        source: Box<ProbeError>,
        /// Whether the pid may be a container's (it names no process, or no nginx).
        container_hint: bool,
    },
    /// `--pid-file` holds no pid.
    #[error("--pid-file {path}: cannot read a pid from it ({reason})")]
    PidFileUnreadable {
        /// The pid file, as given.
        path: String,
        /// Why no pid was read (the read error, or what the file holds).
        reason: String,
    },
    /// The default pid file names no master and /proc has none.
    #[error("no nginx master found ({pid_file} names none, and /proc has none): start nginx, or pass --pid or --pid-file")]
    NoMaster {
        /// The default pid file looked at.
        pid_file: String,
    },
    /// Several masters run: each as `pid `title`` (the title escaped and bounded).
    #[error("{} nginx masters are running, choose one with --pid: {}", .masters.len(), .masters.join(", "))]
    SeveralMasters {
        /// Each master, `pid `title``.
        masters: Vec<String>,
    },
}

/// What a `--pid-file` error adds when the pid may be a container's.
pub const CONTAINER_PID_HINT: &str = "pid files written inside a container hold the pid in its namespace; pass the host pid with --pid (find it with `pgrep -af 'nginx: master'`)";

/// The text [`DiscoveryError::PidFileNotMaster`] ends with: the container hint in
/// parentheses, or nothing.
fn container_hint_text(hint: bool) -> String {
    if hint {
        format!(" ({CONTAINER_PID_HINT})")
    } else {
        String::new()
    }
}

use crate::model::SCHEMA_VERSION;

/// Why a recording could not be read. Each renders as one line.
#[derive(Debug, thiserror::Error)]
pub enum RecordingError {
    /// The file could not be read.
    #[error("cannot read {path}: {source}")]
    Read {
        /// The recording, as given.
        path: String,
        /// The read's error.
        source: std::io::Error,
    },
    /// A line is not a report of this schema.
    #[error("{path}:{line}: not an nginx-probe recording line ({reason})")]
    BadLine {
        /// The recording, as given.
        path: String,
        /// The line's number, from 1.
        line: usize,
        /// Why it is not a report (the JSON parser's words, or the bound it broke).
        reason: String,
    },
    /// Written by a newer nginx-probe.
    #[error("{path}: recorded with schema {found}, this nginx-probe reads schema {SCHEMA_VERSION}: use a newer nginx-probe")]
    Schema {
        /// The recording, as given.
        path: String,
        /// The schema version it was recorded with.
        found: u64,
    },
    /// No report in the file.
    #[error("{path}: no reports in it ({})", if *.header { "a recording's header alone: the run ended, or was cut, before its first interval" } else { "an empty recording, or not a recording" })]
    Empty {
        /// The recording, as given.
        path: String,
        /// Whether it holds an nginx-probe recording's header.
        header: bool,
    },
    /// The file holds the reports of several nginx masters (an `--all --json` stdout,
    /// or an exporter's stdout across a restart) and none was chosen.
    #[error("{path} holds the reports of {count} nginx masters ({masters}): choose one with --master <PID>")]
    SeveralMasters {
        /// The recording, as given.
        path: String,
        /// How many masters' reports it holds.
        count: usize,
        /// Their pids, as the reports' `master_pid` gives them (the first ones).
        masters: String,
    },
    /// `--master` names a master whose reports the file does not hold.
    #[error("{path} holds no report of nginx master {master} (it holds {masters})")]
    NoSuchMaster {
        /// The recording, as given.
        path: String,
        /// The pid asked for with `--master`.
        master: u32,
        /// The pids it holds.
        masters: String,
    },
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn typed_kinds_keep_their_one_line_messages_and_exit_codes() {
        let e = ProbeError::from(DiscoveryError::SeveralMasters {
            masters: vec!["10 `nginx: master`".into(), "20 `nginx: master`".into()],
        });
        assert_eq!(
            e.to_string(),
            "2 nginx masters are running, choose one with --pid: 10 `nginx: master`, 20 `nginx: master`"
        );
        assert_eq!(e.exit_code(), EXIT_USAGE);
        let e = ProbeError::from(DiscoveryError::PidFileNotMaster {
            path: "/run/nginx.pid".into(),
            source: Box::new(ProbeError::NoSuchProcess(7)),
            container_hint: true,
        });
        assert_eq!(
            e.to_string(),
            format!("--pid-file /run/nginx.pid: no process with pid 7: it is not running (check `pgrep -af 'nginx: master'`) ({CONTAINER_PID_HINT})")
        );
        let e = ProbeError::from(KernelError::MissingFeature {
            feature: "BPF stack maps (Linux 4.20)",
            source: std::io::Error::from_raw_os_error(libc::EINVAL),
            min_kernel: (5, 2),
        });
        assert_eq!(
            e.to_string(),
            "the kernel lacks BPF stack maps (Linux 4.20) (Invalid argument (os error 22)); nginx-probe needs Linux 5.2 or later"
        );
        assert_eq!(e.exit_code(), EXIT_RUNTIME);
        let e = ProbeError::from(KernelError::TracefsMount(
            "EPERM: Operation not permitted".into(),
        ));
        assert_eq!(
            e.to_string(),
            "tracefs is not mounted and mounting it at /sys/kernel/tracing failed: EPERM: Operation not permitted (mount it with `mount -t tracefs tracefs /sys/kernel/tracing`)"
        );
        assert_eq!(e.exit_code(), EXIT_RUNTIME);
    }
}
