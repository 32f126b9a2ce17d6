use super::*;

fn bin() -> BinaryFacts {
    BinaryFacts {
        prefix: Some("/usr/share/nginx".into()),
        conf_path: Some("/etc/nginx/nginx.conf".into()),
        ..Default::default()
    }
}

/// A root holding `files` (path inside the root, text).
fn root(files: &[(&str, &str)]) -> tempfile::TempDir {
    let dir = tempfile::tempdir().unwrap();
    for (p, text) in files {
        let full = dir.path().join(p.trim_start_matches('/'));
        std::fs::create_dir_all(full.parent().unwrap()).unwrap();
        std::fs::write(full, text).unwrap();
    }
    dir
}

fn read(dir: &tempfile::TempDir, cmdline: &str) -> ConfigReport {
    read_config(dir.path(), cmdline, &bin(), None, Limits::default())
}

fn val<'a>(r: &'a ConfigReport, d: &str, scope: &str) -> &'a config::ConfigValue {
    r.values
        .iter()
        .find(|v| v.directive == d && v.scope == scope)
        .unwrap_or_else(|| panic!("{d} in {scope}: {:#?}", r.values))
}

/// `locate` with no file existing (the plain reading): (main, found_by, prefix).
fn located(cmdline: &str, bin: &BinaryFacts) -> (String, &'static str, String) {
    let l = locate(cmdline, bin, |_, _| false);
    (l.main.unwrap(), l.found_by, l.build.prefix)
}

#[test]
fn a_relative_c_is_under_the_prefix_and_the_binary_gives_the_rest() {
    assert_eq!(
        located(
            "nginx: master process nginx -p /srv/n -c conf/x.conf",
            &bin()
        ),
        ("/srv/n/conf/x.conf".into(), "-c", "/srv/n/".into())
    );
    let (p, by, _) = located("nginx: master process /usr/sbin/nginx", &bin());
    assert_eq!((p.as_str(), by), ("/etc/nginx/nginx.conf", "--conf-path"));
    let (p, by, _) = located("nginx: master process nginx", &BinaryFacts::default());
    assert_eq!(
        (p.as_str(), by),
        ("/usr/local/nginx/conf/nginx.conf", "default")
    );
}

/// The newcomer's case: a prefix and main file with a space, `-g` on top. The title
/// joins the arguments with spaces; the reading whose files exist in the root is the
/// one read, and `-g`'s directives are quoted as `-g`.
#[test]
fn a_path_with_spaces_is_found_in_the_root_and_g_applies_on_top() {
    let main = "events { worker_connections 777; }\nhttp {\n  keepalive_timeout 0;\n}\n";
    let d = root(&[("/tmp/x/my site/nginx.conf", main), ("/tmp/x/my", "decoy")]);
    let title = "nginx: master process /usr/sbin/nginx -p /tmp/x/my site/ -c /tmp/x/my site/nginx.conf -g daemon on; worker_processes 3;\0\0";
    let r = read(&d, title);
    assert!(r.errors.is_empty(), "{:?}", r.errors);
    assert_eq!(r.unknown, None);
    assert_eq!(r.main_file, "/tmp/x/my site/nginx.conf");
    assert_eq!(r.prefix, "/tmp/x/my site/");
    assert_eq!(r.globals.as_deref(), Some("daemon on; worker_processes 3;"));
    let v = |d: &str, s: &str| {
        let v = val(&r, d, s);
        (v.value.clone(), v.at.clone())
    };
    assert_eq!(v("worker_processes", "main"), ("3".into(), "-g".into()));
    assert_eq!(
        v("worker_connections", "events"),
        ("777".into(), "/tmp/x/my site/nginx.conf:1".into())
    );
    assert_eq!(
        v("keepalive_timeout", "http"),
        ("0".into(), "/tmp/x/my site/nginx.conf:3".into())
    );
    // Several spaces in a row, relative -c under the prefix, -g first.
    let d = root(&[("/srv/a  b/conf/n.conf", "worker_processes 2;\n")]);
    let r = read(
        &d,
        "nginx: master process nginx -g pid '/run/a b.pid'; -p /srv/a  b -c conf/n.conf",
    );
    assert_eq!(r.unknown, None, "{:?}", r.errors);
    assert_eq!(r.main_file, "/srv/a  b/conf/n.conf");
    assert_eq!(val(&r, "worker_processes", "main").value, "2");
}

