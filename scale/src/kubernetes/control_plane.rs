//! The kit's controller manager and kube-scheduler as processes: found by their pid files in
//! `$K8S_RUN`, stopped, started again with other flags, and restored with the command line,
//! folder and environment they had (read from `/proc` before they were stopped).

use std::ffi::OsString;
use std::fs::OpenOptions;
use std::os::unix::ffi::OsStringExt;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

/// What went wrong with a control-plane process.
#[derive(Debug, thiserror::Error)]
pub enum ControlPlaneError {
    /// Its `/proc` entry could not be read.
    #[error("cannot read the command line of {name} (pid {pid}) from /proc")]
    Proc {
        /// `kcm` or `scheduler`.
        name: &'static str,
        /// Its pid.
        pid: u32,
        /// Why.
        #[source]
        source: std::io::Error,
    },
    /// It was not running when the harness began, and a run needs it.
    #[error("{name} is not running (no live pid in {pid_file}): start the cluster with `cluster up`")]
    NotRunning {
        /// `kcm` or `scheduler`.
        name: &'static str,
        /// The pid file looked at.
        pid_file: PathBuf,
    },
    /// It could not be started.
    #[error("cannot start {name} ({program}); its log is {log}")]
    Start {
        /// `kcm` or `scheduler`.
        name: &'static str,
        /// The binary.
        program: String,
        /// The log it was to append to.
        log: PathBuf,
        /// Why.
        #[source]
        source: std::io::Error,
    },
}

/// How a process was started, to start it the same way again.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct CommandLine {
    /// argv, the program first.
    pub argv: Vec<String>,
    /// Its working folder.
    pub cwd: PathBuf,
    /// Its environment.
    pub env: Vec<(OsString, OsString)>,
}

/// `argv` with each of `flags` (`--name=value`) in place of the same flag, or appended.
pub fn with_flags(argv: &[String], flags: &[&str]) -> Vec<String> {
    let key = |a: &str| a.split_once('=').map_or(a, |(k, _)| k).to_owned();
    let mut out: Vec<String> = argv.to_vec();
    for flag in flags {
        match out.iter().position(|a| a.starts_with("--") && key(a) == key(flag)) {
            Some(i) => out[i] = (*flag).to_owned(),
            None => out.push((*flag).to_owned()),
        }
    }
    out
}

/// The value of `--name=value` or `--name value` in `argv`.
pub fn flag_value<'a>(argv: &'a [String], name: &str) -> Option<&'a str> {
    let eq = format!("{name}=");
    argv.iter().enumerate().find_map(|(i, a)| {
        a.strip_prefix(&eq).or_else(|| (a == name).then(|| argv.get(i + 1).map(String::as_str)).flatten())
    })
}

/// One daemon of the kit (`kcm`, `scheduler`): as found, and what the harness did to it.
#[derive(Debug)]
pub struct Daemon {
    name: &'static str,
    run_dir: PathBuf,
    /// How it ran when the harness began; None if it was not running.
    original: Option<CommandLine>,
    /// The pid of the kit's own process, until it is stopped.
    theirs: Option<u32>,
    /// A copy the harness started (restored or with other flags), running.
    ours: Option<Child>,
    /// Whether `ours` runs the original command line.
    ours_is_original: bool,
}

impl Daemon {
    /// Looks for `$K8S_RUN/NAME.pid` and reads how that process runs.
    pub fn find(run_dir: &Path, name: &'static str) -> Result<Daemon, ControlPlaneError> {
        let pid = std::fs::read_to_string(run_dir.join(format!("{name}.pid")))
            .ok()
            .and_then(|s| s.trim().parse::<u32>().ok())
            .filter(|pid| alive(*pid));
        let original = match pid {
            None => None,
            Some(pid) => {
                Some(read_command_line(pid).map_err(|source| ControlPlaneError::Proc { name, pid, source })?)
            }
        };
        Ok(Daemon { name, run_dir: run_dir.to_owned(), original, theirs: pid, ours: None, ours_is_original: false })
    }

