//! Worker exits as the kernel records them: the `sched_process_exit` program stores the
//! exiting worker's `task_struct.exit_code` (offset from the kernel's BTF) in the
//! `EXITS` map, keyed by tgid; user space reads and removes the entry when it sees the
//! worker gone. The names here are checked by the object contract test beside
//! [`crate::names`].

/// `sched:sched_process_exit`: records the exit code of a tracked worker's main thread.
pub const PROGRAM: &str = "sched_process_exit";

/// LRU hash map, worker tgid -> `task_struct.exit_code` at exit.
pub const MAP: &str = "EXITS";

/// Patched global: byte offset of `task_struct.exit_code` (`u64::MAX`: not in the
/// kernel's BTF, nothing is recorded).
pub const GLOBAL_OFF: &str = "EXIT_CODE_OFF";

/// Entries of `EXITS`: exits not yet read by user space (it reads every refresh, so a
/// few are enough; LRU, so a missed read never blocks later exits).
pub const MAX_EXITS: u32 = 256;

/// The BTF member whose offset [`GLOBAL_OFF`] carries.
pub const EXIT_CODE_PATH: (&str, &str) = ("task_struct", "exit_code");

/// How a process ended, decoded from the kernel's `exit_code` (the `wait` status
/// word: `(code & 0xff) << 8` after `exit(code)`, else the signal number, `| 0x80`
/// when a core was dumped).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Exit {
    /// `exit(code)` / returning from main: 0 is nginx's graceful exit.
    Code(u8),
    /// Killed by signal `signal` (11 = SIGSEGV, a crash; 9 = SIGKILL).
    Signal {
        /// The signal number (`exit_code & 0x7f`).
        signal: u8,
        /// Whether a core was dumped (`exit_code & 0x80`).
        core_dumped: bool,
    },
}

/// Decodes a `task_struct.exit_code` value.
pub const fn decode(exit_code: u32) -> Exit {
    let sig = (exit_code & 0x7f) as u8;
    if sig == 0 {
        Exit::Code(((exit_code >> 8) & 0xff) as u8)
    } else {
        Exit::Signal {
            signal: sig,
            core_dumped: exit_code & 0x80 != 0,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn decodes_the_status_words_seen_here() {
        // Values read with bpftrace (curtask->exit_code) on nginx 1.22 workers here:
        // graceful exit 0, kill -SEGV 11 (no core: RLIMIT_CORE 0), kill -KILL 9.
        assert_eq!(decode(0), Exit::Code(0));
        assert_eq!(decode(2 << 8), Exit::Code(2));
        assert_eq!(
            decode(11),
            Exit::Signal {
                signal: 11,
                core_dumped: false
            }
        );
        assert_eq!(
            decode(11 | 0x80),
            Exit::Signal {
                signal: 11,
                core_dumped: true
            }
        );
        assert_eq!(
            decode(9),
            Exit::Signal {
                signal: 9,
                core_dumped: false
            }
        );
    }
}
