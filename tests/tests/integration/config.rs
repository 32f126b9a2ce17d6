//! nginx's configuration as nginx-probe reads it from a running master: the main file
//! from its `-c`, includes (one through a glob) with each directive's file:line, a file
//! edited after the master started flagged, a master in its own pid and mount namespace
//! under a chroot read through `/proc/<pid>/root`, a hostile config bounded, a prefix
//! with spaces (the title joins the arguments) and `-g` read, and a main file gone:
//! every setting unknown.

use std::{
    fs,
    path::Path,
    process::{Command, Stdio},
    thread,
    time::{Duration, Instant},
};

use nginx_probe_tests::*;
use nix::{
    sys::signal::{kill, Signal},
    unistd::Pid,
};
use serde_json::Value;

fn value<'a>(cfg: &'a Value, directive: &str, scope: &str) -> &'a Value {
    cfg["values"]
        .as_array()
        .unwrap()
        .iter()
        .find(|v| v["directive"] == directive && v["scope"] == scope)
        .unwrap_or_else(|| panic!("no {directive} in {scope}: {:#}", cfg["values"]))
}

/// (value, at) of a value.
fn va(v: &Value) -> (String, String) {
    (
        v["value"].as_str().unwrap().to_string(),
        v["at"].as_str().unwrap().to_string(),
    )
}

/// 1-based line of the first line of `file` containing `needle`.
fn line_of(file: &Path, needle: &str) -> usize {
    fs::read_to_string(file)
        .unwrap()
        .lines()
        .position(|l| l.contains(needle))
        .unwrap_or_else(|| panic!("{needle} not in {}", file.display()))
        + 1
}

fn write(path: &Path, text: &str) {
    fs::create_dir_all(path.parent().unwrap()).unwrap();
    fs::write(path, text).unwrap();
}

/// Included files of the split config under `dir`: main-level, events and a glob of
/// http files.
fn split_config(dir: &Path) -> NginxConfig {
    write(&dir.join("main.conf"), "worker_rlimit_nofile 2048;\n");
    write(
        &dir.join("events.conf"),
        "multi_accept on;\naccept_mutex on;\n",
    );
    write(
        &dir.join("conf.d/10-keepalive.conf"),
        "keepalive_timeout 30s;\nkeepalive_requests 50;\n",
    );
    write(
        &dir.join("conf.d/20-upstream.conf"),
        "upstream app {\n    server 127.0.0.1:9 max_fails=2 fail_timeout=3s;\n    keepalive 8;\n}\n",
    );
    NginxConfig {
        main_extra: format!("include {}/main.conf;", dir.display()),
        events_extra: format!("include {}/events.conf;", dir.display()),
        http_extra: format!("include {}/conf.d/*.conf;", dir.display()),
        listen_extra: "backlog=100 reuseport".into(),
        access_log: Some("combined buffer=16k flush=2s".into()),
        ..NginxConfig::default()
    }
}