/// When the main file is not read, nothing is shown as a default in force: every
/// setting is unknown and says why; `-g`'s are still known.
#[test]
fn an_unread_main_file_leaves_every_setting_unknown_never_a_default() {
    // The file is gone: one reading, opened, not found.
    let d = root(&[("/srv/other.conf", "worker_processes 2;\n")]);
    let r = read(
        &d,
        "nginx: master process nginx -c /srv/gone.conf -g worker_processes 3;",
    );
    let why = r.unknown.clone().expect("unknown");
    assert!(
        why.starts_with("the main file was not read (/srv/gone.conf: cannot open"),
        "{why}"
    );
    assert!(r.values.iter().all(|v| !v.is_default()), "{:#?}", r.values);
    assert_eq!(r.values.len(), 1);
    assert_eq!(
        (r.values[0].value.as_str(), r.values[0].at.as_str()),
        ("3", "-g")
    );
    assert!(r.access_logs.is_empty() && r.error_logs.is_empty() && r.listens.is_empty());
    assert!(r.log_paths.is_empty());
    // Spaces, and both readings name files that exist: the title does not say which
    // nginx runs; no file is opened.
    let d = root(&[
        ("/tmp/x/my site/nginx.conf", "worker_processes 2;\n"),
        ("/tmp/x/my site/ -c /tmp/x/my site/nginx.conf/f", ""),
        ("/etc/nginx/nginx.conf", "worker_processes 4;\n"),
    ]);
    let r = read(
        &d,
        "nginx: master process nginx -p /tmp/x/my site/ -c /tmp/x/my site/nginx.conf",
    );
    let why = r.unknown.clone().expect("unknown");
    assert!(
        why.starts_with("the master's title does not say where its configuration is: its arguments were joined with spaces, and 2 readings name files that exist"),
        "{why}"
    );
    assert_eq!((r.main_file.as_str(), r.found_by.as_str()), ("", "unknown"));
    assert!(r.files.is_empty() && r.values.is_empty());
    // A main file that does not parse is not read either.
    let d = root(&[("/etc/nginx/nginx.conf", "http {\n")]);
    let r = read(&d, "nginx: master process /usr/sbin/nginx");
    assert!(r.unknown.expect("unknown").contains("not parsed"));
    assert!(r.values.is_empty());
}

#[test]
fn absent_directives_take_nginx_defaults() {
    let d = root(&[(
        "/etc/nginx/nginx.conf",
        "events {}\nhttp {\n  server { listen 8080; }\n}\n",
    )]);
    let r = read(&d, "nginx: master process /usr/sbin/nginx");
    assert!(r.errors.is_empty(), "{:?}", r.errors);
    for (name, scope, value) in [
        ("worker_processes", "main", "1"),
        ("worker_connections", "events", "512"),
        ("multi_accept", "events", "off"),
        ("accept_mutex", "events", "off"),
        ("keepalive_timeout", "http", "75s"),
        // No binary to read the version from: both of nginx's defaults said.
        (
            "keepalive_requests",
            "http",
            "1000 (100 before nginx 1.19.10)",
        ),
        ("proxy_http_version", "http", "1.0"),
    ] {
        let v = val(&r, name, scope);
        assert_eq!(
            (v.value.as_str(), v.at.as_str()),
            (value, "default"),
            "{name}"
        );
    }
    assert_eq!(r.listens.len(), 1);
    assert_eq!(r.listens[0].address, "8080");
    assert_eq!(r.listens[0].backlog, None);
    assert_eq!(r.listens[0].at, "/etc/nginx/nginx.conf:3");
    assert_eq!(r.access_logs.len(), 1);
    assert_eq!(r.access_logs[0].at, "default");
    assert_eq!(r.error_logs[0].value, "logs/error.log error");
}

