//! Test fixtures for nginx-probe: a throwaway nginx ([`Nginx`]) whose `Drop` stops it,
//! a running probe ([`ProbeRun`]) whose `Drop` kills it, and small exact-count HTTP
//! clients. Used by the integration tests in `tests/` and by `cargo xtask demo`.
//!
//! Everything here panics on failure: a fixture that cannot do its job is a test failure.

use std::{
    fs,
    io::{BufRead, BufReader, Read, Write},
    net::{SocketAddr, TcpListener, TcpStream},
    os::unix::{fs::PermissionsExt, process::CommandExt},
    path::{Path, PathBuf},
    process::{Child, Command, ExitStatus, Stdio},
    sync::mpsc,
    time::{Duration, Instant},
};

use nix::{
    sys::signal::{kill, Signal},
    unistd::Pid,
};

/// Body of the static file every fixture nginx serves at `/` (30 bytes, as in the seeds'
/// benchmarks).
pub const INDEX_BODY: &str = "nginx-probe test page, 30 b.\n\n";

/// How to start a throwaway nginx.
#[derive(Clone, Debug)]
pub struct NginxConfig {
    /// `worker_processes`.
    pub workers: u32,
    /// `worker_connections`.
    pub worker_connections: u32,
    /// Soft and hard `RLIMIT_NOFILE` the master (and so its workers) start with;
    /// None keeps ours.
    pub nofile: Option<(u64, u64)>,
    /// Extra lines at the top level (e.g. `worker_rlimit_nofile 4096;`).
    pub main_extra: String,
    /// Extra lines inside `events { }`.
    pub events_extra: String,
    /// Extra lines inside `http { }` (e.g. `access_log off;`).
    pub http_extra: String,
    /// Extra parameters after `listen 127.0.0.1:PORT` (e.g. `reuseport`).
    pub listen_extra: String,
    /// `access_log` setting: None writes `<prefix>/logs/access.log` unbuffered.
    pub access_log: Option<String>,
    /// `sendfile on` (the default here, as in Debian's nginx.conf) or `off`.
    pub sendfile: bool,
    /// Start nginx in its own pid namespace (`unshare --pid --fork --mount-proc`), as
    /// in a container: the master is pid 1 inside.
    pub pid_namespace: bool,
    /// `daemon on`: nginx forks away from us (needed for a binary upgrade, which nginx
    /// refuses while its original parent is alive). The master pid comes from the pid
    /// file.
    pub daemon: bool,
}

impl Default for NginxConfig {
    fn default() -> Self {
        NginxConfig {
            workers: 2,
            worker_connections: 1024,
            nofile: None,
            main_extra: String::new(),
            events_extra: String::new(),
            http_extra: String::new(),
            listen_extra: String::new(),
            access_log: None,
            sendfile: true,
            pid_namespace: false,
            daemon: false,
        }
    }
}

/// A throwaway nginx: generated config in a temporary prefix, listening on 127.0.0.1 on
/// a free port, run in the foreground (`daemon off`) as our child. Dropping it stops
/// nginx (SIGTERM, then SIGKILL) and removes the prefix.
pub struct Nginx {
    child: Option<Child>,
    /// The temporary prefix (config, html, logs).
    pub prefix: PathBuf,
    _dir: tempfile::TempDir,
    /// The port nginx listens on.
    pub port: u16,
    in_namespace: bool,
    daemon_master: Option<u32>,
}

/// Returns a TCP port on 127.0.0.1 that was free a moment ago.
pub fn free_port() -> u16 {
    let l = TcpListener::bind("127.0.0.1:0").expect("bind 127.0.0.1:0");
    l.local_addr().expect("local_addr").port()
}

fn nginx_binary() -> String {
    std::env::var("NGINX_BIN").unwrap_or_else(|_| "/usr/sbin/nginx".into())
}

