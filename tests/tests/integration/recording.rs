//! Recordings: `--record FILE`, `nginx-probe report FILE` and `nginx-probe compare A B`
//! on real runs, including the ways a recording goes wrong (unwritable path, a disk that
//! fills during the run, a probe killed mid-run).

use std::{path::Path, process::Command, thread, time::Duration};

use nginx_probe_tests::{
    assert_released, keepalive_requests, one_request_per_connection, prog_ids_held_by,
    total_accepts, Nginx, NginxConfig, Probe,
};
use nix::sys::signal::Signal;
use serde_json::Value;

fn lines(path: &Path) -> Vec<Value> {
    std::fs::read_to_string(path)
        .unwrap_or_else(|e| panic!("read {}: {e}", path.display()))
        .lines()
        .map(|l| serde_json::from_str(l).unwrap_or_else(|e| panic!("bad line ({e}): {l}")))
        .collect()
}

/// Records `load` on `ng` with 1 s intervals until it is done plus 1.5 s.
fn record(ng: &Nginx, path: &Path, load: impl FnOnce()) -> nginx_probe_tests::ProbeOutput {
    Probe::on(ng)
        .record(path)
        .interval(1)
        .summary_only()
        // Every write counted (a recording samples the detail layer by default; the
        // sampled recording is tested in detail.rs): compare's exact per-request figures.
        .args(["--detail", "full"])
        // Past the next interval line, so the intervals hold every event.
        .settle(Duration::from_millis(1500))
        .around(load)
}

fn nginx_version() -> String {
    let out = Command::new("/usr/sbin/nginx").arg("-v").output().unwrap();
    let s = String::from_utf8_lossy(&out.stderr);
    s.trim().trim_start_matches("nginx version: ").to_string()
}

#[test]
fn a_recording_reads_back_as_the_same_report_and_describes_its_run() {
    let ng = Nginx::start(&NginxConfig::default());
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("run.jsonl");
    let out = record(&ng, &path, || {
        // Over 3 s so that several intervals are recorded.
        for _ in 0..3 {
            assert_eq!(one_request_per_connection(ng.addr(), 100), 100);
            thread::sleep(Duration::from_millis(1000));
        }
    });
    let live = out.stdout;
    let recorded = lines(&path);
    let header = &recorded[0];
    assert_eq!(header["type"], "header");
    assert_eq!(header["schema"], 1);
    assert_eq!(header["master_pid"], ng.master_pid());
    assert_eq!(header["nginx_version"], nginx_version());
    let mut workers: Vec<u64> = header["workers"]
        .as_array()
        .unwrap()
        .iter()
        .map(|w| w.as_u64().unwrap())
        .collect();
    workers.sort();
    let mut expected: Vec<u64> = ng.worker_pids().iter().map(|&p| p as u64).collect();
    expected.sort();
    assert_eq!(workers, expected);
    assert_eq!(header["options"]["interval_s"], 1.0);
    let summary = recorded.last().unwrap();
    assert_eq!(summary["type"], "summary");
    assert_eq!(total_accepts(summary), 300);
    let intervals: Vec<&Value> = recorded
        .iter()
        .filter(|l| l["type"] == "interval")
        .collect();
    assert!(intervals.len() >= 3, "{} intervals", intervals.len());
    // Intervals partition the run: their accepts add up to the summary's.
    let in_intervals: u64 = intervals.iter().map(|i| total_accepts(i)).sum();
    assert_eq!(in_intervals, 300);
    // And their lengths add up to the summary's: one snapshot ends the last partial
    // interval and the summary (trial 21: a tail under 50 ms was left out, 4-13 ms
    // and its requests short under load).
    let lengths: f64 = intervals
        .iter()
        .map(|i| i["duration_s"].as_f64().unwrap())
        .sum();
    let whole = summary["duration_s"].as_f64().unwrap();
    assert!((lengths - whole).abs() < 1e-6, "{lengths} vs {whole}");
    // stdout had only the summary (--summary-only), the same numbers as recorded.
    assert!(live.contains("SUMMARY"), "{live}");
    assert!(!live.contains("INTERVAL"), "{live}");

    // `report --json` gives back the recorded summary, exactly.
    let rep = Probe::report(&path).json().run();
    assert!(rep.status.success(), "{rep:?}");
    let back: Value = serde_json::from_str(rep.stdout.trim()).unwrap();
    // Every recorded line is sealed with its checksum, which the report leaves out.
    assert!(recorded
        .iter()
        .all(|l| l["crc32"].as_str().is_some_and(|c| c.len() == 8)));
    let mut sealed = summary.clone();
    sealed.as_object_mut().unwrap().remove("crc32");
    assert_eq!(back, sealed);
    // Text: the header sentence and the same report the live run printed.
    let rep = Probe::report(&path).run();
    assert!(rep.status.success(), "{rep:?}");
    assert!(
        rep.stdout
            .contains(&format!("{} master {}", nginx_version(), ng.master_pid())),
        "{}",
        rep.stdout
    );
    assert!(rep.stdout.contains("accepts 300 "), "{}", rep.stdout);
}