/// A main file including one file from `events` and a glob of two from `http` (a
/// hidden file beside them is not read), as read.
fn included_tree() -> ConfigReport {
    let main = "worker_processes 2;\nevents {\n    include /etc/nginx/ev.conf;\n}\nhttp {\n    keepalive_timeout 65s;\n    include conf.d/*.conf;\n}\n";
    let ev = "worker_connections 4096;\nmulti_accept on;\n";
    let a = "upstream app {\n  server 127.0.0.1:9000 max_fails=3;\n  keepalive 16;\n}\n";
    let b = concat!(
        "server {\n",
        "  listen 127.0.0.1:8080 backlog=1024 reuseport;\n",
        "  server_name b.test;\n",
        "  keepalive_timeout 0;\n",
        "  access_log /var/log/b.log main buffer=32k flush=5s;\n",
        "  proxy_set_header Connection \"\";\n",
        "  location /api {\n",
        "    proxy_pass http://app;\n",
        "    proxy_http_version 1.1;\n",
        "  }\n",
        "}\n"
    );
    let d = root(&[
        ("/etc/nginx/nginx.conf", main),
        ("/etc/nginx/ev.conf", ev),
        ("/etc/nginx/conf.d/a.conf", a),
        ("/etc/nginx/conf.d/b.conf", b),
        ("/etc/nginx/conf.d/.hidden.conf", "this is not parsed {"),
    ]);
    read(
        &d,
        "nginx: master process /usr/sbin/nginx -c /etc/nginx/nginx.conf",
    )
}

/// `proxy_set_header` at the http level reaches a location whose server and location
/// set none (a trial's `Connection ""` at http was read as `close (default)`); a level
/// with a `proxy_set_header` of its own inherits none of the outer ones.
#[test]
fn proxy_set_header_at_http_reaches_the_locations_that_set_none() {
    let main = concat!(
        "events {}\n",
        "http {\n",
        "  proxy_http_version 1.1;\n",
        "  proxy_set_header Connection \"\";\n",
        "  server { server_name a; location /x { proxy_pass http://u; } }\n",
        "  server { server_name b; proxy_set_header Host h;\n",
        "    location /y { proxy_pass http://u; } }\n",
        "}\n"
    );
    let d = root(&[("/etc/nginx/nginx.conf", main)]);
    let r = read(
        &d,
        "nginx: master process /usr/sbin/nginx -c /etc/nginx/nginx.conf",
    );
    let a = val(&r, "proxy_set_header Connection", "server a location /x");
    assert_eq!(
        (a.value.as_str(), a.at.as_str()),
        ("", "/etc/nginx/nginx.conf:4")
    );
    let b = val(&r, "proxy_set_header Connection", "server b location /y");
    assert_eq!((b.value.as_str(), b.at.as_str()), ("close", "default"));
}

#[test]
fn includes_globs_overrides_and_lines() {
    let r = included_tree();
    assert!(r.errors.is_empty(), "{:?}", r.errors);
    let paths: Vec<&str> = r.files.iter().map(|f| f.path.as_str()).collect();
    assert_eq!(
        paths,
        [
            "/etc/nginx/nginx.conf",
            "/etc/nginx/ev.conf",
            "/etc/nginx/conf.d/a.conf",
            "/etc/nginx/conf.d/b.conf"
        ]
    );
    assert_eq!(
        val(&r, "worker_processes", "main").at,
        "/etc/nginx/nginx.conf:1"
    );
    let wc = val(&r, "worker_connections", "events");
    assert_eq!(
        (wc.value.as_str(), wc.at.as_str()),
        ("4096", "/etc/nginx/ev.conf:1")
    );
    assert_eq!(val(&r, "multi_accept", "events").at, "/etc/nginx/ev.conf:2");
    let kt = r.value("keepalive_timeout").unwrap();
    assert_eq!(
        (kt.value.as_str(), kt.at.as_str()),
        ("65s", "/etc/nginx/nginx.conf:6")
    );
    let o: Vec<_> = r.overrides("keepalive_timeout").collect();
    assert_eq!(o.len(), 1);
    assert_eq!(
        (o[0].scope.as_str(), o[0].value.as_str(), o[0].at.as_str()),
        ("server b.test", "0", "/etc/nginx/conf.d/b.conf:4")
    );
}