impl Nginx {
    /// Starts nginx with `cfg` and waits until it answers on its port and all its
    /// workers exist. Retries with another port if the chosen one was taken meanwhile.
    pub fn start(cfg: &NginxConfig) -> Nginx {
        for _ in 0..4 {
            if let Some(ng) = Nginx::try_start(cfg) {
                return ng;
            }
        }
        panic!("nginx could not bind a free port in 4 attempts");
    }

    fn try_start(cfg: &NginxConfig) -> Option<Nginx> {
        let dir = tempfile::Builder::new()
            .prefix("nginx-probe-")
            .tempdir()
            .expect("create temp prefix");
        let prefix = dir.path().to_path_buf();
        // Workers run as `nobody`: they must be able to read the prefix.
        fs::set_permissions(&prefix, fs::Permissions::from_mode(0o755)).expect("chmod prefix");
        for d in ["html", "logs", "tmp"] {
            fs::create_dir_all(prefix.join(d)).expect("mkdir");
            fs::set_permissions(prefix.join(d), fs::Permissions::from_mode(0o755)).expect("chmod");
        }
        fs::write(prefix.join("html/index.html"), INDEX_BODY).expect("write index");
        let port = free_port();
        let p = prefix.display();
        let access_log = match &cfg.access_log {
            None => format!("access_log {p}/logs/access.log;"),
            Some(s) if s == "off" => "access_log off;".to_string(),
            Some(s) => format!("access_log {p}/logs/access.log {s};"),
        };
        let conf = format!(
            "worker_processes {workers};
daemon {daemon};
pid {p}/logs/nginx.pid;
error_log {p}/logs/error.log warn;
{main_extra}
events {{
    worker_connections {wc};
    {events_extra}
}}
http {{
    {access_log}
    client_body_temp_path {p}/tmp/body;
    proxy_temp_path {p}/tmp/proxy;
    fastcgi_temp_path {p}/tmp/fastcgi;
    uwsgi_temp_path {p}/tmp/uwsgi;
    scgi_temp_path {p}/tmp/scgi;
    sendfile {sendfile};
    {http_extra}
    server {{
        listen 127.0.0.1:{port} {listen_extra};
        root {p}/html;
    }}
}}
",
            workers = cfg.workers,
            daemon = if cfg.daemon { "on" } else { "off" },
            wc = cfg.worker_connections,
            events_extra = cfg.events_extra,
            main_extra = cfg.main_extra,
            http_extra = cfg.http_extra,
            sendfile = if cfg.sendfile { "on" } else { "off" },
            listen_extra = cfg.listen_extra,
        );
        fs::write(prefix.join("nginx.conf"), conf).expect("write nginx.conf");
        let mut cmd = if cfg.pid_namespace {
            let mut c = Command::new("unshare");
            c.args(["--pid", "--fork", "--mount-proc", "--kill-child=SIGTERM"])
                .arg(nginx_binary());
            c
        } else {
            Command::new(nginx_binary())
        };
        cmd.arg("-p")
            .arg(&prefix)
            .arg("-e")
            .arg(prefix.join("logs/error.log"))
            .arg("-c")
            .arg(prefix.join("nginx.conf"))
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::piped());
        if let Some((soft, hard)) = cfg.nofile {
            // SAFETY: setrlimit is async-signal-safe; nothing else runs between fork and exec.
            unsafe {
                cmd.pre_exec(move || {
                    nix::sys::resource::setrlimit(
                        nix::sys::resource::Resource::RLIMIT_NOFILE,
                        soft,
                        hard,
                    )
                    .map_err(std::io::Error::from)
                });
            }
        }
        // Own process group: a Ctrl-C at the terminal does not reach nginx; Drop stops it.
        cmd.process_group(0);
        let child = cmd
            .spawn()
            .expect("spawn nginx (is it installed? run `cargo xtask setup`)");
        let mut ng = Nginx {
            child: Some(child),
            prefix,
            _dir: dir,
            port,
            in_namespace: cfg.pid_namespace,
            daemon_master: None,
        };
        if cfg.daemon {
            let mut child = ng.child.take().expect("child");
            let status = child.wait().expect("wait for nginx to daemonize");
            if !status.success() {
                let mut err = String::new();
                if let Some(mut e) = child.stderr.take() {
                    let _ = e.read_to_string(&mut err);
                }
                if err.contains("Address already in use") {
                    return None;
                }
                panic!("nginx failed to start as a daemon: {err}");
            }
            let pid = fs::read_to_string(ng.prefix.join("logs/nginx.pid"))
                .ok()
                .and_then(|s| s.trim().parse().ok())
                .expect("daemon pid file");
            ng.daemon_master = Some(pid);
        }
        if ng.wait_ready(cfg.workers as usize) {
            Some(ng)
        } else {
            None
        }
    }

    /// True when ready; false when nginx exited because its port was taken.
    fn wait_ready(&mut self, workers: usize) -> bool {
        let deadline = Instant::now() + Duration::from_secs(10);
        loop {
            if let Some(status) = self
                .child
                .as_mut()
                .and_then(|c| c.try_wait().ok().flatten())
            {
                let mut err = String::new();
                if let Some(mut e) = self.child.as_mut().and_then(|c| c.stderr.take()) {
                    let _ = e.read_to_string(&mut err);
                }
                let log =
                    fs::read_to_string(self.prefix.join("logs/error.log")).unwrap_or_default();
                if err.contains("Address already in use") || log.contains("Address already in use")
                {
                    self.child = None;
                    return false;
                }
                panic!("nginx exited at start ({status}): {err} {log}");
            }
            if self.master_pid() != 0
                && TcpStream::connect(self.addr()).is_ok()
                && self.worker_pids().len() == workers
            {
                return true;
            }
            assert!(
                Instant::now() < deadline,
                "nginx did not start listening on {}",
                self.port
            );
            std::thread::sleep(Duration::from_millis(20));
        }
    }

    /// 127.0.0.1:port.
    pub fn addr(&self) -> SocketAddr {
        SocketAddr::from(([127, 0, 0, 1], self.port))
    }

    /// `http://127.0.0.1:port/`.
    pub fn url(&self) -> String {
        format!("http://127.0.0.1:{}/", self.port)
    }

    /// The master's host pid (with a pid namespace: the child of `unshare`).
    pub fn master_pid(&self) -> u32 {
        if let Some(pid) = self.daemon_master {
            return pid;
        }
        let pid = self.child.as_ref().expect("nginx running").id();
        if self.in_namespace {
            children_of(pid).first().copied().unwrap_or(0)
        } else {
            pid
        }
    }

    /// Pids of the master's `nginx: worker process` children, sorted.
    pub fn worker_pids(&self) -> Vec<u32> {
        children_of(self.master_pid())
            .into_iter()
            .filter(|&pid| {
                fs::read_to_string(format!("/proc/{pid}/cmdline"))
                    .map(|c| c.starts_with("nginx: worker process"))
                    .unwrap_or(false)
            })
            .collect()
    }

    /// Opens `n` connections that send nothing and keeps them open (until dropped).
    pub fn hold_connections(&self, n: usize) -> Vec<TcpStream> {
        (0..n)
            .map(|_| TcpStream::connect(self.addr()).expect("connect"))
            .collect()
    }

    /// Holds `n` idle connections open for `secs`, then closes them.
    pub fn hold_for(&self, n: usize, secs: Duration) {
        let held = self.hold_connections(n);
        std::thread::sleep(secs);
        drop(held);
    }

    /// Contents of the error log.
    pub fn error_log(&self) -> String {
        fs::read_to_string(self.prefix.join("logs/error.log")).unwrap_or_default()
    }

    /// Stops nginx now (SIGTERM, then SIGKILL after 5 s). Idempotent.
    pub fn stop(&mut self) {
        if let Some(pid) = self.daemon_master.take() {
            let workers = children_of(pid);
            let _ = kill(Pid::from_raw(pid as i32), Signal::SIGTERM);
            let deadline = Instant::now() + Duration::from_secs(5);
            while Path::new(&format!("/proc/{pid}")).exists() && Instant::now() < deadline {
                std::thread::sleep(Duration::from_millis(20));
            }
            for p in workers.into_iter().chain([pid]) {
                let _ = kill(Pid::from_raw(p as i32), Signal::SIGKILL);
            }
        }
        if let Some(mut child) = self.child.take() {
            if self.in_namespace {
                // The master is pid 1 of its namespace: stop it directly.
                for pid in children_of(child.id()) {
                    let _ = kill(Pid::from_raw(pid as i32), Signal::SIGTERM);
                }
            }
            let _ = kill(Pid::from_raw(child.id() as i32), Signal::SIGTERM);
            let deadline = Instant::now() + Duration::from_secs(5);
            loop {
                match child.try_wait() {
                    Ok(Some(_)) | Err(_) => break,
                    Ok(None) if Instant::now() > deadline => {
                        let _ = child.kill();
                        let _ = child.wait();
                        break;
                    }
                    Ok(None) => std::thread::sleep(Duration::from_millis(20)),
                }
            }
        }
    }
}