#[test]
fn a_config_split_over_three_included_files_gives_each_value_with_its_file_and_line() {
    let dir = tempfile::tempdir().unwrap();
    let ng = Nginx::start(&split_config(dir.path()));
    let out = Probe::on(&ng).json().duration(1).run();
    assert!(out.status.success(), "{}", out.stderr);
    let r = out.summary_json();
    let cfg = &r["config"];
    let main = ng.prefix.join("nginx.conf");
    let d = dir.path().display();
    assert_eq!(cfg["main_file"], main.display().to_string());
    assert_eq!(cfg["found_by"], "-c");
    assert_eq!(cfg["errors"], serde_json::json!([]));
    let files: Vec<&str> = cfg["files"]
        .as_array()
        .unwrap()
        .iter()
        .map(|f| f["path"].as_str().unwrap())
        .collect();
    let want = [
        main.display().to_string(),
        format!("{d}/main.conf"),
        format!("{d}/events.conf"),
        format!("{d}/conf.d/10-keepalive.conf"),
        format!("{d}/conf.d/20-upstream.conf"),
    ];
    assert_eq!(files, want);
    assert!(cfg["files"]
        .as_array()
        .unwrap()
        .iter()
        .all(|f| f["changed_since_load"] == false));
    let m = main.display();
    for (directive, scope, v, at) in [
        (
            "worker_processes",
            "main",
            "2",
            format!("{m}:{}", line_of(&main, "worker_processes")),
        ),
        (
            "worker_rlimit_nofile",
            "main",
            "2048",
            format!("{d}/main.conf:1"),
        ),
        (
            "worker_connections",
            "events",
            "1024",
            format!("{m}:{}", line_of(&main, "worker_connections")),
        ),
        ("multi_accept", "events", "on", format!("{d}/events.conf:1")),
        ("accept_mutex", "events", "on", format!("{d}/events.conf:2")),
        (
            "accept_mutex_delay",
            "events",
            "500ms",
            "default".to_string(),
        ),
        (
            "keepalive_timeout",
            "http",
            "30s",
            format!("{d}/conf.d/10-keepalive.conf:1"),
        ),
        (
            "keepalive_requests",
            "http",
            "50",
            format!("{d}/conf.d/10-keepalive.conf:2"),
        ),
        (
            "sendfile",
            "http",
            "on",
            format!("{m}:{}", line_of(&main, "sendfile")),
        ),
        (
            "keepalive",
            "upstream app",
            "8",
            format!("{d}/conf.d/20-upstream.conf:3"),
        ),
        (
            "keepalive_timeout",
            "upstream app",
            "60s",
            "default".to_string(),
        ),
    ] {
        assert_eq!(
            va(value(cfg, directive, scope)),
            (v.to_string(), at),
            "{directive} in {scope}"
        );
    }
    let listen = &cfg["listens"][0];
    assert_eq!(listen["address"], format!("127.0.0.1:{}", ng.port));
    assert_eq!(listen["backlog"], "100");
    assert_eq!(listen["reuseport"], true);
    assert_eq!(listen["at"], format!("{m}:{}", line_of(&main, "listen ")));
    let log = &cfg["access_logs"][0];
    assert_eq!(log["buffer"], "16k");
    assert_eq!(log["flush"], "2s");
    assert_eq!(log["at"], format!("{m}:{}", line_of(&main, "access_log")));
    let up = &cfg["upstreams"][0]["servers"][0];
    assert_eq!(
        (up["max_fails"].as_str(), up["fail_timeout"].as_str()),
        (Some("2"), Some("3s"))
    );
    // The text summary's CONFIG section quotes the same.
    let text = Probe::on(&ng).duration(1).run();
    assert!(text.status.success(), "{}", text.stderr);
    assert!(
        text.stdout.contains(&format!(
            "CONFIG {m} (from -c; 5 files read under /proc/{}/root",
            ng.master_pid()
        )),
        "{}",
        text.stdout
    );
    assert!(
        text.stdout.contains("keepalive_timeout 30s (")
            && text.stdout.contains("conf.d/10-keepalive.conf:1)"),
        "{}",
        text.stdout
    );
}

#[test]
fn a_file_edited_after_the_master_started_is_flagged_and_its_values_marked() {
    let dir = tempfile::tempdir().unwrap();
    let ng = Nginx::start(&split_config(dir.path()));
    let edited = dir.path().join("conf.d/10-keepalive.conf");
    std::thread::sleep(Duration::from_millis(100));
    fs::write(&edited, "keepalive_timeout 0;\nkeepalive_requests 50;\n").unwrap();
    let out = Probe::on(&ng).json().duration(1).run();
    assert!(out.status.success(), "{}", out.stderr);
    let cfg = &out.summary_json()["config"];
    let changed: Vec<&str> = cfg["files"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|f| f["changed_since_load"] == true)
        .map(|f| f["path"].as_str().unwrap())
        .collect();
    assert_eq!(changed, [edited.display().to_string()]);
    let kt = value(cfg, "keepalive_timeout", "http");
    assert_eq!(va(kt), ("0".to_string(), format!("{}:1", edited.display())));
    assert_eq!(kt["not_loaded"], true);
    assert!(value(cfg, "multi_accept", "events")
        .get("not_loaded")
        .is_none());
    let text = Probe::on(&ng).duration(1).run();
    assert!(
        text.stdout.contains(&format!(
            "! {} changed after the last load",
            edited.display()
        )),
        "{}",
        text.stdout
    );
}

