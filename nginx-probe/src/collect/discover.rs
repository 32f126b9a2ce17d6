//! Finding the nginx master when `--pid` is not given: the pid in `--pid-file`
//! (default [`DEFAULT_PID_FILE`], where Debian's and nginx.org's packages put it), else
//! the only nginx master in /proc.

use std::{io::Read as _, path::Path};

use procfs::process::all_processes;

use crate::{
    collect::target::{self, classify, Master, Role},
    error::{DiscoveryError, ProbeError},
    safe::bounded,
};

/// nginx's pid file on Debian, Ubuntu and the nginx.org packages.
pub const DEFAULT_PID_FILE: &str = "/run/nginx.pid";

/// Longest pid file read (a pid and a newline; anything longer is not a pid file).
const PID_FILE_MAX: u64 = 64;

/// Longest process title shown when listing masters, characters.
const TITLE_MAX: usize = 120;

/// The hint after an error about the pid a pid file holds: a pid file written inside a
/// container holds the pid in the container's pid namespace (often 1), which names
/// another process, or none, on the host.
pub use crate::error::CONTAINER_PID_HINT;

/// The pid in a pid file's text (`"1234\n"`), None unless it is one positive integer.
pub fn parse_pid_file(text: &str) -> Option<u32> {
    text.trim().parse::<u32>().ok().filter(|&p| p > 0)
}

/// Reads the pid in `path` (at most [`PID_FILE_MAX`] bytes). Errors: the reason, for
/// the caller's message.
fn read_pid_file(path: &Path) -> Result<u32, String> {
    let mut text = String::new();
    std::fs::File::open(path)
        .and_then(|f| f.take(PID_FILE_MAX).read_to_string(&mut text))
        .map_err(|e| e.to_string())?;
    parse_pid_file(&text)
        .ok_or_else(|| format!("it does not hold a pid (`{}`)", bounded(text.trim(), 20)))
}

/// Every live nginx master in /proc: (host pid, title), sorted by pid. A master is a
/// process titled `nginx: master process ...` that runs nginx
/// ([`target::master_is_nginx`]; a binary upgrade in progress shows two).
pub fn nginx_masters() -> Vec<(u32, String)> {
    let mut out = Vec::new();
    let Ok(procs) = all_processes() else {
        return out;
    };
    for p in procs.flatten() {
        let Ok(stat) = p.stat() else { continue };
        if stat.state == 'Z' || stat.state == 'X' {
            continue;
        }
        let cmdline = p.cmdline().unwrap_or_default();
        // The title first: the binary is scanned (bounded) only for a master title
        // under another comm (an nginx started through a renamed symlink).
        if classify(&stat.comm, &cmdline) == Role::Master
            && target::master_is_nginx(&stat.comm, || target::nginx_version(p.pid as u32))
        {
            out.push((p.pid as u32, cmdline.join(" ")));
        }
    }
    out.sort();
    out
}

/// The nginx master to trace without `--pid`: the one in `pid_file` when it names a
/// live master, else the only master in /proc.
///
/// `explicit` says `--pid-file` was given: then a pid file that is missing or names no
/// master is an error, not a reason to look in /proc.
///
/// Errors: [`ProbeError::Discovery`] (exit 2) when no master is found, or when several
/// are (the message lists them), and the errors of [`target::validate_master`] for an
/// explicit pid file.
pub fn find_master(pid_file: &Path, explicit: bool) -> Result<Master, ProbeError> {
    let shown = pid_file.display();
    match read_pid_file(pid_file) {
        Ok(pid) => match target::validate_master(pid) {
            Ok(m) => return Ok(m),
            Err(e) if explicit => {
                // A pid naming no process, or no nginx, may be a container's; one naming
                // a worker or an nginx without master is this host's.
                let container_hint = matches!(
                    e,
                    ProbeError::NotMaster { .. }
                        | ProbeError::NoSuchProcess(_)
                        | ProbeError::Zombie(_)
                );
                return Err(DiscoveryError::PidFileNotMaster {
                    path: shown.to_string(),
                    source: Box::new(e),
                    container_hint,
                }
                .into());
            }
            // A stale default pid file (nginx stopped, or another nginx runs): look in /proc.
            Err(_) => {}
        },
        Err(why) if explicit => {
            return Err(DiscoveryError::PidFileUnreadable {
                path: shown.to_string(),
                reason: why.to_string(),
            }
            .into())
        }
        Err(_) => {}
    }
    let masters = nginx_masters();
    match masters.as_slice() {
        [] => Err(DiscoveryError::NoMaster {
            pid_file: shown.to_string(),
        }
        .into()),
        [(pid, _)] => target::validate_master(*pid),
        several => Err(DiscoveryError::SeveralMasters {
            masters: several
                .iter()
                .map(|(pid, title)| format!("{pid} `{}`", bounded(title, TITLE_MAX)))
                .collect(),
        }
        .into()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn pid_files_parse() {
        assert_eq!(parse_pid_file("1234\n"), Some(1234));
        assert_eq!(parse_pid_file("  77 "), Some(77));
        assert_eq!(parse_pid_file("0\n"), None);
        assert_eq!(parse_pid_file("-5"), None);
        assert_eq!(parse_pid_file("12 34"), None);
        assert_eq!(parse_pid_file(""), None);
    }

    #[test]
    fn titles_are_sanitized_and_bounded() {
        assert_eq!(bounded("nginx: master\x1b[2J", 40), "nginx: master\\x1b[2J");
        assert_eq!(bounded("abcdef", 3), "abc…");
        assert_eq!(bounded("abc", 3), "abc");
        // Cut after escaping: never more than `max` characters and the ellipsis.
        assert_eq!(bounded("\x1b\x1b\x1b", 6), "\\x1b\\x…");
    }

    #[test]
    fn a_pid_file_naming_a_non_master_is_an_error_when_explicit() {
        let dir = tempfile::tempdir().unwrap();
        let f = dir.path().join("nginx.pid");
        // Our own pid: alive, not nginx.
        std::fs::write(&f, format!("{}\n", std::process::id())).unwrap();
        let e = find_master(&f, true).unwrap_err();
        assert!(matches!(e, ProbeError::Discovery(_)), "{e}");
        assert!(e.to_string().starts_with("--pid-file "), "{e}");
        // The pid in a container's pid file names another process on the host.
        assert!(e.to_string().contains(CONTAINER_PID_HINT), "{e}");
        assert_eq!(e.to_string().lines().count(), 1);
        std::fs::write(&f, "soon\n").unwrap();
        let e = find_master(&f, true).unwrap_err().to_string();
        assert!(e.contains("cannot read a pid from it"), "{e}");
        assert_eq!(e.lines().count(), 1);
    }
}