impl Drop for Nginx {
    fn drop(&mut self) {
        self.stop();
    }
}

/// Pids whose parent is `ppid`, sorted, from `/proc/*/stat`.
pub fn children_of(ppid: u32) -> Vec<u32> {
    let mut out = Vec::new();
    let Ok(rd) = fs::read_dir("/proc") else {
        return out;
    };
    for e in rd.flatten() {
        let Some(pid) = e.file_name().to_str().and_then(|s| s.parse::<u32>().ok()) else {
            continue;
        };
        let Ok(stat) = fs::read_to_string(format!("/proc/{pid}/stat")) else {
            continue;
        };
        // comm may hold spaces and parentheses: the fields start after the last ')'.
        let Some(rest) = stat.rfind(')').map(|i| &stat[i + 1..]) else {
            continue;
        };
        let fields: Vec<&str> = rest.split_whitespace().collect();
        if fields.get(1).and_then(|p| p.parse::<u32>().ok()) == Some(ppid) {
            out.push(pid);
        }
    }
    out.sort_unstable();
    out
}

/// Sends one `GET /` on a new connection with `Connection: close` and reads the whole
/// response; `n` times, one after the other. Returns the number of 200 responses.
pub fn one_request_per_connection(addr: SocketAddr, n: usize) -> usize {
    let mut ok = 0;
    for _ in 0..n {
        let mut s = TcpStream::connect(addr).expect("connect");
        s.write_all(b"GET / HTTP/1.1\r\nHost: test\r\nConnection: close\r\n\r\n")
            .expect("send");
        let mut resp = Vec::new();
        s.read_to_end(&mut resp).expect("read response");
        if resp.starts_with(b"HTTP/1.1 200") {
            ok += 1;
        }
    }
    ok
}

