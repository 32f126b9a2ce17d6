//! How an upstream `server` line is quoted: as written, with the `max_fails` and
//! `fail_timeout` in force beside it (kept apart from `config.rs` for size).

use super::config::UpstreamServer;

impl UpstreamServer {
    /// The `server` line as written, in backticks (`` `server 127.0.0.1:8080` ``); and
    /// the `max_fails` and `fail_timeout` in force, each marked `(default)` when the
    /// line does not set it (trial 21: `server 127.0.0.1:19601 max_fails=1
    /// fail_timeout=10s` was quoted for a line that set neither).
    pub fn quoted(&self) -> (String, String) {
        let line = if self.as_written.is_empty() {
            format!("{} {}", self.address, self.other)
                .trim_end()
                .to_string()
        } else {
            self.as_written.clone()
        };
        let mark = |k: &str| {
            let set = self.as_written.split_whitespace().any(|a| a.starts_with(k));
            if set || self.as_written.is_empty() {
                ""
            } else {
                " (default)"
            }
        };
        (
            format!("`server {line}`"),
            format!(
                "max_fails {}{}, fail_timeout {}{}",
                self.max_fails,
                mark("max_fails="),
                self.fail_timeout,
                mark("fail_timeout=")
            ),
        )
    }
}