/// nginx chrooted into `root` in its own pid and mount namespace: `/usr` bind-mounted
/// inside the namespace only (private propagation: the host never sees the mount).
struct Chrooted {
    unshare: std::process::Child,
    master: u32,
}

impl Drop for Chrooted {
    fn drop(&mut self) {
        // unshare ignores SIGTERM while it waits for its child: stop the master (pid 1
        // of the namespace; its workers go with the namespace), then unshare exits.
        use nix::{
            sys::signal::{kill, Signal},
            unistd::Pid,
        };
        if self.master != 0 {
            let _ = kill(Pid::from_raw(self.master as i32), Signal::SIGTERM);
        }
        let deadline = Instant::now() + Duration::from_secs(5);
        while Instant::now() < deadline {
            if matches!(self.unshare.try_wait(), Ok(Some(_))) {
                return;
            }
            std::thread::sleep(Duration::from_millis(50));
        }
        let _ = kill(Pid::from_raw(self.unshare.id() as i32), Signal::SIGKILL);
        let _ = self.unshare.wait();
    }
}

fn start_chrooted(root: &Path, port: u16) -> Chrooted {
    for d in ["usr", "proc", "tmp", "logs", "etc/nginx/conf.d", "dev"] {
        fs::create_dir_all(root.join(d)).unwrap();
    }
    for l in ["lib", "lib64", "bin", "sbin"] {
        std::os::unix::fs::symlink(format!("usr/{l}"), root.join(l)).unwrap();
    }
    for f in ["etc/passwd", "etc/group", "etc/nsswitch.conf"] {
        let _ = fs::copy(Path::new("/").join(f), root.join(f));
    }
    write(
        &root.join("etc/nginx/nginx.conf"),
        &format!(
            "worker_processes 1;\ndaemon off;\npid /tmp/nginx.pid;\nerror_log /logs/error.log warn;\nevents {{ worker_connections 333; }}\nhttp {{\n    access_log off;\n    client_body_temp_path /tmp/body;\n    proxy_temp_path /tmp/proxy;\n    fastcgi_temp_path /tmp/fastcgi;\n    uwsgi_temp_path /tmp/uwsgi;\n    scgi_temp_path /tmp/scgi;\n    include conf.d/*.conf;\n    server {{ listen 127.0.0.1:{port}; return 200; }}\n}}\n"
        ),
    );
    write(
        &root.join("etc/nginx/real.conf"),
        "keepalive_timeout 17s;\n",
    );
    // An absolute symlink: resolved inside the master's root, not the host's.
    std::os::unix::fs::symlink(
        "/etc/nginx/real.conf",
        root.join("etc/nginx/conf.d/link.conf"),
    )
    .unwrap();
    let r = root.display();
    let script = format!(
        "mount --bind /usr {r}/usr && mount -t proc proc {r}/proc && exec chroot {r} /usr/sbin/nginx -e /logs/error.log -c /etc/nginx/nginx.conf"
    );
    let unshare = Command::new("unshare")
        .args([
            "--mount",
            "--pid",
            "--fork",
            "--kill-child=SIGTERM",
            "sh",
            "-c",
            &script,
        ])
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .expect("unshare");
    // Owned at once: a panic below still ends the namespace (Drop).
    let mut ch = Chrooted { unshare, master: 0 };
    let deadline = Instant::now() + Duration::from_secs(10);
    loop {
        let master = children_of(ch.unshare.id()).into_iter().find(|&p| {
            fs::read_to_string(format!("/proc/{p}/cmdline"))
                .is_ok_and(|c| c.contains("master process"))
        });
        if let Some(m) = master {
            if !children_of(m).is_empty()
                && std::net::TcpStream::connect(("127.0.0.1", port)).is_ok()
            {
                ch.master = m;
                return ch;
            }
        }
        assert!(
            Instant::now() < deadline,
            "chrooted nginx did not start: {}",
            fs::read_to_string(root.join("logs/error.log")).unwrap_or_default()
        );
        std::thread::sleep(Duration::from_millis(50));
    }
}

