//! Load generators and `/proc` readers shared by the benchmarks and the claims lab:
//! `wrk` (keepalive clients) and `hey -disable-keepalive` (a new connection per
//! request), with their outputs parsed; a process's CPU time and context switches.

use std::process::Command;

use anyhow::{Context as _, Result};

use crate::command::capture;

/// What a load generator reported for one run.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct ClientRun {
    /// Completed requests per second, as the client counts them.
    pub rps: f64,
    /// 99th percentile latency, ms (NaN when the client did not print it).
    pub p99_ms: f64,
    /// Requests completed over the run.
    pub requests: u64,
    /// Failed requests: socket errors (connect, read, write, timeout) plus non-2xx/3xx
    /// responses for wrk; error lines plus non-200 responses for hey.
    pub errors: u64,
}

/// Runs `wrk -t1 -c<connections> -d<secs>s --latency <url>`: `connections` keepalive
/// clients from one thread (wrk reconnects when nginx closes a connection).
pub fn wrk(url: &str, connections: u32, secs: u64) -> Result<ClientRun> {
    wrk_with(url, connections, secs, &[])
}

/// [`wrk`] with extra arguments before the URL (e.g. `-H "Connection: close"`: one
/// request per connection).
pub fn wrk_with(url: &str, connections: u32, secs: u64, extra: &[&str]) -> Result<ClientRun> {
    let out = capture(
        client_command("wrk")
            .args([
                "-t1",
                &format!("-c{connections}"),
                &format!("-d{secs}s"),
                "--latency",
            ])
            .args(extra)
            .arg(url),
    )
    .context("run wrk (install it with `cargo xtask setup`)")?
    .checked("wrk")?;
    parse_wrk(&out.stdout)
}

/// Parses wrk's text output.
pub fn parse_wrk(text: &str) -> Result<ClientRun> {
    let rps = text
        .lines()
        .find_map(|l| l.trim().strip_prefix("Requests/sec:"))
        .and_then(|v| v.trim().parse::<f64>().ok())
        .with_context(|| format!("no Requests/sec in wrk output: {text}"))?;
    let p99_ms = text
        .lines()
        .find_map(|l| l.trim().strip_prefix("99%"))
        .map(|v| parse_wrk_latency(v.trim()))
        .unwrap_or(f64::NAN);
    // "  123456 requests in 8.00s, 29.67MB read"
    let requests = text
        .lines()
        .find(|l| l.contains(" requests in "))
        .and_then(|l| l.split_whitespace().next())
        .and_then(|n| n.parse().ok())
        .unwrap_or(0);
    // "  Socket errors: connect 0, read 12, write 0, timeout 3"
    let socket_errors: u64 = text
        .lines()
        .find_map(|l| l.trim().strip_prefix("Socket errors:"))
        .map(|rest| {
            rest.split(',')
                .filter_map(|kv| kv.split_whitespace().nth(1)?.parse::<u64>().ok())
                .sum()
        })
        .unwrap_or(0);
    let non_2xx: u64 = text
        .lines()
        .find_map(|l| l.trim().strip_prefix("Non-2xx or 3xx responses:"))
        .and_then(|v| v.trim().parse().ok())
        .unwrap_or(0);
    Ok(ClientRun {
        rps,
        p99_ms,
        requests,
        errors: socket_errors + non_2xx,
    })
}

/// wrk latency like `1.23ms`, `850.00us`, `1.01s` -> ms.
pub fn parse_wrk_latency(v: &str) -> f64 {
    let (num, mul) = if let Some(n) = v.strip_suffix("ms") {
        (n, 1.0)
    } else if let Some(n) = v.strip_suffix("us") {
        (n, 0.001)
    } else if let Some(n) = v.strip_suffix('s') {
        (n, 1000.0)
    } else {
        (v, f64::NAN)
    };
    num.parse::<f64>().map(|x| x * mul).unwrap_or(f64::NAN)
}

/// Runs `hey -z <secs>s -c <connections> -disable-keepalive <url>`: `connections`
/// concurrent clients, each opening a new connection for every request (a sustained
/// burst of new connections).
pub fn hey_new_connections(url: &str, connections: u32, secs: u64) -> Result<ClientRun> {
    let out = capture(client_command("hey").args([
        "-z",
        &format!("{secs}s"),
        "-c",
        &connections.to_string(),
        "-disable-keepalive",
        url,
    ]))
    .context("run hey (install it with `cargo xtask setup`)")?
    .checked("hey")?;
    parse_hey(&out.stdout)
}