    /// Whether it was running when the harness began.
    pub fn was_running(&self) -> bool {
        self.original.is_some()
    }

    /// The command line it had, if it was running.
    pub fn original(&self) -> Option<&CommandLine> {
        self.original.as_ref()
    }

    /// The pid of whichever copy runs now.
    pub fn pid(&self) -> Option<u32> {
        self.ours.as_ref().map(Child::id).or(self.theirs)
    }

    /// Stops whichever copy runs (SIGTERM, SIGKILL after 10 s).
    pub fn stop(&mut self) {
        if let Some(pid) = self.theirs.take() {
            tracing::info!(daemon = self.name, pid, "stopping");
            terminate(pid);
        }
        if let Some(mut child) = self.ours.take() {
            tracing::info!(daemon = self.name, pid = child.id(), "stopping our copy");
            terminate(child.id());
            let _ = child.kill();
            let _ = child.wait();
        }
    }

    /// Stops it and starts its original command line with `flags` in place; the pid.
    pub fn restart_with(&mut self, flags: &[&str]) -> Result<u32, ControlPlaneError> {
        let Some(original) = self.original.clone() else {
            return Err(ControlPlaneError::NotRunning {
                name: self.name,
                pid_file: self.run_dir.join(format!("{}.pid", self.name)),
            });
        };
        self.stop();
        let line = CommandLine { argv: with_flags(&original.argv, flags), ..original.clone() };
        let pid = self.spawn(&line)?;
        self.ours_is_original = line == original;
        Ok(pid)
    }

    /// Brings it back as it was: started again with its original command line if the harness
    /// stopped or changed it; left alone if it runs as it did, or was not running.
    pub fn restore(&mut self) -> Result<(), ControlPlaneError> {
        let Some(original) = self.original.clone() else { return Ok(()) };
        if self.theirs.is_some() || (self.ours.is_some() && self.ours_is_original) {
            return Ok(());
        }
        self.stop();
        self.spawn(&original)?;
        self.ours_is_original = true;
        // Ours now, but it is the cluster's again: the harness must not stop it when it ends.
        if let Some(child) = self.ours.take() {
            self.theirs = Some(child.id());
        }
        Ok(())
    }

    /// Starts `line` in a process group of its own (a Ctrl-C at the terminal is for the
    /// harness, not for it), appending to the kit's log, and writes the kit's pid file so that
    /// `cluster down` stops it.
    fn spawn(&mut self, line: &CommandLine) -> Result<u32, ControlPlaneError> {
        let log = self.run_dir.join(format!("{}.log", self.name));
        let start_error = |source| ControlPlaneError::Start {
            name: self.name,
            program: line.argv[0].clone(),
            log: log.clone(),
            source,
        };
        let out = OpenOptions::new().create(true).append(true).open(&log).map_err(start_error)?;
        let mut command = Command::new(&line.argv[0]);
        command.args(&line.argv[1..]).current_dir(&line.cwd).env_clear().envs(line.env.iter().map(|(k, v)| (k, v)));
        let child = super::spawn_logged(&mut command, out).map_err(start_error)?;
        let pid = child.id();
        tracing::info!(daemon = self.name, pid, args = %line.argv[1..].join(" "), "started");
        let _ = std::fs::write(self.run_dir.join(format!("{}.pid", self.name)), format!("{pid}\n"));
        self.ours = Some(child);
        Ok(pid)
    }
}

impl Drop for Daemon {
    fn drop(&mut self) {
        if let Err(e) = self.restore() {
            tracing::error!(daemon = self.name, error = %e, "could not restore it; start the cluster again");
        }
    }
}