/// Like [`one_request_per_connection`], but loops until `stop` is set; returns the
/// number of connections that completed a 200 response. Connections that fail are
/// not counted (and make the caller's exact totals wrong, so they panic).
pub fn one_request_per_connection_until(
    addr: SocketAddr,
    stop: &std::sync::atomic::AtomicBool,
) -> usize {
    let mut n = 0;
    while !stop.load(std::sync::atomic::Ordering::Relaxed) {
        n += one_request_per_connection(addr, 1);
    }
    n
}

/// Reads one HTTP/1.1 response (status line, headers, Content-Length body) from `c`.
/// Returns (status was 200, nginx said `Connection: close`); None if the connection
/// ended before a status line.
fn read_response(c: &mut BufReader<TcpStream>) -> Option<(bool, bool)> {
    let mut status = String::new();
    c.read_line(&mut status).expect("status line");
    if status.is_empty() {
        return None;
    }
    let mut len = 0usize;
    let mut close = false;
    loop {
        let mut line = String::new();
        c.read_line(&mut line).expect("header");
        if line == "\r\n" || line.is_empty() {
            break;
        }
        let lower = line.to_ascii_lowercase();
        if let Some(v) = lower.strip_prefix("content-length:") {
            len = v.trim().parse().expect("content-length");
        }
        if lower.starts_with("connection:") && lower.contains("close") {
            close = true;
        }
    }
    let mut body = vec![0u8; len];
    c.read_exact(&mut body).expect("body");
    Some((status.starts_with("HTTP/1.1 200"), close))
}

