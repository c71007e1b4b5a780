//! Facts about other processes read from /proc, shared by the commands that wait for or
//! signal them.

use std::fs;

/// When process `pid` started (field 22 of /proc/PID/stat, clock ticks since boot), unless
/// it is gone or a zombie.
pub fn start_time(pid: u32) -> Option<u64> {
    let stat = fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    // The command name (field 2) is in parentheses and may hold anything: count fields
    // after its last ')'. Field 3 is the state, field 22 the start time.
    let rest = &stat[stat.rfind(')')? + 1..];
    let fields: Vec<&str> = rest.split_whitespace().collect();
    if matches!(fields.first(), Some(&"Z") | Some(&"X") | Some(&"x")) {
        return None;
    }
    fields.get(22 - 3)?.parse().ok()
}