#[test]
fn nginx_chrooted_in_its_own_namespaces_is_read_from_its_own_root() {
    let dir = tempfile::tempdir().unwrap();
    let root = dir.path().to_path_buf();
    let port = free_port();
    let ng = start_chrooted(&root, port);
    let out = Probe::pid(ng.master).json().duration(1).run();
    drop(ng);
    // The bind mount lived in the namespace only: the host's view of usr/ is empty.
    assert_eq!(fs::read_dir(root.join("usr")).unwrap().count(), 0);
    assert!(out.status.success(), "{}", out.stderr);
    let cfg = &out.summary_json()["config"];
    assert_eq!(cfg["main_file"], "/etc/nginx/nginx.conf");
    assert_eq!(cfg["errors"], serde_json::json!([]), "{cfg:#}");
    assert!(cfg["root"].as_str().unwrap().ends_with("/root"));
    // The host's /etc/nginx/nginx.conf says otherwise (Debian's: 768).
    assert_eq!(
        va(value(cfg, "worker_connections", "events")),
        ("333".to_string(), "/etc/nginx/nginx.conf:5".to_string())
    );
    assert_eq!(
        va(value(cfg, "keepalive_timeout", "http")),
        (
            "17s".to_string(),
            "/etc/nginx/conf.d/link.conf:1".to_string()
        )
    );
    assert_eq!(cfg["listens"][0]["address"], format!("127.0.0.1:{port}"));
}

#[test]
fn a_hostile_config_gives_a_report_with_one_line_errors_bounded_and_escaped() {
    let dir = tempfile::tempdir().unwrap();
    let h = dir.path().join("h");
    write(&h.join("00-ok.conf"), "gzip on;\n");
    let cfg = NginxConfig {
        http_extra: format!("include {}/*.conf;", h.display()),
        ..NginxConfig::default()
    };
    let ng = Nginx::start(&cfg);
    // Written after the load, by whoever can write there.
    write(
        &h.join("10-esc.conf"),
        "server {\n    server_name \"\x1b[31mevil\x1b]0;pwned\x07\";\n    listen 127.0.0.1:1;\n}\n",
    );
    write(
        &h.join("20-loop.conf"),
        &format!("include {}/20-loop.conf;\n", h.display()),
    );
    let many = dir.path().join("many");
    fs::create_dir_all(&many).unwrap();
    for i in 0..10_000 {
        fs::write(many.join(format!("{i:05}.conf")), "").unwrap();
    }
    write(
        &h.join("30-many.conf"),
        &format!("include {}/*.conf;\n", many.display()),
    );
    let big = fs::File::create(h.join("40-big.conf")).unwrap();
    big.set_len(200 << 20).unwrap();
    let out = Probe::on(&ng).json().duration(1).run();
    assert!(out.status.success(), "{}", out.stderr);
    let cfg = &out.summary_json()["config"];
    let errors: Vec<&str> = cfg["errors"]
        .as_array()
        .unwrap()
        .iter()
        .map(|e| e.as_str().unwrap())
        .collect();
    let hd = h.display();
    assert_eq!(
        errors,
        [
            format!("{hd}/20-loop.conf (included at {hd}/20-loop.conf:1): include loop: the file is already being read (it includes itself, directly or through the files that include it)"),
            format!("{hd}/30-many.conf:1: include {}/*.conf: only the first 256 matches read", many.display()),
            format!("{hd}/40-big.conf (included at {}:{}): not read: 209715200 bytes, over the 4194304 byte limit", ng.prefix.join("nginx.conf").display(), line_of(&ng.prefix.join("nginx.conf"), "include")),
        ]
    );
    // main + 5 in h/ + 256 of many/.
    assert_eq!(cfg["files"].as_array().unwrap().len(), 1 + 4 + 256);
    assert_eq!(value(cfg, "gzip", "http")["value"], "on");
    // The text report: the hostile name escaped, no raw control byte.
    let text = Probe::on(&ng).duration(1).run();
    assert!(text.status.success(), "{}", text.stderr);
    assert!(
        !text.stdout.bytes().any(|b| b == 0x1b || b == 0x07),
        "raw control bytes on stdout"
    );
    assert!(
        text.stdout.contains("\\x1b[31mevil\\x1b]0;pwned\\x07"),
        "{}",
        text.stdout
    );
    assert!(text.stdout.contains("include loop"), "{}", text.stdout);
    // Bounded memory: no child of this test binary (the probes included) grew near the
    // 200 MB file.
    let mut ru: libc::rusage = unsafe { std::mem::zeroed() };
    // SAFETY: getrusage writes one rusage we own.
    assert_eq!(
        unsafe { libc::getrusage(libc::RUSAGE_CHILDREN, &mut ru) },
        0
    );
    assert!(
        ru.ru_maxrss < 150 * 1024,
        "max RSS of a child {} KiB",
        ru.ru_maxrss
    );
}