/// Sends `requests` `GET /` one after the other as a browser would: on one keepalive
/// connection for as long as nginx keeps it open, on a new one after a response that
/// says `Connection: close`. Returns (200 responses, connections opened): with
/// `keepalive_timeout 0` every request opens one, otherwise one connection carries up
/// to `keepalive_requests` requests.
pub fn requests_reusing_connections(addr: SocketAddr, requests: usize) -> (usize, usize) {
    let mut ok = 0;
    let mut opened = 0;
    let mut conn: Option<BufReader<TcpStream>> = None;
    for _ in 0..requests {
        let c = conn.get_or_insert_with(|| {
            opened += 1;
            BufReader::new(TcpStream::connect(addr).expect("connect"))
        });
        c.get_mut()
            .write_all(b"GET / HTTP/1.1\r\nHost: test\r\n\r\n")
            .expect("send");
        let (is_200, close) = read_response(c).expect("nginx closed before answering");
        if is_200 {
            ok += 1;
        }
        if close {
            conn = None;
        }
    }
    (ok, opened)
}

/// Opens `connections` keepalive connections and sends `requests_each` requests on each,
/// reading every response fully (Content-Length). Returns the number of 200 responses.
/// Panics if nginx closes a connection early.
pub fn keepalive_requests(addr: SocketAddr, connections: usize, requests_each: usize) -> usize {
    let mut ok = 0;
    let mut conns: Vec<BufReader<TcpStream>> = (0..connections)
        .map(|_| BufReader::new(TcpStream::connect(addr).expect("connect")))
        .collect();
    for _ in 0..requests_each {
        for c in conns.iter_mut() {
            c.get_mut()
                .write_all(b"GET / HTTP/1.1\r\nHost: test\r\n\r\n")
                .expect("send");
            let (is_200, _) = read_response(c).expect("nginx closed a keepalive connection");
            if is_200 {
                ok += 1;
            }
        }
    }
    ok
}

/// Path of the nginx-probe binary under test: `$NGINX_PROBE_BIN`, else the workspace's
/// `target/release/nginx-probe` (what `cargo xtask test` builds).
pub fn probe_binary() -> PathBuf {
    if let Ok(p) = std::env::var("NGINX_PROBE_BIN") {
        return PathBuf::from(p);
    }
    let p = Path::new(env!("CARGO_MANIFEST_DIR")).join("../target/release/nginx-probe");
    assert!(
        p.exists(),
        "{} not found: run the tests with `cargo xtask test`",
        p.display()
    );
    p
}

/// A running nginx-probe, started with [`ProbeRun::start`] and ready (its banner seen).
/// Dropping it kills it.
pub struct ProbeRun {
    child: Option<Child>,
    stderr_lines: mpsc::Receiver<String>,
    /// stderr lines read so far.
    pub stderr: Vec<String>,
}

/// What a finished probe run produced.
#[derive(Debug)]
pub struct ProbeOutput {
    /// Exit status.
    pub status: ExitStatus,
    /// Everything written to stdout.
    pub stdout: String,
    /// Everything written to stderr.
    pub stderr: String,
}

impl ProbeOutput {
    /// The last stdout line parsed as JSON (the summary with `--json`).
    pub fn summary_json(&self) -> serde_json::Value {
        let line = self
            .stdout
            .lines()
            .rev()
            .find(|l| !l.trim().is_empty())
            .unwrap_or_else(|| panic!("no JSON on stdout; stderr: {}", self.stderr));
        serde_json::from_str(line).unwrap_or_else(|e| panic!("bad JSON ({e}): {line}"))
    }
}