#[test]
fn compare_sees_the_access_log_buffer_take_the_log_writes_away() {
    // Seed 000 / case 3: access_log costs a write() per request; buffer=32k removes it.
    let dir = tempfile::tempdir().unwrap();
    let before = dir.path().join("before.jsonl");
    let after = dir.path().join("after.jsonl");
    let load = |ng: &Nginx| {
        for _ in 0..4 {
            assert_eq!(keepalive_requests(ng.addr(), 4, 150), 600);
            thread::sleep(Duration::from_millis(800));
        }
    };
    let ng = Nginx::start(&NginxConfig::default());
    record(&ng, &before, || load(&ng));
    drop(ng);
    let ng = Nginx::start(&NginxConfig {
        access_log: Some("combined buffer=32k flush=1h".into()),
        ..NginxConfig::default()
    });
    record(&ng, &after, || load(&ng));
    drop(ng);

    let out = Probe::compare(&before, &after).json().run();
    assert!(out.status.success(), "{out:?}");
    let c: Value = serde_json::from_str(out.stdout.trim()).unwrap();
    let metric = |key: &str| {
        c["metrics"]
            .as_array()
            .unwrap()
            .iter()
            .find(|m| m["key"] == key)
            .unwrap_or_else(|| panic!("no {key}: {c}"))
            .clone()
    };
    let m = metric("access_log_writes_per_request");
    // One log line written per request, exactly, without the buffer; 2400 lines of
    // ~100 bytes fill a 32k buffer a handful of times with it.
    assert_eq!(m["before"], 1.0, "{m}");
    assert!(m["after"].as_f64().unwrap() < 0.01, "{m}");
    assert_eq!(m["significance"], "beyond_noise", "{m}");
    assert!(m["before_intervals"]["n"].as_u64().unwrap() >= 3, "{m}");
    // (cpu_starved, about the load generator sharing the cores, may come and go.)
    let ids = |k: &str| -> Vec<String> {
        c["verdicts"][k]
            .as_array()
            .unwrap()
            .iter()
            .map(|v| v.as_str().unwrap().to_string())
            .filter(|id| id != "cpu_starved")
            .collect()
    };
    assert_eq!(ids("went_away"), ["access_log_unbuffered"], "{c}");
    assert!(ids("appeared").is_empty(), "{c}");
    let sentence = c["sentence"].as_str().unwrap();
    assert!(
        sentence.starts_with("Access-log writes per request fell from 1.00 to 0"),
        "{sentence}"
    );
    assert!(
        sentence.contains("; verdict access_log_unbuffered went away"),
        "{sentence}"
    );
    // Requests were the same (2400 each, nginx's own counter): per-request metrics
    // compare like with like.
    let r = metric("accepts_per_request");
    assert_eq!(r["before"], r["after"], "{r}");
    // The text form leads with the same sentence.
    let out = Probe::compare(&before, &after).run();
    assert!(out.status.success(), "{out:?}");
    assert!(out.stdout.contains(sentence), "{}", out.stdout);
}

#[test]
fn an_unwritable_record_path_is_refused_before_attaching() {
    let ng = Nginx::start(&NginxConfig::default());
    let dir = tempfile::tempdir().unwrap();
    for bad in [
        dir.path().join("no/such/dir/run.jsonl"),
        dir.path().to_path_buf(), // a directory
    ] {
        let out = Probe::on(&ng).record(&bad).run();
        assert_eq!(out.status.code(), Some(2), "{out:?}");
        assert_eq!(out.stderr.lines().count(), 1, "{}", out.stderr);
        assert!(out.stderr.contains("--record"), "{}", out.stderr);
        assert!(
            out.stderr.contains("choose a writable path")
                || out.stderr.contains("it is a directory"),
            "{}",
            out.stderr
        );
    }
    // An existing file (an earlier recording, a baseline) is never overwritten.
    let earlier = dir.path().join("before.jsonl");
    std::fs::write(&earlier, "baseline\n").unwrap();
    let out = Probe::on(&ng).record(&earlier).run();
    assert_eq!(out.status.code(), Some(2), "{out:?}");
    assert!(out.stderr.contains("never overwritten"), "{}", out.stderr);
    assert_eq!(std::fs::read_to_string(&earlier).unwrap(), "baseline\n");
    // Bad recordings for report/compare: one line, exit 2.
    let junk = dir.path().join("junk.txt");
    std::fs::write(&junk, "not json\n").unwrap();
    for args in [
        vec!["report", junk.to_str().unwrap()],
        vec!["report", "/nonexistent/run.jsonl"],
        vec!["compare", junk.to_str().unwrap(), junk.to_str().unwrap()],
    ] {
        let out = Probe::with_args(&args).run();
        assert_eq!(out.status.code(), Some(2), "{args:?}: {out:?}");
        assert_eq!(out.stderr.lines().count(), 1, "{}", out.stderr);
    }
}

