//! A process's resident memory and CPU time from `/proc`, sampled from outside it.

use std::path::PathBuf;
use std::time::Duration;

/// Resident memory in bytes from the text of `/proc/PID/status` (`VmRSS:  1234 kB`).
pub fn rss_bytes(status: &str) -> Option<u64> {
    let line = status.lines().find(|l| l.starts_with("VmRSS:"))?;
    let kib: u64 = line.split_whitespace().nth(1)?.parse().ok()?;
    Some(kib * 1024)
}

/// User plus system CPU time, in clock ticks, from the text of `/proc/PID/stat`. The command
/// name (field 2) is in parentheses and may hold spaces, so the fields are counted from the
/// last `)`: utime and stime are fields 14 and 15 of the whole line.
pub fn cpu_ticks(stat: &str) -> Option<u64> {
    let after = &stat[stat.rfind(')')? + 1..];
    let mut fields = after.split_whitespace().skip(11);
    let utime: u64 = fields.next()?.parse().ok()?;
    let stime: u64 = fields.next()?.parse().ok()?;
    Some(utime + stime)
}

/// The kernel's clock ticks per second (`getconf CLK_TCK`; 100 where that fails, as on every
/// Linux this runs on).
pub fn clock_ticks_per_second() -> u64 {
    std::process::Command::new("getconf")
        .arg("CLK_TCK")
        .output()
        .ok()
        .and_then(|o| String::from_utf8(o.stdout).ok())
        .and_then(|s| s.trim().parse().ok())
        .unwrap_or(100)
}

/// One reading of a process.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Sample {
    /// Resident memory, bytes.
    pub rss_bytes: u64,
    /// CPU time used so far (user + system).
    pub cpu: Duration,
}

/// Reads one process's `/proc` files.
#[derive(Clone, Debug)]
pub struct Probe {
    dir: PathBuf,
    ticks_per_second: u64,
}

impl Probe {
    /// A probe of process `pid`.
    pub fn new(pid: u32, ticks_per_second: u64) -> Self {
        Probe { dir: PathBuf::from(format!("/proc/{pid}")), ticks_per_second: ticks_per_second.max(1) }
    }

    /// Reads it now; None once the process is gone.
    pub fn sample(&self) -> Option<Sample> {
        let status = std::fs::read_to_string(self.dir.join("status")).ok()?;
        let stat = std::fs::read_to_string(self.dir.join("stat")).ok()?;
        let ticks = cpu_ticks(&stat)?;
        Some(Sample {
            rss_bytes: rss_bytes(&status)?,
            cpu: Duration::from_secs_f64(ticks as f64 / self.ticks_per_second as f64),
        })
    }
}

/// CPU used between two samples as a percentage of one core over `wall`.
pub fn core_percent(from: Sample, to: Sample, wall: Duration) -> Option<f64> {
    let secs = wall.as_secs_f64();
    (secs > 0.0).then(|| to.cpu.saturating_sub(from.cpu).as_secs_f64() / secs * 100.0)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn rss_is_read_from_the_vmrss_line_in_kibibytes() {
        let status = "Name:\twasmsched\nVmPeak:\t  900000 kB\nVmRSS:\t   51200 kB\nThreads:\t9\n";
        assert_eq!(rss_bytes(status), Some(50 * 1024 * 1024));
        assert_eq!(rss_bytes("Name:\tzombie\n"), None);
    }

    #[test]
    fn cpu_ticks_count_fields_after_a_command_name_with_spaces_and_parentheses() {
        let stat = "4242 (a (b) c) S 1 4242 4242 0 -1 4194560 100 0 0 0 250 75 0 0 20 0 9 0 1000 0 0";
        assert_eq!(cpu_ticks(stat), Some(325));
    }

    #[test]
    fn a_truncated_stat_line_has_no_cpu_time() {
        assert_eq!(cpu_ticks("4242 (x) S 1 2 3"), None);
    }

    #[test]
    fn half_a_core_for_two_seconds_is_fifty_percent() {
        let a = Sample { rss_bytes: 0, cpu: Duration::from_millis(500) };
        let b = Sample { rss_bytes: 0, cpu: Duration::from_millis(1500) };
        assert_eq!(core_percent(a, b, Duration::from_secs(2)), Some(50.0));
        assert_eq!(core_percent(a, b, Duration::ZERO), None);
    }

    #[test]
    fn this_process_can_be_probed() {
        let probe = Probe::new(std::process::id(), clock_ticks_per_second());
        assert!(probe.sample().is_some_and(|s| s.rss_bytes > 0));
    }
}