#[test]
fn verdicts_quote_the_effective_directive_with_its_file_and_line() {
    let dir = tempfile::tempdir().unwrap();
    let inc = dir.path().join("keepalive.conf");
    write(&inc, "keepalive_timeout 0;\n");
    let ng = Nginx::start(&NginxConfig {
        events_extra: "accept_mutex on; multi_accept on;".into(),
        http_extra: format!("include {};", inc.display()),
        ..NginxConfig::default()
    });
    let main = ng.prefix.join("nginx.conf");
    let m = main.display();
    // accept_imbalance made certain: the worker that does not hold the accept mutex is
    // stopped through the load, so the holder accepts all 4000. An idle holder sleeps
    // in epoll_wait holding the mutex with the listening socket in its epoll set (one
    // more fd there than the other worker's); stopping the holder would stop every
    // accept, and without the mutex the kernel may still queue a wake-up to a stopped
    // worker's epoll.
    thread::sleep(Duration::from_millis(1200));
    let watched = |pid: u32| epoll_fds_watched(pid);
    let pids = ng.worker_pids();
    assert_eq!(pids.len(), 2);
    let (a, b) = (watched(pids[0]), watched(pids[1]));
    assert_ne!(
        a, b,
        "no worker holds the accept mutex: {pids:?} watch {a} and {b} fds"
    );
    let other = if a > b { pids[1] } else { pids[0] };
    let stopped = Pid::from_raw(other as i32);
    let s = Probe::on(&ng).json().summary_around(|| {
        kill(stopped, Signal::SIGSTOP).unwrap();
        // 4000 log writes make access_log_unbuffered material by its rate over the
        // whole period (attach and settle included), not by a timing-dependent share.
        assert_eq!(one_request_per_connection(ng.addr(), 4000), 4000);
        kill(stopped, Signal::SIGCONT).unwrap();
    });
    let find = |id: &str| verdict(&s, id);
    let ka = find("keepalive_off");
    assert_eq!(
        ka["evidence"]["config_keepalive_timeout"],
        format!("0 ({}:1)", inc.display())
    );
    assert_eq!(
        ka["evidence"]["config_keepalive_requests"],
        "1000 (default)"
    );
    let log = find("access_log_unbuffered");
    assert_eq!(
        log["evidence"]["config_access_log"],
        format!(
            "http: {}/logs/access.log combined no buffer= ({m}:{})",
            ng.prefix.display(),
            line_of(&main, "access_log")
        )
    );
    let im = find("accept_imbalance");
    let events_line = line_of(&main, "accept_mutex on");
    assert_eq!(im["evidence"]["max_over_mean"], 2.0, "{im}");
    assert_eq!(
        im["evidence"]["config_accept_mutex"],
        format!("on ({m}:{events_line})")
    );
    assert_eq!(
        im["evidence"]["config_multi_accept"],
        format!("on ({m}:{events_line})")
    );
    assert_eq!(
        im["evidence"]["config_listen_reuseport"],
        format!(
            "127.0.0.1:{} no reuseport ({m}:{})",
            ng.port,
            line_of(&main, "listen ")
        )
    );
}