#[test]
fn an_included_server_gives_its_listen_and_access_log() {
    let r = included_tree();
    let l = &r.listens[0];
    assert_eq!(
        (
            l.address.as_str(),
            l.backlog.as_deref(),
            l.reuseport,
            l.at.as_str()
        ),
        (
            "127.0.0.1:8080",
            Some("1024"),
            true,
            "/etc/nginx/conf.d/b.conf:2"
        )
    );
    let logs: Vec<_> = r
        .access_logs
        .iter()
        .map(|a| (a.path.as_str(), a.at.as_str()))
        .collect();
    // The only server sets its own access_log: nginx never opens its default one
    // (the newcomer's trial: it was listed, and read, as Debian's compiled-in path).
    assert_eq!(logs, [("/var/log/b.log", "/etc/nginx/conf.d/b.conf:5")]);
    assert_eq!(r.access_logs[0].buffer.as_deref(), Some("32k"));
    assert_eq!(r.access_logs[0].flush.as_deref(), Some("5s"));
    assert_eq!(r.access_logs[0].format, "main");
}

#[test]
fn an_included_location_and_upstream_give_their_values() {
    let r = included_tree();
    let loc = "server b.test location /api";
    let hv = val(&r, "proxy_http_version", loc);
    assert_eq!(
        (hv.value.as_str(), hv.at.as_str()),
        ("1.1", "/etc/nginx/conf.d/b.conf:9")
    );
    let conn = val(&r, "proxy_set_header Connection", loc);
    assert_eq!(
        (conn.value.as_str(), conn.at.as_str()),
        ("", "/etc/nginx/conf.d/b.conf:6")
    );
    assert_eq!(val(&r, "proxy_read_timeout", loc).at, "default");
    let up = &r.upstreams[0];
    assert_eq!(
        (up.name.as_str(), up.at.as_str()),
        ("app", "/etc/nginx/conf.d/a.conf:1")
    );
    assert_eq!(
        (
            up.servers[0].max_fails.as_str(),
            up.servers[0].fail_timeout.as_str()
        ),
        ("3", "10s")
    );
    let ka = val(&r, "keepalive", "upstream app");
    assert_eq!(
        (ka.value.as_str(), ka.at.as_str()),
        ("16", "/etc/nginx/conf.d/a.conf:3")
    );
    assert_eq!(val(&r, "keepalive_timeout", "upstream app").at, "default");
}

#[test]
fn a_file_changed_after_the_load_is_flagged() {
    let d = root(&[(
        "/etc/nginx/nginx.conf",
        "events { worker_connections 100; }\n",
    )]);
    let mtime = std::fs::metadata(d.path().join("etc/nginx/nginx.conf"))
        .unwrap()
        .modified()
        .unwrap()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_secs_f64();
    let r = read_config(d.path(), "", &bin(), Some(mtime - 10.0), Limits::default());
    assert!(r.files[0].changed_since_load);
    let v = val(&r, "worker_connections", "events");
    assert!(v.not_loaded);
    assert_eq!(
        v.quoted(),
        "100 (/etc/nginx/nginx.conf:1, on disk, possibly not loaded)"
    );
    let r = read_config(d.path(), "", &bin(), Some(mtime + 10.0), Limits::default());
    assert!(!r.changed_since_load());
}