/// Whether `pid` is a live process (a zombie is not).
pub fn alive(pid: u32) -> bool {
    match std::fs::read_to_string(format!("/proc/{pid}/stat")) {
        Ok(stat) => stat.rfind(')').and_then(|i| stat[i + 1..].split_whitespace().next()) != Some("Z"),
        Err(_) => false,
    }
}

/// Sends `signal` (`TERM`, `INT`, `KILL`) with `kill(1)`: no `unsafe` for a libc call.
pub fn signal(pid: u32, signal: &str) {
    let _ = Command::new("kill").arg(format!("-{signal}")).arg(pid.to_string()).stderr(Stdio::null()).status();
}

/// SIGTERM, then SIGKILL if it is still alive after 10 s.
pub fn terminate(pid: u32) {
    signal(pid, "TERM");
    let until = Instant::now() + Duration::from_secs(10);
    while alive(pid) && Instant::now() < until {
        std::thread::sleep(Duration::from_millis(100));
    }
    if alive(pid) {
        signal(pid, "KILL");
    }
}

fn read_command_line(pid: u32) -> std::io::Result<CommandLine> {
    let nul_split = |bytes: Vec<u8>| -> Vec<Vec<u8>> {
        bytes.split(|b| *b == 0).filter(|s| !s.is_empty()).map(<[u8]>::to_vec).collect()
    };
    let argv: Vec<String> = nul_split(std::fs::read(format!("/proc/{pid}/cmdline"))?)
        .into_iter()
        .map(|a| String::from_utf8_lossy(&a).into_owned())
        .collect();
    if argv.is_empty() {
        return Err(std::io::Error::other("empty command line"));
    }
    let cwd = std::fs::read_link(format!("/proc/{pid}/cwd"))?;
    let env = nul_split(std::fs::read(format!("/proc/{pid}/environ"))?)
        .into_iter()
        .filter_map(|kv| {
            let i = kv.iter().position(|b| *b == b'=')?;
            Some((OsString::from_vec(kv[..i].to_vec()), OsString::from_vec(kv[i + 1..].to_vec())))
        })
        .collect();
    Ok(CommandLine { argv, cwd, env })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn argv(s: &str) -> Vec<String> {
        s.split(' ').map(str::to_owned).collect()
    }

    #[test]
    fn new_flags_are_appended_and_existing_ones_replaced() {
        let a = argv("localk8s kube-scheduler --kubeconfig=/k --kube-api-qps=50 --leader-elect=false");
        let b = with_flags(&a, &["--kube-api-qps=5000", "--kube-api-burst=5000"]);
        assert_eq!(
            b,
            argv(
                "localk8s kube-scheduler --kubeconfig=/k --kube-api-qps=5000 --leader-elect=false --kube-api-burst=5000"
            )
        );
    }

    #[test]
    fn a_flag_value_is_found_with_or_without_an_equals_sign() {
        let a = argv("x --secure-port=10259 --bind-address 127.0.0.1");
        assert_eq!(flag_value(&a, "--secure-port"), Some("10259"));
        assert_eq!(flag_value(&a, "--bind-address"), Some("127.0.0.1"));
        assert_eq!(flag_value(&a, "--port"), None);
    }

    #[test]
    fn this_process_is_alive_and_its_command_line_readable() {
        let me = std::process::id();
        assert!(alive(me));
        let line = read_command_line(me).unwrap();
        assert!(!line.argv.is_empty());
        assert!(line.cwd.is_absolute());
    }

    #[test]
    fn a_missing_pid_file_means_the_daemon_was_not_running_and_restore_does_nothing() {
        let dir = std::env::temp_dir().join(format!("wasmsched-scale-test-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let mut d = Daemon::find(&dir, "kcm").unwrap();
        assert!(!d.was_running());
        assert!(d.restore().is_ok());
        assert!(matches!(d.restart_with(&[]), Err(ControlPlaneError::NotRunning { .. })));
        std::fs::remove_dir_all(&dir).unwrap();
    }
}