#[test]
fn after_a_reload_the_configuration_is_read_again() {
    let dir = tempfile::tempdir().unwrap();
    let ng = Nginx::start(&split_config(dir.path()));
    let old = ng.worker_pids();
    let probe = Probe::on(&ng).json().start();
    let edited = dir.path().join("conf.d/10-keepalive.conf");
    std::thread::sleep(Duration::from_millis(100));
    fs::write(&edited, "keepalive_timeout 7s;\nkeepalive_requests 50;\n").unwrap();
    ng.reload();
    let deadline = Instant::now() + Duration::from_secs(10);
    while ng.worker_pids().iter().filter(|p| !old.contains(p)).count() < 2 {
        assert!(Instant::now() < deadline, "no new workers after SIGHUP");
        std::thread::sleep(Duration::from_millis(50));
    }
    // The probe looks at the worker set every few hundred ms.
    std::thread::sleep(Duration::from_millis(1500));
    let cfg = &probe.stop().summary_json()["config"];
    let kt = value(cfg, "keepalive_timeout", "http");
    assert_eq!(
        va(kt),
        ("7s".to_string(), format!("{}:1", edited.display()))
    );
    assert!(kt.get("not_loaded").is_none(), "{kt}");
    assert!(cfg["files"]
        .as_array()
        .unwrap()
        .iter()
        .all(|f| f["changed_since_load"] == false));
}

/// Fds registered in worker `pid`'s epoll instance (`tfd:` lines of its eventpoll fd's
/// /proc fdinfo).
fn epoll_fds_watched(pid: u32) -> usize {
    let dir = format!("/proc/{pid}/fd");
    for e in fs::read_dir(&dir).unwrap().flatten() {
        let link = fs::read_link(e.path()).unwrap_or_default();
        if link.to_string_lossy() == "anon_inode:[eventpoll]" {
            let info = fs::read_to_string(format!(
                "/proc/{pid}/fdinfo/{}",
                e.file_name().to_string_lossy()
            ))
            .unwrap();
            return info.lines().filter(|l| l.starts_with("tfd:")).count();
        }
    }
    panic!("worker {pid} has no epoll fd");
}

/// A master whose prefix and main file have a space (its title joins its arguments
/// with spaces) and `-g 'worker_processes 3;'`, under 300 one-request connections
/// with `keepalive_timeout 0`: the summary's JSON.
fn spaced_master_summary(ng: &Nginx) -> Value {
    Probe::on(ng)
        .json()
        .summary_around(|| assert_eq!(one_request_per_connection(ng.addr(), 300), 300))
}

fn spaced_config() -> NginxConfig {
    NginxConfig {
        prefix_tag: "my  site ".into(),
        globals: "worker_processes 3;".into(),
        workers: 3,
        http_extra: "keepalive_timeout 0;".into(),
        ..NginxConfig::default()
    }
}

fn verdict(s: &Value, id: &str) -> Value {
    s["verdicts"]
        .as_array()
        .unwrap()
        .iter()
        .find(|v| v["id"] == id)
        .unwrap_or_else(|| panic!("no {id}: {}", s["verdicts"]))
        .clone()
}