#[test]
fn loops_symlinks_out_of_the_root_and_big_files_are_one_line_each() {
    let d = root(&[
        (
            "/etc/nginx/nginx.conf",
            "include loop.conf;\ninclude out.conf;\ninclude big.conf;\ninclude broken.conf;\n",
        ),
        ("/etc/nginx/broken.conf", "http {\n broken \n"),
        (
            "/etc/nginx/loop.conf",
            "include loop.conf;\nworker_processes 3;\n",
        ),
        ("/etc/nginx/big.conf", &"#".repeat(5 << 20)),
    ]);
    // An absolute symlink resolves inside the root: /etc/passwd of the root, absent.
    std::os::unix::fs::symlink("/etc/passwd", d.path().join("etc/nginx/out.conf")).unwrap();
    let r = read(&d, "");
    assert_eq!(r.errors.len(), 4, "{:#?}", r.errors);
    assert!(r.errors[0]
        .starts_with("/etc/nginx/loop.conf (included at /etc/nginx/loop.conf:1): include loop"));
    assert!(r.errors[1]
        .starts_with("/etc/nginx/out.conf (included at /etc/nginx/nginx.conf:2): cannot open"));
    assert!(
        r.errors[2].contains("over the 4194304 byte limit"),
        "{}",
        r.errors[2]
    );
    assert!(
        r.errors[3].starts_with("/etc/nginx/broken.conf:"),
        "{}",
        r.errors[3]
    );
    // The loop's first level was read once.
    assert_eq!(
        val(&r, "worker_processes", "main").at,
        "/etc/nginx/loop.conf:2"
    );
}

#[test]
fn limits_bound_files_and_glob_matches() {
    let mut files: Vec<(String, String)> = (0..300)
        .map(|i| (format!("/etc/nginx/m/{i:04}.conf"), format!("# {i}\n")))
        .collect();
    files.push(("/etc/nginx/nginx.conf".into(), "include m/*.conf;\n".into()));
    let refs: Vec<(&str, &str)> = files
        .iter()
        .map(|(a, b)| (a.as_str(), b.as_str()))
        .collect();
    let d = root(&refs);
    let r = read(&d, "");
    assert_eq!(r.files.len(), 257, "main + 256 matches");
    assert_eq!(
        r.errors,
        ["/etc/nginx/nginx.conf:1: include /etc/nginx/m/*.conf: only the first 256 matches read"]
    );
    // What was not read may set anything: no value is vouched for (trial 9).
    let ka = r.value("keepalive_timeout").expect("the default");
    assert!(ka.is_default() && ka.unread_may_set, "{ka:?}");
    assert_eq!(
        ka.quoted(),
        "75s (default; a config file not read may set it)"
    );
}

#[test]
fn a_variable_inside_a_word_stays_in_that_word() {
    let dir = root(&[(
        "/etc/nginx/nginx.conf",
        "http {\n    access_log /l/access-$logdate.log main buffer=32k;\n    access_log \"/l/b ${host}.log\";\n    access_log $p combined;\n}\n",
    )]);
    let r = read(&dir, "nginx: master process /usr/sbin/nginx");
    let logs: Vec<(&str, &str, Option<&str>)> = r
        .access_logs
        .iter()
        .map(|a| (a.path.as_str(), a.format.as_str(), a.buffer.as_deref()))
        .collect();
    assert_eq!(
        logs,
        [
            ("/l/access-$logdate.log", "main", Some("32k")),
            ("/l/b ${host}.log", "combined", None),
            ("$p", "combined", None),
        ]
    );
    assert!(r.access_logs.iter().all(|a| !a.bufferable()));
}

#[test]
fn access_log_off_has_no_format_and_reads_as_off() {
    let dir = root(&[(
        "/etc/nginx/nginx.conf",
        "http {\n    access_log off;\n    access_log /l/a.log main buffer=32k flush=5s;\n}\n",
    )]);
    let r = read(&dir, "nginx: master process /usr/sbin/nginx");
    assert_eq!(r.access_logs[0].format, "");
    assert_eq!(r.access_logs[0].spec(" unbuffered"), "off");
    assert_eq!(
        r.access_logs[1].spec(" unbuffered"),
        "/l/a.log main buffer=32k flush=5s"
    );
}

