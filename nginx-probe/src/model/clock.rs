//! Wall-clock times of reports as text (UTC), shared by every text output and the verdicts.

use crate::model::MAX_UNIX_S;

/// `YYYY-MM-DD HH:MM:SS UTC` of `unix_s` seconds since the epoch (humantime's RFC 3339).
/// A time before 1970 or after [`MAX_UNIX_S`] (or NaN) is shown as
/// `????-??-?? ??:??:?? UTC` rather than panicking: recordings come from others.
pub fn utc_datetime(unix_s: f64) -> String {
    if !(0.0..=MAX_UNIX_S).contains(&unix_s) {
        return "????-??-?? ??:??:?? UTC".into();
    }
    let t = std::time::UNIX_EPOCH + std::time::Duration::from_secs(unix_s as u64);
    let rfc = humantime::format_rfc3339_seconds(t).to_string();
    format!("{} UTC", rfc.trim_end_matches('Z').replacen('T', " ", 1))
}

/// Wall clock HH:MM:SS (UTC) of `unix_s` seconds since the epoch, for report headers.
pub fn clock(unix_s: f64) -> String {
    // "YYYY-MM-DD HH:MM:SS UTC"
    utc_datetime(unix_s)[11..19].to_string()
}