#[test]
fn a_prefix_with_spaces_is_found_and_g_is_read_on_top_of_the_file() {
    let ng = Nginx::start(&spaced_config());
    let main = ng.prefix.join("nginx.conf");
    assert!(main.to_str().unwrap().contains("my  site "), "{main:?}");
    let s = spaced_master_summary(&ng);
    let cfg = &s["config"];
    assert_eq!(cfg["main_file"], main.to_str().unwrap(), "{cfg:#}");
    assert_eq!(cfg["found_by"], "-c");
    assert!(cfg.get("unknown").is_none(), "{cfg:#}");
    // The main file, read (no include).
    assert_eq!(cfg["files"].as_array().unwrap().len(), 1, "{cfg:#}");
    assert_eq!(cfg["globals"], "worker_processes 3;");
    assert_eq!(
        va(value(cfg, "worker_processes", "main")),
        ("3".into(), "-g".into())
    );
    let ka_at = ng.conf_at("keepalive_timeout 0");
    assert_eq!(
        va(value(cfg, "keepalive_timeout", "http")),
        ("0".into(), ka_at.clone())
    );
    assert_eq!(
        va(value(cfg, "worker_connections", "events")),
        ("1024".into(), ng.conf_at("worker_connections"))
    );
    // The access log configured under the prefix is the one read.
    let log = ng.prefix.join("logs/access.log");
    assert_eq!(
        s["access_log"]["files"][0]["path"],
        log.to_str().unwrap(),
        "{}",
        s["access_log"]
    );
    let ka = verdict(&s, "keepalive_off");
    assert_eq!(
        ka["evidence"]["config_keepalive_timeout"],
        format!("0 ({ka_at})")
    );
    // The advice names the setting with where it is set.
    let advice = ka["advice"].to_string();
    assert!(advice.contains(&format!("0 ({ka_at})")), "{ka:#}");
}

#[test]
fn a_main_file_that_cannot_be_found_leaves_every_setting_unknown() {
    let ng = Nginx::start(&spaced_config());
    let main = ng.prefix.join("nginx.conf");
    // Gone after nginx loaded it (a deploy that moved it): nothing to read.
    fs::rename(&main, ng.prefix.join("moved.conf")).unwrap();
    let s = spaced_master_summary(&ng);
    let cfg = &s["config"];
    let why = cfg["unknown"].as_str().unwrap_or_else(|| panic!("{cfg:#}"));
    assert!(
        why.starts_with(&format!(
            "the main file was not read ({}: cannot open",
            main.display()
        )),
        "{why}"
    );
    // No setting is shown as nginx's default in force; -g's is known.
    let values = cfg["values"].as_array().unwrap();
    assert!(values.iter().all(|v| v["at"] != "default"), "{cfg:#}");
    assert_eq!(
        va(value(cfg, "worker_processes", "main")),
        ("3".into(), "-g".into())
    );
    for list in ["access_logs", "error_logs", "listens"] {
        assert_eq!(cfg[list], serde_json::json!([]), "{list}: {cfg:#}");
    }
    // The access log section says why it is not read.
    let not_read = s["access_log"]["not_read"][0].as_str().unwrap_or_default();
    assert!(
        not_read
            .starts_with("which access logs nginx writes is unknown: the main file was not read"),
        "{}",
        s["access_log"]
    );
    // The verdict quotes no directive and uses its "not read" wording.
    let ka = verdict(&s, "keepalive_off");
    let evidence = ka["evidence"].as_object().unwrap();
    assert!(evidence.keys().all(|k| !k.starts_with("config_")), "{ka:#}");
    let text = ka.to_string();
    assert!(
        ka["advice"]
            .as_str()
            .unwrap()
            .contains("config is not read"),
        "{ka:#}"
    );
    assert!(!text.contains("(default)"), "{ka:#}");
}