impl ProbeRun {
    /// Starts `nginx-probe <args>` and waits (up to 30 s) until it prints its
    /// "Hit Ctrl-C to end." banner, i.e. until its tracepoints are attached.
    pub fn start(args: &[&str]) -> ProbeRun {
        ProbeRun::start_with_binary(&probe_binary(), args)
    }

    /// Like [`ProbeRun::start`] with an explicit nginx-probe binary (for `cargo xtask`,
    /// which builds it).
    pub fn start_with_binary(binary: &Path, args: &[&str]) -> ProbeRun {
        ProbeRun::spawn(binary, args, Stdio::piped())
    }

    fn spawn(binary: &Path, args: &[&str], stdout: Stdio) -> ProbeRun {
        let mut child = Command::new(binary)
            .args(args)
            .env("RUST_LOG", "warn")
            .stdin(Stdio::null())
            .stdout(stdout)
            .stderr(Stdio::piped())
            .spawn()
            .expect("spawn nginx-probe");
        let stderr = child.stderr.take().expect("stderr");
        let (tx, rx) = mpsc::channel();
        std::thread::spawn(move || {
            for line in BufReader::new(stderr).lines().map_while(Result::ok) {
                if tx.send(line).is_err() {
                    break;
                }
            }
        });
        let mut run = ProbeRun {
            child: Some(child),
            stderr_lines: rx,
            stderr: Vec::new(),
        };
        let deadline = Instant::now() + Duration::from_secs(30);
        loop {
            match run.stderr_lines.recv_timeout(Duration::from_millis(100)) {
                Ok(line) => {
                    let ready = line.contains("Hit Ctrl-C to end.");
                    run.stderr.push(line);
                    if ready {
                        return run;
                    }
                }
                Err(mpsc::RecvTimeoutError::Timeout) => {}
                Err(mpsc::RecvTimeoutError::Disconnected) => {
                    let out = run.wait();
                    panic!("nginx-probe exited before attaching: {out:?}");
                }
            }
            assert!(
                Instant::now() < deadline,
                "nginx-probe did not attach in 30 s: {:?}",
                run.stderr
            );
        }
    }

    /// The probe's pid.
    pub fn pid(&self) -> u32 {
        self.child.as_ref().expect("running").id()
    }

    /// Sends `sig` (SIGINT for Ctrl-C, SIGTERM) and waits for the probe to exit.
    pub fn stop_with(mut self, sig: Signal) -> ProbeOutput {
        let _ = kill(Pid::from_raw(self.pid() as i32), sig);
        self.wait()
    }

    /// Waits for the probe to exit (for runs with `--duration`).
    pub fn wait(&mut self) -> ProbeOutput {
        let mut child = self.child.take().expect("running");
        let mut stdout = String::new();
        if let Some(mut o) = child.stdout.take() {
            o.read_to_string(&mut stdout).expect("read stdout");
        }
        let status = child.wait().expect("wait nginx-probe");
        while let Ok(line) = self.stderr_lines.recv_timeout(Duration::from_secs(2)) {
            self.stderr.push(line);
        }
        ProbeOutput {
            status,
            stdout,
            stderr: self.stderr.join("\n"),
        }
    }
}

impl Drop for ProbeRun {
    fn drop(&mut self) {
        if let Some(mut c) = self.child.take() {
            let _ = c.kill();
            let _ = c.wait();
        }
    }
}

/// Runs nginx-probe to completion with `args` (for the bad-input cases).
pub fn run_probe(args: &[&str]) -> ProbeOutput {
    let out = Command::new(probe_binary())
        .args(args)
        .stdin(Stdio::null())
        .output()
        .expect("run nginx-probe");
    ProbeOutput {
        status: out.status,
        stdout: String::from_utf8_lossy(&out.stdout).into_owned(),
        stderr: String::from_utf8_lossy(&out.stderr).into_owned(),
    }
}