#[test]
fn include_globs_read_brackets_as_glob3_does() {
    let dir = root(&[
        (
            "/etc/nginx/nginx.conf",
            "http {\n    include /etc/nginx/c/[ab]*.conf;\n    include /etc/nginx/c/x[1.conf;\n}\n",
        ),
        ("/etc/nginx/c/a.conf", "gzip on;\n"),
        ("/etc/nginx/c/b.conf", "sendfile on;\n"),
        ("/etc/nginx/c/c.conf", "tcp_nopush on;\n"),
        ("/etc/nginx/c/x[1.conf", "tcp_nodelay off;\n"),
    ]);
    let r = read(&dir, "nginx: master process /usr/sbin/nginx");
    assert!(r.errors.is_empty(), "{:?}", r.errors);
    let files: Vec<&str> = r.files.iter().map(|f| f.path.as_str()).collect();
    assert_eq!(
        files,
        [
            "/etc/nginx/nginx.conf",
            "/etc/nginx/c/a.conf",
            "/etc/nginx/c/b.conf",
            "/etc/nginx/c/x[1.conf"
        ]
    );
    assert_eq!(val(&r, "tcp_nodelay", "http").value, "off");
}

/// Debian 13's nginx 1.26 is built `--error-log-path=stderr`: without an `error_log`
/// it logs to its standard error (auto/options empties the path), not to a file
/// `<prefix>/stderr`. Said as nginx means it, and never looked up as a log file; an
/// `error_log stderr` directive likewise.
#[test]
fn an_error_log_path_of_stderr_is_the_standard_error() {
    let stderr_bin = BinaryFacts {
        error_log_path: Some("stderr".into()),
        ..bin()
    };
    let l = locate(
        "nginx: master process /usr/sbin/nginx",
        &stderr_bin,
        |_, _| false,
    );
    assert_eq!(l.build.error_log.as_deref(), Some("stderr"));
    let d = root(&[("/etc/nginx/nginx.conf", "events {}\nhttp {}\n")]);
    let r = read_config(
        d.path(),
        "nginx: master process /usr/sbin/nginx",
        &stderr_bin,
        None,
        Limits::default(),
    );
    assert_eq!(r.error_logs.len(), 1, "{:?}", r.error_logs);
    assert_eq!(
        r.error_logs[0].value,
        "stderr (the standard error nginx was started with, not a file) error"
    );
    assert_eq!(r.error_logs[0].at, config::DEFAULT);
    let paths: Vec<(&str, &str)> = r
        .log_paths
        .iter()
        .map(|l| (l.kind, l.path.as_str()))
        .collect();
    assert!(paths.contains(&("error_log", "stderr")), "{paths:?}");
    // Written in the configuration: the same words, at its file:line.
    let d = root(&[(
        "/etc/nginx/nginx.conf",
        "error_log stderr warn;\nevents {}\n",
    )]);
    let r = read(&d, "nginx: master process /usr/sbin/nginx");
    assert_eq!(
        r.error_logs[0].value,
        "stderr (the standard error nginx was started with, not a file) warn"
    );
    assert_eq!(r.error_logs[0].at, "/etc/nginx/nginx.conf:1");
}

/// A newcomer's master: `nginx -p "/srv/a -c b" -e "/srv/a -c b/logs/error.log"`
/// (Debian's binary: the main file is its `--conf-path=`). The title reads as a `-c b`
/// then a second `-c b/logs/error.log` too; `-e` takes words as `-p` does, so the one
/// reading whose prefix and main file exist is found, and its `-e` is the error log
/// nginx opens when the configuration names none.
#[test]
fn an_e_path_with_an_option_word_is_read_with_its_prefix() {
    let d = root(&[
        ("/etc/nginx/nginx.conf", "events {}\nhttp {}\n"),
        ("/srv/a -c b/logs/error.log", ""),
    ]);
    let title =
        "nginx: master process /usr/sbin/nginx -p /srv/a -c b -e /srv/a -c b/logs/error.log\0\0";
    let r = read(&d, title);
    assert!(r.errors.is_empty(), "{:?}", r.errors);
    assert_eq!(r.unknown, None);
    assert_eq!(r.main_file, "/etc/nginx/nginx.conf");
    assert_eq!(r.found_by, "--conf-path");
    assert_eq!(r.prefix, "/srv/a -c b/");
    assert_eq!(r.error_logs[0].value, "/srv/a -c b/logs/error.log error");
    assert_eq!(r.error_logs[0].at, "default");
}