/// Parses hey's text summary.
pub fn parse_hey(text: &str) -> Result<ClientRun> {
    let rps = text
        .lines()
        .find_map(|l| l.trim().strip_prefix("Requests/sec:"))
        .and_then(|v| v.trim().parse::<f64>().ok())
        .with_context(|| format!("no Requests/sec in hey output: {text}"))?;
    // "  99% in 0.0123 secs"
    let p99_ms = text
        .lines()
        .find_map(|l| l.trim().strip_prefix("99% in "))
        .and_then(|v| v.split_whitespace().next()?.parse::<f64>().ok())
        .map(|s| s * 1000.0)
        .unwrap_or(f64::NAN);
    // "Status code distribution:\n  [200]\t12345 responses"; "Error distribution:\n
    //  [17]\tGet ...".
    let mut ok = 0;
    let mut errors = 0;
    let mut section = "";
    for line in text.lines() {
        let t = line.trim();
        if t.starts_with("Status code distribution") {
            section = "status";
            continue;
        }
        if t.starts_with("Error distribution") {
            section = "errors";
            continue;
        }
        let Some(rest) = t.strip_prefix('[') else {
            if !t.is_empty() {
                section = "";
            }
            continue;
        };
        let Some((code, tail)) = rest.split_once(']') else {
            continue;
        };
        let n: u64 = tail
            .split_whitespace()
            .next()
            .and_then(|v| v.parse().ok())
            .unwrap_or(0);
        match section {
            "status" if code == "200" => ok += n,
            "status" => errors += n,
            // In the error section the bracket holds the count itself.
            "errors" => errors += code.parse::<u64>().unwrap_or(0),
            _ => {}
        }
    }
    Ok(ClientRun {
        rps,
        p99_ms,
        requests: ok,
        errors,
    })
}

/// The CPU's model name (`model name` in /proc/cpuinfo), "unknown" when unreadable:
/// the machine line of the claims lab and of the benchmark page.
pub fn cpu_model() -> String {
    std::fs::read_to_string("/proc/cpuinfo")
        .ok()
        .and_then(|c| {
            c.lines()
                .find(|l| l.starts_with("model name"))
                .and_then(|l| l.split_once(':'))
                .map(|(_, v)| v.trim().to_string())
        })
        .unwrap_or_else(|| "unknown".into())
}

/// Clock ticks per second (`sysconf(_SC_CLK_TCK)`), the unit of `/proc/<pid>/stat` and
/// `/proc/stat` times.
pub fn clk_tck() -> f64 {
    // SAFETY: sysconf has no preconditions.
    let t = unsafe { libc::sysconf(libc::_SC_CLK_TCK) };
    if t > 0 {
        t as f64
    } else {
        100.0
    }
}

/// utime + stime of a process, seconds (from /proc/<pid>/stat).
pub fn cpu_seconds(pid: u32) -> Option<f64> {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    let rest = &stat[stat.rfind(')')? + 2..];
    let f: Vec<&str> = rest.split_whitespace().collect();
    let ticks: f64 = f.get(11)?.parse::<f64>().ok()? + f.get(12)?.parse::<f64>().ok()?;
    Some(ticks / clk_tck())
}

/// Time the CPUs in `cpus` ran tasks or lost to the hypervisor so far, seconds: user +
/// nice + system + steal of their `cpuN` lines in `/proc/stat` (irq and softirq time,
/// which no task is charged for, left out).
pub fn cpus_busy_seconds(cpus: &[usize]) -> Option<f64> {
    let stat = std::fs::read_to_string("/proc/stat").ok()?;
    let mut ticks = 0.0;
    let mut found = 0;
    for line in stat.lines() {
        let mut f = line.split_whitespace();
        let Some(n) = f
            .next()
            .and_then(|c| c.strip_prefix("cpu"))
            .and_then(|n| n.parse::<usize>().ok())
        else {
            continue;
        };
        if !cpus.contains(&n) {
            continue;
        }
        let v: Vec<f64> = f.filter_map(|x| x.parse().ok()).collect();
        // user nice system idle iowait irq softirq steal
        ticks += [0, 1, 2, 5, 6, 7]
            .iter()
            .filter_map(|&i| v.get(i))
            .sum::<f64>();
        found += 1;
    }
    (found == cpus.len()).then(|| ticks / clk_tck())
}

/// Context switches of a process so far: (voluntary, nonvoluntary), from the
/// `voluntary_ctxt_switches` / `nonvoluntary_ctxt_switches` lines of
/// `/proc/<pid>/status` (the main thread's; nginx workers are single-threaded).
pub fn ctxt_switches(pid: u32) -> Option<(u64, u64)> {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).ok()?;
    let field = |name: &str| -> Option<u64> {
        status
            .lines()
            .find_map(|l| l.strip_prefix(name))?
            .trim()
            .parse()
            .ok()
    };
    Some((
        field("voluntary_ctxt_switches:")?,
        field("nonvoluntary_ctxt_switches:")?,
    ))
}