/// Ids and names of all loaded BPF programs, from `bpftool prog show --json`.
pub fn loaded_programs() -> Vec<(u64, String)> {
    let out = Command::new("bpftool")
        .args(["prog", "show", "--json"])
        .output()
        .expect("run bpftool (run `cargo xtask setup`)");
    assert!(
        out.status.success(),
        "bpftool failed: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    let v: serde_json::Value = serde_json::from_slice(&out.stdout).expect("bpftool JSON");
    v.as_array()
        .map(|a| {
            a.iter()
                .filter_map(|p| {
                    Some((
                        p.get("id")?.as_u64()?,
                        p.get("name")
                            .and_then(|n| n.as_str())
                            .unwrap_or("")
                            .to_string(),
                    ))
                })
                .collect()
        })
        .unwrap_or_default()
}

/// Ids of loaded programs named like nginx-probe's (`sys_enter_*`, `sys_exit_*`).
pub fn our_program_ids() -> Vec<u64> {
    loaded_programs()
        .into_iter()
        .filter(|(_, n)| n.starts_with("sys_enter_") || n.starts_with("sys_exit_"))
        .map(|(id, _)| id)
        .collect()
}

/// Ids of the BPF programs a process holds open, from `/proc/<pid>/fdinfo/*` (`prog_id:`
/// of `anon_inode:bpf-prog` fds).
pub fn prog_ids_held_by(pid: u32) -> Vec<u64> {
    let mut ids = Vec::new();
    let Ok(rd) = fs::read_dir(format!("/proc/{pid}/fd")) else {
        return ids;
    };
    for e in rd.flatten() {
        let Ok(target) = fs::read_link(e.path()) else {
            continue;
        };
        if target.to_string_lossy() != "anon_inode:bpf-prog" {
            continue;
        }
        let fdinfo = format!("/proc/{pid}/fdinfo/{}", e.file_name().to_string_lossy());
        if let Ok(info) = fs::read_to_string(fdinfo) {
            for line in info.lines() {
                if let Some(v) = line.strip_prefix("prog_id:") {
                    if let Ok(id) = v.trim().parse() {
                        ids.push(id);
                    }
                }
            }
        }
    }
    ids.sort_unstable();
    ids.dedup();
    ids
}

/// Waits up to 5 s for every program in `ids` to be unloaded (the kernel frees a
/// program shortly after its last fd closes); panics naming those still loaded.
pub fn assert_released(ids: &[u64], context: &str) {
    assert!(!ids.is_empty(), "{context}: no program ids to check");
    let deadline = Instant::now() + Duration::from_secs(5);
    loop {
        let loaded: Vec<u64> = loaded_programs().into_iter().map(|(id, _)| id).collect();
        let left: Vec<u64> = ids
            .iter()
            .copied()
            .filter(|id| loaded.contains(id))
            .collect();
        if left.is_empty() {
            return;
        }
        assert!(
            Instant::now() < deadline,
            "{context}: programs still loaded: {left:?}"
        );
        std::thread::sleep(Duration::from_millis(100));
    }
}

/// Sum of `accepts` over the workers of a summary document, including old exited
/// workers merged into `exited_merged`.
pub fn total_accepts(summary: &serde_json::Value) -> u64 {
    workers(summary)
        .iter()
        .map(|w| w["accepts"].as_u64().expect("accepts"))
        .sum::<u64>()
        + summary["exited_merged"]["accepts"].as_u64().unwrap_or(0)
}

/// The `workers` array of a report document.
pub fn workers(doc: &serde_json::Value) -> Vec<serde_json::Value> {
    doc["workers"].as_array().expect("workers array").clone()
}

/// Sum over workers of `accept_errors[errno]`.
pub fn total_accept_errors(summary: &serde_json::Value, errno: &str) -> u64 {
    workers(summary)
        .iter()
        .map(|w| {
            w["accept_errors"][errno]
                .as_u64()
                .expect("accept_errors entry")
        })
        .sum()
}