/// `include /dev/null` (a deliberate, common way to include nothing) reads as nginx
/// reads it, empty, with no problem flagged; other devices and FIFOs are still never
/// read as configuration. The host's own root: its /dev/null and /dev/zero.
#[test]
fn the_null_device_is_included_as_empty_and_other_devices_are_refused() {
    let d = tempfile::tempdir().unwrap();
    let dir = d.path().to_str().unwrap();
    std::fs::write(
        d.path().join("nginx.conf"),
        "include /dev/null;\nevents { include /dev/null; }\nhttp { include /dev/zero; include fifo; keepalive_timeout 5s; }\n",
    )
    .unwrap();
    nix::unistd::mkfifo(&d.path().join("fifo"), nix::sys::stat::Mode::S_IRWXU).unwrap();
    let title = format!("nginx: master process nginx -p {dir} -c nginx.conf");
    let r = read_config(Path::new("/"), &title, &bin(), None, Limits::default());
    assert_eq!(
        r.errors,
        [
            format!("/dev/zero (included at {dir}/nginx.conf:3): not a regular file"),
            format!("{dir}/fifo (included at {dir}/nginx.conf:3): not a regular file"),
        ]
    );
    assert_eq!(r.files.len(), 1, "{:?}", r.files);
    assert_eq!(val(&r, "keepalive_timeout", "http").value, "5s");
    let meta = |p: &str| std::fs::metadata(p).unwrap();
    assert!(crate::collect::tail::is_null_device(&meta("/dev/null")));
    assert!(!crate::collect::tail::is_null_device(&meta("/dev/zero")));
    assert!(!crate::collect::tail::is_null_device(&meta(&format!(
        "{dir}/nginx.conf"
    ))));
}

/// A file edited (its mtime moved) or removed after it was read is marked, looked up
/// again inside the master's root (here this process's own, `/`); one untouched is not.
#[test]
fn a_file_edited_or_removed_after_it_was_read_is_marked() {
    use std::os::unix::fs::MetadataExt;
    let dir = tempfile::tempdir().unwrap();
    let (a, b, c) = (
        dir.path().join("a.conf"),
        dir.path().join("b.conf"),
        dir.path().join("c.conf"),
    );
    for p in [&a, &b, &c] {
        std::fs::write(p, "x").unwrap();
    }
    let file = |p: &std::path::Path| {
        let m = std::fs::metadata(p).unwrap();
        config::ConfigFile {
            path: p.display().to_string(),
            bytes: 1,
            mtime_unix_s: Some(m.mtime() as f64 + m.mtime_nsec() as f64 / 1e9),
            ..Default::default()
        }
    };
    let mut cfg = ConfigReport {
        files: vec![file(&a), file(&b), file(&c)],
        ..ConfigReport::default()
    };
    let me = std::process::id();
    mark_changed_since_read(me, &mut cfg);
    assert!(cfg.files.iter().all(|f| !f.changed_since_read));
    std::fs::OpenOptions::new()
        .write(true)
        .open(&a)
        .unwrap()
        .set_modified(std::time::SystemTime::now() + std::time::Duration::from_secs(10))
        .unwrap();
    std::fs::remove_file(&b).unwrap();
    mark_changed_since_read(me, &mut cfg);
    let marked: Vec<bool> = cfg.files.iter().map(|f| f.changed_since_read).collect();
    assert_eq!(marked, [true, true, false]);
}