/// A tmpfs of `kib` KiB mounted on a temporary directory, unmounted on drop.
struct SmallDisk {
    dir: tempfile::TempDir,
}

impl SmallDisk {
    fn new(kib: u64) -> SmallDisk {
        let dir = tempfile::tempdir().unwrap();
        let ok = Command::new("mount")
            .args(["-t", "tmpfs", "-o", &format!("size={kib}k"), "tmpfs"])
            .arg(dir.path())
            .status()
            .unwrap()
            .success();
        assert!(ok, "mount tmpfs");
        SmallDisk { dir }
    }

    /// Fills the disk up (a file of zeros until ENOSPC).
    fn fill(&self) {
        let _ = Command::new("dd")
            .args(["if=/dev/zero", "bs=4k"])
            .arg(format!("of={}", self.dir.path().join("filler").display()))
            .output();
    }
}

impl Drop for SmallDisk {
    fn drop(&mut self) {
        let _ = Command::new("umount").arg(self.dir.path()).status();
    }
}

#[test]
fn a_disk_that_fills_during_the_run_stops_the_recording_not_the_report() {
    let ng = Nginx::start(&NginxConfig::default());
    let disk = SmallDisk::new(256);
    let path = disk.dir.path().join("run.jsonl");
    let probe = Probe::on(&ng).record(&path).interval(0.5).json().start();
    assert_eq!(one_request_per_connection(ng.addr(), 50), 50);
    thread::sleep(Duration::from_millis(1200));
    disk.fill();
    assert_eq!(one_request_per_connection(ng.addr(), 50), 50);
    thread::sleep(Duration::from_millis(1500));
    let out = probe.stop_with(Signal::SIGINT);
    // The live report is whole; the exit code says the recording is not.
    assert_eq!(out.status.code(), Some(1), "{out:?}");
    assert_eq!(total_accepts(&out.summary_json()), 100);
    assert!(
        out.stderr.contains("stopped: No space left on device"),
        "{}",
        out.stderr
    );
    assert!(
        out.stderr.contains("the recording is incomplete"),
        "{}",
        out.stderr
    );
    // What was recorded still reads back, marked as cut short.
    let rep = Probe::report(&path).json().run();
    assert!(rep.status.success(), "{rep:?}");
    assert!(rep.stderr.contains("no summary"), "{}", rep.stderr);
    let last: Value = serde_json::from_str(rep.stdout.trim()).unwrap();
    assert_eq!(last["type"], "interval");
}

#[test]
fn a_recording_cut_by_sigkill_reads_back_and_nothing_stays_attached() {
    let ng = Nginx::start(&NginxConfig::default());
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("run.jsonl");
    let mut probe = Probe::on(&ng)
        .record(&path)
        .interval(0.5)
        .summary_only()
        .start();
    let ids = prog_ids_held_by(probe.pid());
    assert_eq!(one_request_per_connection(ng.addr(), 40), 40);
    thread::sleep(Duration::from_millis(1300));
    let _ = nix::sys::signal::kill(
        nix::unistd::Pid::from_raw(probe.pid() as i32),
        Signal::SIGKILL,
    );
    let _ = probe.wait();
    assert_released(&ids, "after SIGKILL");
    let recorded = lines(&path);
    assert_eq!(recorded[0]["type"], "header");
    assert!(recorded.iter().all(|l| l["type"] != "summary"));
    let rep = Probe::report(&path).arg("--intervals").json().run();
    assert!(rep.status.success(), "{rep:?}");
    let accepts: u64 = rep
        .stdout
        .lines()
        .map(|l| total_accepts(&serde_json::from_str(l).unwrap()))
        .sum();
    assert_eq!(accepts, 40, "{}", rep.stdout);
}