/// Where the load generator and the workers run, when pinned.
pub struct Pinning {
    /// `taskset -c` list for wrk/hey.
    pub client_cpus: String,
    /// Appended to nginx's main context: the workers on every CPU but the last.
    pub nginx_directive: String,
    /// Online CPUs.
    pub ncpus: usize,
}

impl Pinning {
    /// One sentence saying what is pinned where.
    pub fn describe(&self) -> String {
        format!(
            "Pinned: the load generator on CPU {} (taskset), the nginx workers on {} (`worker_cpu_affinity auto`), so that they do not compete for a core.",
            self.client_cpus,
            match self.ncpus {
                2 => "CPU 0".to_string(),
                n => format!("CPUs 0-{}", n - 2),
            }
        )
    }

    /// `worker_cpu_affinity` for an nginx that is part of the load (an upstream behind
    /// the nginx under test): the load generator's CPU.
    pub fn client_nginx_directive(&self) -> String {
        format!(
            "\nworker_cpu_affinity auto 1{};\n",
            "0".repeat(self.ncpus - 1)
        )
    }
}

/// The pinning to use on this machine: with at least 2 CPUs, the last for the load
/// generator and the rest for nginx's workers; `None` when asked not to or when there
/// is one CPU.
pub fn pin_plan(pin: bool) -> Option<Pinning> {
    let ncpus = std::thread::available_parallelism()
        .map(|n| n.get())
        .unwrap_or(1);
    if !pin || ncpus < 2 {
        return None;
    }
    // Bit i of the mask (rightmost first) is CPU i: every CPU but the last.
    let mask = format!("0{}", "1".repeat(ncpus - 1));
    Some(Pinning {
        client_cpus: (ncpus - 1).to_string(),
        nginx_directive: format!("\nworker_cpu_affinity auto {mask};\n"),
        ncpus,
    })
}

/// CPUs (a `taskset -c` list) the load generators run on, once set by
/// [`pin_clients`]; unset: anywhere.
static CLIENT_CPUS: std::sync::OnceLock<String> = std::sync::OnceLock::new();

/// Pins every later wrk/hey run to `cpus` (a `taskset -c` list), away from the nginx
/// workers.
pub fn pin_clients(cpus: &str) {
    let _ = CLIENT_CPUS.set(cpus.to_string());
}

/// `program`, under `taskset -c CPUS` when the clients are pinned.
fn client_command(program: &str) -> Command {
    match CLIENT_CPUS.get() {
        Some(cpus) => {
            let mut c = Command::new("taskset");
            c.args(["-c", cpus, program]);
            c
        }
        None => Command::new(program),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn wrk_output_is_parsed() {
        let text = "Running 2s test @ http://127.0.0.1:1/
  1 threads and 300 connections
  Latency Distribution
     50%    4.10ms
     99%  850.00us
  61234 requests in 2.00s, 14.72MB read
  Socket errors: connect 0, read 12, write 1, timeout 3
  Non-2xx or 3xx responses: 5
Requests/sec:  30617.00
Transfer/sec:      7.36MB
";
        let r = parse_wrk(text).unwrap();
        assert_eq!(r.rps, 30617.0);
        assert_eq!(r.p99_ms, 0.85);
        assert_eq!(r.requests, 61234);
        assert_eq!(r.errors, 21);
        assert!(parse_wrk("garbage").is_err());
    }

    #[test]
    fn hey_output_is_parsed() {
        let text = "
Summary:
  Total:	2.0031 secs
  Requests/sec:	8123.4567

Latency distribution:
  50% in 0.0100 secs
  99% in 0.0250 secs

Status code distribution:
  [200]	16000 responses
  [503]	12 responses

Error distribution:
  [7]	Get \"http://127.0.0.1:1/\": dial tcp: connect: connection refused
";
        let r = parse_hey(text).unwrap();
        assert_eq!(r.rps, 8123.4567);
        assert_eq!(r.p99_ms, 25.0);
        assert_eq!(r.requests, 16000);
        assert_eq!(r.errors, 19);
    }

    #[test]
    fn cpu_busy_time_is_read_for_existing_cpus_only() {
        assert!(cpus_busy_seconds(&[0]).is_some_and(|s| s > 0.0));
        assert_eq!(cpus_busy_seconds(&[0, 100_000]), None);
    }

    #[test]
    fn own_process_has_cpu_time_and_context_switches() {
        let me = std::process::id();
        assert!(cpu_seconds(me).is_some());
        let (v, n) = ctxt_switches(me).unwrap();
        assert!(v + n > 0);
    }
}