/// A prefix with ` -c ` in it, the main file and the error log (`-e`, last) under it:
/// the title `nginx: master process nginx -p /tmp/nginx-probe-a -c bXXXX -c
/// /tmp/nginx-probe-a -c bXXXX/nginx.conf -e /tmp/nginx-probe-a -c
/// bXXXX/logs/error.log` has option words inside every value. Read with `-e` as a
/// value of one word, the last `-c` (`bXXXX/logs/error.log`) named the main file and
/// no reading had files that exist (every setting unknown); `-e` takes words as `-p`
/// and `-c` do, so the one reading whose files exist is found.
#[test]
fn a_prefix_with_an_option_word_and_e_is_read() {
    let ng = Nginx::start(&NginxConfig {
        prefix_tag: "a -c b".into(),
        http_extra: "keepalive_timeout 0;".into(),
        error_log_arg_last: true,
        ..NginxConfig::default()
    });
    let main = ng.prefix.join("nginx.conf");
    assert!(main.to_str().unwrap().contains("a -c b"), "{main:?}");
    let title = fs::read_to_string(format!("/proc/{}/cmdline", ng.master_pid())).unwrap();
    let e = format!(" -e {}", ng.prefix.join("logs/error.log").display());
    assert!(title.trim_end_matches('\0').ends_with(&e), "{title:?}");
    let s = Probe::on(&ng)
        .json()
        .summary_around(|| assert_eq!(one_request_per_connection(ng.addr(), 50), 50));
    let cfg = &s["config"];
    assert!(cfg.get("unknown").is_none(), "{cfg:#}");
    assert_eq!(cfg["main_file"], main.to_str().unwrap(), "{cfg:#}");
    assert_eq!(cfg["found_by"], "-c");
    assert_eq!(
        cfg["prefix"],
        format!("{}/", ng.prefix.display()),
        "{cfg:#}"
    );
    assert_eq!(
        va(value(cfg, "keepalive_timeout", "http")),
        ("0".into(), ng.conf_at("keepalive_timeout 0"))
    );
}

/// `/dev/null` as nginx's error log, a server's access log and an include: a
/// deliberate setting, not flagged. The configuration reads without a problem (the
/// include is empty to nginx too), the error log is said discarded, the access log not
/// read as discarded (not "0 lines = 0% of the requests"), and the workers' writes to
/// /dev/null are not counted as error-log writes (every /dev/null fd has the error
/// log's inode then).
#[test]
fn dev_null_as_a_log_or_an_include_is_what_it_is_not_flagged() {
    let ng = Nginx::start(&NginxConfig {
        error_log_level: String::new(),
        main_extra: "error_log /dev/null;".into(),
        events_extra: "include /dev/null;".into(),
        server_extra: "access_log /dev/null;".into(),
        access_log: Some("off".into()),
        ..NginxConfig::default()
    });
    let load = || assert_eq!(one_request_per_connection(ng.addr(), 40), 40);
    let s = Probe::on(&ng).json().summary_around(load);
    let cfg = &s["config"];
    assert_eq!(cfg["errors"], serde_json::json!([]), "{cfg:#}");
    assert!(cfg.get("unknown").is_none(), "{cfg:#}");
    let e = &s["nginx_errors"];
    assert_eq!(e["readable"], false, "{e}");
    assert_eq!(
        e["unknown_reason"],
        "/dev/null: nginx is configured to discard these writes (a log to /dev/null), so there are no lines to count"
    );
    let a = &s["access_log"];
    assert_eq!(a["files"], serde_json::json!([]), "{a:#}");
    assert_eq!(
        a["not_read"],
        serde_json::json!([format!(
            "/dev/null ({}): nginx is configured to discard these writes, so there are no lines to count",
            ng.conf_at("access_log /dev/null")
        )]),
        "{a:#}"
    );
    for w in workers(&s) {
        assert!(
            w["writes"]["error_log"]["count"].as_u64().unwrap_or(0) == 0,
            "{w}"
        );
    }
    let writes: u64 = workers(&s)
        .iter()
        .map(|w| w["writes"]["other_file"]["count"].as_u64().unwrap_or(0))
        .sum();
    assert_eq!(writes, 40, "one access-log line per request, to /dev/null");
    let text = Probe::on(&ng).plain().around(load).stdout;
    assert!(!text.contains("not a regular file"), "{text}");
}
