//! Test fixtures for nginx-probe: a throwaway nginx ([`Nginx`]) whose `Drop` stops it,
//! nginx-probe run from a [`Probe`] command line (a running [`ProbeRun`]'s `Drop` kills
//! it), and small exact-count HTTP clients. Used by the integration tests in
//! `tests/tests/integration` (one binary) and by `cargo xtask`.
//!
//! Everything here panics on failure: a fixture that cannot do its job is a test failure.

use std::{
    fs,
    io::{BufRead, BufReader, Read, Write},
    net::{SocketAddr, TcpListener, TcpStream},
    os::unix::{fs::PermissionsExt, process::CommandExt},
    path::{Path, PathBuf},
    process::{Child, Command, Stdio},
    time::{Duration, Instant},
};

mod bpf;
pub mod container;
mod scrape;
pub use bpf::*;
pub use scrape::*;

use nix::{
    sys::signal::{kill, Signal},
    unistd::Pid,
};

mod clients;
pub use clients::*;
mod control;
pub use control::{port_entry, SyscallDelay};
mod proxy;
pub use proxy::{
    concurrent_requests, get_paths, reset_on_close, stream_client, IdleCloseBackend, ResetBackend,
    SlowBackend, StreamBackend,
};
mod probe;
pub use probe::*;
mod cgroup;
pub use cgroup::{CpuCgroup, PidsCgroup};

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
    /// Extra lines inside `http { }` (e.g. `access_log off;`); `@port@` in them is
    /// replaced by the main server's port (a name-based server beside it).
    pub http_extra: String,
    /// Extra parameters after `listen 127.0.0.1:PORT` (e.g. `reuseport`).
    pub listen_extra: String,
    /// Extra lines inside the `server { }` block (e.g. a `location` with `proxy_pass`).
    pub server_extra: String,
    /// Level of the top-level `error_log <prefix>/logs/error.log LEVEL;` (`warn`);
    /// empty: no top-level `error_log`.
    pub error_log_level: String,
    /// `access_log` setting: None writes `<prefix>/logs/access.log` unbuffered.
    pub access_log: Option<String>,
    /// `sendfile on` (the default here, as in Debian's nginx.conf) or `off`.
    pub sendfile: bool,
    /// Start nginx in its own pid namespace (`unshare --pid --fork --mount-proc`), as
    /// in a container: the master is pid 1 inside.
    pub pid_namespace: bool,
    /// Start nginx in a chroot of its own (with its own pid and mount namespace), as in
    /// a container whose root is a directory of the host: the host's /usr, /etc and
    /// /dev bind-mounted into a fresh root, the prefix at the same path inside. From
    /// the host, `/proc/<pid>/maps` then shows `<root>/usr/lib/...` while
    /// `/proc/<pid>/root` is `<root>`. Implies [`NginxConfig::pid_namespace`].
    pub chroot: bool,
    /// `worker_processes auto` (one worker per online CPU) instead of `workers`.
    pub workers_auto: bool,
    /// A cgroup directory (v2, or v1's `cpu` controller) the master enters before it
    /// execs, so that its workers are born there (see [`CpuCgroup`]).
    pub cgroup: Option<PathBuf>,
    /// `daemon on`: nginx forks away from us (needed for a binary upgrade, which nginx
    /// refuses while its original parent is alive). The master pid comes from the pid
    /// file.
    pub daemon: bool,
    /// Text put into the name of the temporary prefix (so into nginx's command line and
    /// every path under it), e.g. terminal escape sequences for the untrusted-input
    /// tests. Empty by default.
    pub prefix_tag: String,
    /// The nginx binary to run instead of `$NGINX_BIN` / `/usr/sbin/nginx` (e.g. a
    /// huge sparse copy).
    pub binary: Option<PathBuf>,
    /// Serve HTTPS: `listen ... ssl` with a self-signed certificate made with openssl in
    /// the prefix at start.
    pub tls: bool,
    /// `listen ... http2` (with `tls`: HTTP/2 over TLS, negotiated by ALPN).
    pub http2: bool,
    /// Files to create under `html/` at start: (relative path, contents).
    pub files: Vec<(String, Vec<u8>)>,
    /// Ready once at least one worker runs and the worker count held for 500 ms,
    /// instead of once all `workers` run (a master that cannot spawn them all).
    pub workers_may_fail: bool,
    /// Run the nginx of this root directory (e.g. [`container::trixie_root`], nginx
    /// 1.26) as a container: own pid and mount namespace, `chroot ROOT
    /// /usr/sbin/nginx`, with a tmpfs on `ROOT/tmp` and the prefix bind-mounted at the
    /// same path inside, `/proc` and `/dev` mounted (all in the namespace only: the
    /// host's view of ROOT is unchanged). Implies [`NginxConfig::chroot`]'s namespaces.
    pub root: Option<PathBuf>,
    /// Also `listen 127.0.0.1:PORT quic reuseport;` (HTTP/3 on UDP, same port; needs
    /// `tls` and an nginx with the HTTP/3 module, e.g. the trixie root's).
    pub quic: bool,
    /// Run nginx in this network namespace (see [`NetNs`]): the master enters it before
    /// it execs; readiness is checked from inside it.
    pub netns: Option<String>,
    /// nginx's `-g` (main-context directives on top of the file), after `-c`; empty:
    /// no `-g`. A `worker_processes` in it replaces the file's (nginx refuses a
    /// duplicate): set `workers` to the same number.
    pub globals: String,
    /// Pass `-e <prefix>/logs/error.log` last, after `-c` (and `-g`), instead of
    /// between `-p` and `-c` (nginx reads its options in any order; the title keeps
    /// the order given).
    pub error_log_arg_last: bool,
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
            server_extra: String::new(),
            error_log_level: "warn".into(),
            access_log: None,
            sendfile: true,
            pid_namespace: false,
            chroot: false,
            workers_auto: false,
            cgroup: None,
            daemon: false,
            prefix_tag: String::new(),
            binary: None,
            tls: false,
            http2: false,
            files: Vec::new(),
            workers_may_fail: false,
            root: None,
            quic: false,
            netns: None,
            globals: String::new(),
            error_log_arg_last: false,
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
    cfg: NginxConfig,
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
            .prefix(&format!("nginx-probe-{}", cfg.prefix_tag))
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
        for (name, body) in &cfg.files {
            let path = prefix.join("html").join(name);
            fs::write(&path, body).expect("write a served file");
            fs::set_permissions(&path, fs::Permissions::from_mode(0o644)).expect("chmod");
        }
        let mut tls_lines = String::new();
        if cfg.tls {
            let (cert, key) = (prefix.join("cert.pem"), prefix.join("key.pem"));
            let out = Command::new("openssl")
                .args([
                    "req", "-x509", "-newkey", "rsa:2048", "-nodes", "-days", "2",
                ])
                .args(["-subj", "/CN=localhost", "-keyout"])
                .arg(&key)
                .arg("-out")
                .arg(&cert)
                .output()
                .expect("run openssl (run `cargo xtask setup`)");
            assert!(out.status.success(), "openssl: {:?}", out);
            tls_lines = format!(
                "ssl_certificate {};\n        ssl_certificate_key {};",
                cert.display(),
                key.display()
            );
        }
        let listen_flags = format!(
            "{}{}",
            if cfg.tls { " ssl" } else { "" },
            if cfg.http2 { " http2" } else { "" }
        );
        let port = free_port();
        let p = prefix.display();
        let access_log = match &cfg.access_log {
            None => format!("access_log \"{p}/logs/access.log\";"),
            Some(s) if s == "off" => "access_log off;".to_string(),
            Some(s) => format!("access_log \"{p}/logs/access.log\" {s};"),
        };
        let conf = format!(
            "{workers}
daemon {daemon};
pid \"{p}/logs/nginx.pid\";
{error_log}
{main_extra}
events {{
    worker_connections {wc};
    {events_extra}
}}
http {{
    {access_log}
    client_body_temp_path \"{p}/tmp/body\";
    proxy_temp_path \"{p}/tmp/proxy\";
    fastcgi_temp_path \"{p}/tmp/fastcgi\";
    uwsgi_temp_path \"{p}/tmp/uwsgi\";
    scgi_temp_path \"{p}/tmp/scgi\";
    sendfile {sendfile};
    {http_extra}
    server {{
        listen 127.0.0.1:{port}{listen_flags} {listen_extra};
        {quic}
        root \"{p}/html\";
        {tls_lines}
        {server_extra}
    }}
}}
",
            workers = if cfg.globals.contains("worker_processes") {
                String::new()
            } else if cfg.workers_auto {
                "worker_processes auto;".to_string()
            } else {
                format!("worker_processes {};", cfg.workers)
            },
            daemon = if cfg.daemon { "on" } else { "off" },
            wc = cfg.worker_connections,
            events_extra = cfg.events_extra,
            main_extra = cfg.main_extra,
            http_extra = cfg.http_extra.replace("@port@", &port.to_string()),
            sendfile = if cfg.sendfile { "on" } else { "off" },
            listen_extra = cfg.listen_extra,
            server_extra = cfg.server_extra,
            error_log = if cfg.error_log_level.is_empty() {
                String::new()
            } else {
                format!("error_log \"{p}/logs/error.log\" {};", cfg.error_log_level)
            },
            quic = if cfg.quic {
                format!("listen 127.0.0.1:{port} quic reuseport;")
            } else {
                String::new()
            },
        );
        fs::write(prefix.join("nginx.conf"), conf).expect("write nginx.conf");
        let mut ng = Nginx {
            child: None,
            prefix,
            _dir: dir,
            port,
            in_namespace: cfg.pid_namespace || cfg.chroot || cfg.root.is_some(),
            daemon_master: None,
            cfg: cfg.clone(),
        };
        if !ng.launch() {
            return None;
        }
        Some(ng)
    }

    /// The command that starts nginx in a chroot ([`NginxConfig::chroot`]): `unshare`
    /// with its own pid and mount namespace, a shell that builds the root from bind
    /// mounts (gone with the namespace) and execs `chroot ROOT nginx`; nginx's own
    /// arguments follow.
    fn chroot_command(&self) -> Command {
        if let Some(root) = &self.cfg.root {
            return container_command(root, &self.prefix);
        }
        // Inside the prefix, so that it goes with it; the bind mounts live in the
        // namespace only (private propagation): the host sees empty directories.
        let root = self.prefix.join("root");
        fs::create_dir_all(&root).expect("mkdir the chroot");
        let r = root.display();
        let p = self.prefix.display();
        let script = format!(
            "set -e; mount --make-rprivate /; \
             for d in usr etc dev; do mkdir -p '{r}'/$d; mount --rbind /$d '{r}'/$d; done; \
             for l in lib lib64 bin sbin; do [ -e '{r}'/$l ] || ln -s usr/$l '{r}'/$l; done; \
             mkdir -p '{r}/proc' '{r}/tmp' '{r}/var/lib/nginx' '{r}/var/log/nginx' '{r}{p}'; \
             mount --bind '{p}' '{r}{p}'; mount -t proc proc '{r}/proc'; \
             exec chroot '{r}' {bin} \"$@\"",
            bin = nginx_binary()
        );
        let mut c = Command::new("unshare");
        c.args(["--pid", "--fork", "--mount", "--kill-child=SIGTERM"])
            .args(["sh", "-c", &script, "sh"]);
        c
    }

    /// Starts the nginx of this prefix (its config written by [`Nginx::start`]) and
    /// waits until it is ready; false when its port was taken.
    fn launch(&mut self) -> bool {
        let cfg = self.cfg.clone();
        let mut cmd = if cfg.chroot || cfg.root.is_some() {
            self.chroot_command()
        } else if cfg.pid_namespace {
            let mut c = Command::new("unshare");
            c.args(["--pid", "--fork", "--mount-proc", "--kill-child=SIGTERM"])
                .arg(nginx_binary());
            c
        } else {
            match &cfg.binary {
                Some(b) => Command::new(b),
                None => Command::new(nginx_binary()),
            }
        };
        let prefix = &self.prefix;
        let error_log = ["-e".into(), prefix.join("logs/error.log").into_os_string()];
        let (e_before, e_after) = if cfg.error_log_arg_last {
            (&[][..], &error_log[..])
        } else {
            (&error_log[..], &[][..])
        };
        cmd.arg("-p")
            .arg(prefix)
            .args(e_before)
            .arg("-c")
            .arg(prefix.join("nginx.conf"))
            .args(
                Some(["-g", cfg.globals.as_str()])
                    .filter(|_| !cfg.globals.is_empty())
                    .into_iter()
                    .flatten(),
            )
            .args(e_after)
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::piped());
        // nginx starts with stdin, stdout and stderr only, whatever fds the test
        // runner inherited (a CI harness's pipes would otherwise count against the
        // nofile limits some tests set, and show up as files the workers hold).
        no_inherited_fds(&mut cmd);
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
        if let Some(dir) = &cfg.cgroup {
            let procs =
                std::ffi::CString::new(dir.join("cgroup.procs").as_os_str().as_encoded_bytes())
                    .expect("cgroup path");
            // SAFETY: open/write/close are async-signal-safe; the path was built before
            // fork. Writing "0" moves the writing process (v1 and v2).
            unsafe {
                cmd.pre_exec(move || {
                    let fd = libc::open(procs.as_ptr(), libc::O_WRONLY);
                    if fd < 0 {
                        return Err(std::io::Error::last_os_error());
                    }
                    let n = libc::write(fd, b"0".as_ptr().cast(), 1);
                    let err = std::io::Error::last_os_error();
                    libc::close(fd);
                    if n != 1 {
                        return Err(err);
                    }
                    Ok(())
                });
            }
        }
        if let Some(ns) = &cfg.netns {
            let ns = fs::File::open(NetNs::path(ns)).expect("open the network namespace");
            // SAFETY: setns is async-signal-safe; the fd was opened before fork.
            unsafe {
                cmd.pre_exec(move || {
                    use std::os::fd::AsRawFd;
                    if libc::setns(ns.as_raw_fd(), libc::CLONE_NEWNET) != 0 {
                        return Err(std::io::Error::last_os_error());
                    }
                    Ok(())
                });
            }
        }
        // Own process group: a Ctrl-C at the terminal does not reach nginx; Drop stops it.
        cmd.process_group(0);
        let child = cmd
            .spawn()
            .expect("spawn nginx (is it installed? run `cargo xtask setup`)");
        let ng = self;
        ng.child = Some(child);
        if cfg.daemon {
            let mut child = ng.child.take().expect("child");
            let status = child.wait().expect("wait for nginx to daemonize");
            if !status.success() {
                let mut err = String::new();
                if let Some(mut e) = child.stderr.take() {
                    let _ = e.read_to_string(&mut err);
                }
                if err.contains("Address already in use") {
                    return false;
                }
                panic!("nginx failed to start as a daemon: {err}");
            }
            let pid = fs::read_to_string(ng.prefix.join("logs/nginx.pid"))
                .ok()
                .and_then(|s| s.trim().parse().ok())
                .expect("daemon pid file");
            ng.daemon_master = Some(pid);
        }
        let workers = if cfg.workers_auto {
            // What nginx's `auto` counts: online CPUs (not the cgroup's quota).
            // SAFETY: sysconf has no preconditions.
            (unsafe { libc::sysconf(libc::_SC_NPROCESSORS_ONLN) }).max(1) as usize
        } else if cfg.workers_may_fail {
            0
        } else {
            cfg.workers as usize
        };
        ng.wait_ready(workers)
    }

    /// Stops nginx (as [`Nginx::stop`]) and starts a new master with the same prefix,
    /// config and port, as `systemctl restart nginx` does; returns the new master's pid.
    pub fn restart(&mut self) -> u32 {
        self.stop();
        assert!(
            self.launch(),
            "nginx could not bind port {} again",
            self.port
        );
        self.master_pid()
    }

    /// True when ready; false when nginx exited because its port was taken.
    /// `workers` 0: ready once the count of workers (at least 1) held for 500 ms.
    fn wait_ready(&mut self, workers: usize) -> bool {
        let deadline = Instant::now() + Duration::from_secs(10);
        let mut seen = (usize::MAX, Instant::now());
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
            let addr = self.addr();
            let reachable = match &self.cfg.netns {
                Some(ns) => NetNs::run_in(ns, move || TcpStream::connect(addr).is_ok()),
                None => TcpStream::connect(addr).is_ok(),
            };
            if self.master_pid() != 0 && reachable {
                let n = self.worker_pids().len();
                if workers == 0 && n > 0 {
                    if n != seen.0 {
                        seen = (n, Instant::now());
                    } else if seen.1.elapsed() >= Duration::from_millis(500) {
                        return true;
                    }
                } else if n == workers {
                    return true;
                }
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

    /// `https://127.0.0.1:port/` (a [`NginxConfig::tls`] nginx).
    pub fn https_url(&self) -> String {
        format!("https://127.0.0.1:{}/", self.port)
    }

    /// `<prefix>/nginx.conf:N`, N the 1-based line of its first line containing
    /// `needle`: where nginx-probe must say a directive is set. Panics when absent.
    pub fn conf_at(&self, needle: &str) -> String {
        let conf = self.prefix.join("nginx.conf");
        let text = fs::read_to_string(&conf).expect("read nginx.conf");
        let n = text
            .lines()
            .position(|l| l.contains(needle))
            .unwrap_or_else(|| panic!("{needle:?} not in {text}"));
        format!("{}:{}", conf.display(), n + 1)
    }

    /// Lines in the access log (`<prefix>/logs/access.log`): one per request nginx
    /// logged.
    pub fn access_log_lines(&self) -> usize {
        fs::read_to_string(self.prefix.join("logs/access.log"))
            .map(|s| s.lines().count())
            .unwrap_or(0)
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

    /// nginx's pid file (`pid` in the generated config).
    pub fn pid_file(&self) -> PathBuf {
        self.prefix.join("logs/nginx.pid")
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

/// The command that starts the nginx of `root` ([`NginxConfig::root`]) as a container
/// with `prefix` inside; nginx's own arguments follow.
fn container_command(root: &Path, prefix: &Path) -> Command {
    let r = root.display();
    let p = prefix.display();
    let script = format!(
        "set -e; mount --make-rprivate /; \
         mount -t tmpfs tmpfs '{r}/tmp'; mkdir -p '{r}{p}'; mount --bind '{p}' '{r}{p}'; \
         mount --rbind /dev '{r}/dev'; mount -t proc proc '{r}/proc'; \
         exec chroot '{r}' /usr/sbin/nginx \"$@\""
    );
    let mut c = Command::new("unshare");
    c.args(["--pid", "--fork", "--mount", "--kill-child=SIGTERM"])
        .args(["sh", "-c", &script, "sh"]);
    c
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

/// One HTTP/1.1 response read by [`read_response`].
pub(crate) struct Response {
    /// The status was 200.
    pub is_200: bool,
    /// nginx said `Connection: close`.
    pub close: bool,
    /// The Content-Length body.
    pub body: Vec<u8>,
}

/// Reads one HTTP/1.1 response (status line, headers, Content-Length body) from `c`;
/// None if the connection ended before a status line.
pub(crate) fn read_response(c: &mut BufReader<TcpStream>) -> Option<Response> {
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
    Some(Response {
        is_200: status.starts_with("HTTP/1.1 200"),
        close,
        body,
    })
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
        let Response { is_200, close, .. } =
            read_response(c).expect("nginx closed before answering");
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
            let is_200 = read_response(c)
                .expect("nginx closed a keepalive connection")
                .is_200;
            if is_200 {
                ok += 1;
            }
        }
    }
    ok
}

/// HTTP status of one response read from `c` (headers, then a Content-Length body),
/// and whether nginx said `Connection: close`; None if the connection ended first.
pub fn read_status(c: &mut BufReader<TcpStream>) -> Option<(u16, bool)> {
    let mut status = String::new();
    if c.read_line(&mut status).ok()? == 0 {
        return None;
    }
    let code = status.split(' ').nth(1)?.parse().ok()?;
    let mut len = 0usize;
    let mut close = false;
    loop {
        let mut line = String::new();
        if c.read_line(&mut line).ok()? == 0 {
            return None;
        }
        if line == "\r\n" {
            break;
        }
        let lower = line.to_ascii_lowercase();
        if let Some(v) = lower.strip_prefix("content-length:") {
            len = v.trim().parse().ok()?;
        }
        if lower.starts_with("connection:") && lower.contains("close") {
            close = true;
        }
    }
    let mut body = vec![0u8; len];
    c.read_exact(&mut body).ok()?;
    Some((code, close))
}

/// `clients` threads, each sending `GET /` on a keepalive connection (a new one after
/// `Connection: close`) `per_client` times, paced at `per_s` a second from a common
/// start: every 1/per_s seconds all clients send at once (hey -q's bursts). Returns the
/// responses by status code and the connections opened. Panics on a lost response.
pub fn paced_requests(
    addr: SocketAddr,
    clients: usize,
    per_client: usize,
    per_s: f64,
) -> (std::collections::BTreeMap<u16, usize>, usize) {
    let start = Instant::now() + Duration::from_millis(100);
    let handles: Vec<_> = (0..clients)
        .map(|_| {
            std::thread::spawn(move || {
                let mut statuses = std::collections::BTreeMap::new();
                let mut opened = 0;
                let mut conn: Option<BufReader<TcpStream>> = None;
                for k in 0..per_client {
                    let at = start + Duration::from_secs_f64(k as f64 / per_s);
                    if let Some(wait) = at.checked_duration_since(Instant::now()) {
                        std::thread::sleep(wait);
                    }
                    let c = conn.get_or_insert_with(|| {
                        opened += 1;
                        BufReader::new(TcpStream::connect(addr).expect("connect"))
                    });
                    c.get_mut()
                        .write_all(b"GET / HTTP/1.1\r\nHost: test\r\n\r\n")
                        .expect("send");
                    let (code, close) = read_status(c).expect("response");
                    *statuses.entry(code).or_insert(0) += 1;
                    if close {
                        conn = None;
                    }
                }
                (statuses, opened)
            })
        })
        .collect();
    let mut all = std::collections::BTreeMap::new();
    let mut opened = 0;
    for h in handles {
        let (s, o) = h.join().expect("client thread");
        for (k, v) in s {
            *all.entry(k).or_insert(0) += v;
        }
        opened += o;
    }
    (all, opened)
}

/// A network namespace of our own (`ip netns add`), with loopback up and the given
/// sysctls set inside it; deleted on drop. Where a test needs its own local port range
/// or TIME-WAIT settings without touching the host's.
pub struct NetNs {
    /// Its name under /run/netns.
    pub name: String,
}

impl NetNs {
    /// Creates `name` (deleting a leftover of that name first) and sets each
    /// `(sysctl, value)` inside it.
    pub fn new(name: &str, sysctls: &[(&str, &str)]) -> NetNs {
        let ip = |args: &[&str]| {
            let st = std::process::Command::new("ip")
                .args(args)
                .status()
                .expect("run ip");
            st.success()
        };
        if NetNs::path(name).exists() {
            let _ = ip(&["netns", "del", name]);
        }
        assert!(ip(&["netns", "add", name]), "ip netns add {name}");
        let ns = NetNs { name: name.into() };
        assert!(ip(&["-n", name, "link", "set", "lo", "up"]));
        for (k, v) in sysctls {
            let st = std::process::Command::new("ip")
                .args([
                    "netns",
                    "exec",
                    name,
                    "sysctl",
                    "-q",
                    "-w",
                    &format!("{k}={v}"),
                ])
                .status()
                .expect("run sysctl");
            assert!(st.success(), "sysctl {k}={v} in {name}");
        }
        ns
    }

    /// `/run/netns/<name>`.
    pub fn path(name: &str) -> PathBuf {
        PathBuf::from("/run/netns").join(name)
    }

    /// Runs `f` on a thread that entered the namespace `name`, and returns its result.
    pub fn run_in<T: Send>(name: &str, f: impl FnOnce() -> T + Send) -> T {
        let ns = fs::File::open(NetNs::path(name)).expect("open the network namespace");
        std::thread::scope(|s| {
            s.spawn(move || {
                nix::sched::setns(ns, nix::sched::CloneFlags::CLONE_NEWNET).expect("setns");
                f()
            })
            .join()
            .expect("thread in the network namespace")
        })
    }
}

impl Drop for NetNs {
    fn drop(&mut self) {
        let _ = std::process::Command::new("ip")
            .args(["netns", "del", &self.name])
            .status();
    }
}

/// Makes every fd above stderr close-on-exec in `cmd`'s child before anything else
/// runs there (`close_range(3, ~0, CLOSE_RANGE_CLOEXEC)`, Linux 5.11), so the program
/// it execs starts with fds 0-2 only, whatever the test process inherited. Fds that
/// later `pre_exec` steps open or use stay valid until the exec.
pub fn no_inherited_fds(cmd: &mut Command) {
    // SAFETY: close_range is a raw syscall, async-signal-safe; nothing else runs
    // between fork and exec.
    unsafe {
        cmd.pre_exec(|| {
            if libc::syscall(
                libc::SYS_close_range,
                3u32,
                u32::MAX,
                libc::CLOSE_RANGE_CLOEXEC,
            ) != 0
            {
                return Err(std::io::Error::last_os_error());
            }
            Ok(())
        });
    }
}
