//! Checks of `cargo xtask dist`'s artifacts in `target/dist` (ignored by default: the
//! static build is slow; `cargo xtask dist --check` runs them with `--ignored`).

use std::{
    path::{Path, PathBuf},
    process::Command,
};

fn dist_dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .parent()
        .expect("workspace root")
        .join("target/dist")
}

fn deb() -> PathBuf {
    let debs: Vec<PathBuf> = std::fs::read_dir(dist_dir())
        .expect("target/dist: run `cargo xtask dist` first")
        .flatten()
        .map(|e| e.path())
        .filter(|p| p.extension().is_some_and(|e| e == "deb"))
        .collect();
    assert_eq!(debs.len(), 1, "{debs:?}");
    debs[0].clone()
}

fn stdout_of(cmd: &mut Command) -> String {
    let out = cmd.output().unwrap_or_else(|e| panic!("{cmd:?}: {e}"));
    assert!(out.status.success(), "{cmd:?}: {out:?}");
    String::from_utf8(out.stdout).expect("UTF-8 output")
}

#[test]
#[ignore = "needs `cargo xtask dist`"]
fn the_static_binary_is_static_and_runs() {
    let bin = dist_dir().join("nginx-probe");
    let out = Command::new("ldd").arg(&bin).output().expect("run ldd");
    let said =
        String::from_utf8_lossy(&out.stdout).to_string() + &String::from_utf8_lossy(&out.stderr);
    assert!(
        said.contains("not a dynamic executable") || said.contains("statically linked"),
        "{said}"
    );
    let version = stdout_of(Command::new(&bin).arg("--version"));
    assert!(version.starts_with("nginx-probe "), "{version}");
    // Bad input on the static binary: the same one-line usage error and exit 2.
    let out = Command::new(&bin)
        .args(["--pid", "abc"])
        .output()
        .expect("run");
    assert_eq!(out.status.code(), Some(2));
    assert_eq!(String::from_utf8_lossy(&out.stderr).lines().count(), 1);
}

#[test]
#[ignore = "needs `cargo xtask dist`"]
fn the_deb_lists_each_file() {
    let listing = stdout_of(Command::new("dpkg-deb").arg("-c").arg(deb()));
    let paths: Vec<&str> = listing
        .lines()
        .filter_map(|l| l.split_whitespace().nth(5))
        .collect();
    for want in [
        "./usr/bin/nginx-probe",
        "./usr/share/man/man8/nginx-probe.8.gz",
        "./usr/share/bash-completion/completions/nginx-probe",
        "./usr/share/zsh/vendor-completions/_nginx-probe",
        "./usr/share/fish/vendor_completions.d/nginx-probe.fish",
        "./lib/systemd/system/nginx-probe.service",
        "./usr/share/nginx-probe/grafana/nginx-probe.json",
        "./usr/share/nginx-probe/prometheus/alerts.yml",
        "./usr/share/doc/nginx-probe/LICENSE-MIT",
        "./usr/share/doc/nginx-probe/LICENSE-APACHE",
        "./usr/share/doc/nginx-probe/README.md",
        "./usr/share/doc/nginx-probe/CONTRIBUTING.md",
        "./usr/share/doc/nginx-probe/docs/metrics.md",
        "./usr/share/doc/nginx-probe/docs/json.md",
    ] {
        assert!(paths.contains(&want), "{want} not in the .deb:\n{listing}");
    }
    // The binary is executable by everyone.
    let bin = listing
        .lines()
        .find(|l| l.ends_with(" ./usr/bin/nginx-probe"))
        .expect("binary line");
    assert!(bin.starts_with("-rwxr-xr-x"), "{bin}");
    let info = stdout_of(
        Command::new("dpkg-deb")
            .arg("-f")
            .arg(deb())
            .arg("Architecture"),
    );
    assert_eq!(info.trim(), "amd64");
}

#[test]
#[ignore = "needs `cargo xtask dist`"]
fn the_man_page_renders() {
    let page = dist_dir().join("nginx-probe.8.gz");
    let text = stdout_of(
        Command::new("man")
            .arg("-l")
            .arg(&page)
            .env("MANPAGER", "cat")
            .env("MANWIDTH", "100"),
    );
    assert!(text.contains("nginx-probe"), "{text}");
    for option in ["--pid-file", "--listen", "--verdict-window", "--duration"] {
        assert!(
            text.contains(option),
            "{option} not in the man page:\n{text}"
        );
    }
    // The hidden asset command is not documented.
    assert!(!text.contains("generate-assets"), "{text}");
    let bash = std::fs::read_to_string(dist_dir().join("completions/nginx-probe.bash"))
        .expect("bash completion");
    assert!(bash.contains("--pid-file"));
}
