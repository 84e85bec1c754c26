//! What the host writes down: the audit log (one JSON line per decided tick: who decided, on
//! which version, what was applied and refused and why, how long it took, whether it fell
//! back) and the telemetry recording (every tick's snapshot and the decision taken) that
//! `wasmsched_sim::playback` runs policies over again (its lines are [`wasmsched_core::recording`]'s).
//!
//! Both are JSON lines written with one `write` each, so a host killed mid-write leaves at
//! most a torn last line: readers skip it, and opening the log again cuts it off.

use std::fs::{File, OpenOptions};
use std::io::{Read, Seek, SeekFrom, Write};
use std::path::{Path, PathBuf};

use serde::de::DeserializeOwned;
use serde::{Deserialize, Serialize};

use wasmsched_core::bindings::wit;
use wasmsched_core::recording::{DepartedRecord, RecordedDecision, RecordedTick, check_snapshot};
use wasmsched_core::world::{Cursor, JobId, World};
use wasmsched_runtime::supervise::Fallback;

use crate::budget::BudgetConfig;
use crate::control::{Decided, Tick};

/// Why a log could not be written or read.
#[derive(Debug, thiserror::Error)]
pub enum RecordError {
    /// The file could not be opened, written or read.
    #[error("cannot use {path}")]
    Io {
        /// The file.
        path: PathBuf,
        /// Why.
        #[source]
        source: std::io::Error,
    },
    /// A complete line is not what this host writes.
    #[error("{path}, line {line}: {detail}")]
    Corrupt {
        /// The file.
        path: PathBuf,
        /// The line, from 1.
        line: usize,
        /// What is wrong.
        detail: String,
    },
}

/// A file of JSON lines, each written whole with one `write`.
#[derive(Debug)]
pub struct JsonLines {
    file: File,
    path: PathBuf,
}

impl JsonLines {
    /// Open `path` for appending (creating it); a torn last line left by a killed host is cut.
    pub fn append(path: &Path) -> Result<JsonLines, RecordError> {
        let io = |source| RecordError::Io { path: path.to_path_buf(), source };
        let mut file = OpenOptions::new().read(true).append(true).create(true).open(path).map_err(io)?;
        if let Some(keep) = complete_length(&mut file).map_err(io)? {
            tracing::warn!(path = %path.display(), kept_bytes = keep, "cutting a torn last line left by an earlier run");
            file.set_len(keep).map_err(io)?;
        }
        Ok(JsonLines { file, path: path.to_path_buf() })
    }

    /// Create `path` anew (truncating it).
    pub fn create(path: &Path) -> Result<JsonLines, RecordError> {
        let file = File::create(path).map_err(|source| RecordError::Io { path: path.to_path_buf(), source })?;
        Ok(JsonLines { file, path: path.to_path_buf() })
    }

    /// Append one value as one line, in one write, and flush.
    pub fn write<T: Serialize>(&mut self, value: &T) -> Result<(), RecordError> {
        let mut line = serde_json::to_vec(value).expect("our records serialize");
        line.push(b'\n');
        let io = |source| RecordError::Io { path: self.path.clone(), source };
        self.file.write_all(&line).map_err(io)?;
        self.file.flush().map_err(io)
    }

    /// Where it writes.
    pub fn path(&self) -> &Path {
        &self.path
    }
}

/// When the file does not end with a newline: the length up to and including its last one.
fn complete_length(file: &mut File) -> std::io::Result<Option<u64>> {
    let len = file.metadata()?.len();
    let mut end = len;
    let mut buf = vec![0u8; 64 << 10];
    while end > 0 {
        let start = end.saturating_sub(buf.len() as u64);
        let chunk = &mut buf[..(end - start) as usize];
        file.seek(SeekFrom::Start(start))?;
        file.read_exact(chunk)?;
        if let Some(i) = chunk.iter().rposition(|&b| b == b'\n') {
            let keep = start + i as u64 + 1;
            return Ok((keep != len).then_some(keep));
        }
        end = start;
    }
    Ok((len > 0).then_some(0))
}

/// The complete lines of a JSON-lines file; a torn last line is skipped (and logged).
pub fn read_lines(path: &Path) -> Result<Vec<String>, RecordError> {
    let bytes = std::fs::read(path).map_err(|source| RecordError::Io { path: path.to_path_buf(), source })?;
    let complete = bytes.iter().rposition(|&b| b == b'\n').map_or(0, |i| i + 1);
    if complete < bytes.len() {
        tracing::warn!(path = %path.display(), bytes = bytes.len() - complete, "skipping a torn last line");
    }
    let text = String::from_utf8_lossy(&bytes[..complete]);
    Ok(text.lines().map(str::to_string).collect())
}

/// Every complete line of `path` as a `T`.
pub fn read_all<T: DeserializeOwned>(path: &Path) -> Result<Vec<T>, RecordError> {
    read_lines(path)?.iter().enumerate().map(|(i, line)| parse(path, i + 1, line)).collect()
}

fn parse<T: DeserializeOwned>(path: &Path, line: usize, text: &str) -> Result<T, RecordError> {
    serde_json::from_str(text).map_err(|e| RecordError::Corrupt {
        path: path.to_path_buf(),
        line,
        detail: e.to_string(),
    })
}

/// An action refused, with why.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Refused {
    /// The job acted on.
    pub job: JobId,
    /// The action as the policy sent it, when the validation refused it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub action: Option<wit::Action>,
    /// Why.
    pub reason: String,
}

impl Refused {
    /// The audit record of a refused action.
    pub fn of(r: &wasmsched_runtime::validate::Rejection) -> Refused {
        Refused { job: r.action.job, action: Some(r.action.clone()), reason: r.reason.clone() }
    }

    /// The audit record of an action the backend could not apply.
    pub fn failed(e: &wasmsched_core::backend::ApplyError) -> Refused {
        Refused { job: e.job, action: None, reason: e.reason.clone() }
    }
}

/// One policy's part in an audit line.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct AuditDecision {
    /// The policy's name.
    pub policy: String,
    /// The sha256 of the version that decided.
    pub sha256: String,
    /// For the active policy, what was handed to the backend; for a shadow, what it would
    /// have done.
    pub actions: Vec<wit::Action>,
    /// Actions refused by validation.
    pub rejected: Vec<Refused>,
    /// Valid actions refused over the disruption budget (the active policy only).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub over_budget: Vec<Refused>,
    /// Actions the backend could not apply (the active policy only).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub not_applied: Vec<Refused>,
    /// Why queued jobs wait, as the active policy said (validated), when it changed since the
    /// last line that had them (`[]`: no job has a reason any more); absent when unchanged.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub pending: Option<Vec<wit::Pending>>,
    /// Time in the policy, microseconds.
    pub latency_us: u64,
    /// The fallback taken, when the policy failed.
    pub fallback: Option<Fallback>,
    /// Why it failed, when it did.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub failure: Option<String>,
    /// For a shadow: whether it decided as the active policy did.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub agrees: Option<bool>,
}

impl AuditDecision {
    /// The audit record of one policy's answer.
    pub fn of(d: &Decided) -> AuditDecision {
        let o = &d.outcome;
        AuditDecision {
            policy: d.policy.to_string(),
            sha256: d.digest.clone(),
            actions: o.actions.clone(),
            rejected: o.rejected.iter().map(Refused::of).collect(),
            over_budget: o.over_budget.iter().map(Refused::of).collect(),
            not_applied: Vec::new(),
            pending: None,
            latency_us: o.latency.as_micros() as u64,
            fallback: o.fallback,
            failure: o.failure.as_ref().map(|f| wasmsched_core::error_chain(f)),
            agrees: None,
        }
    }
}

/// One line of the audit log: a tick on which the policies were asked.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct AuditLine {
    /// The tick's number since the host started, from 1.
    pub tick: u64,
    /// The backend's clock, milliseconds.
    pub time_ms: u64,
    /// The wall clock, milliseconds since the Unix epoch.
    pub wall_ms: u64,
    /// The active policy's decision; None when no policy was active.
    pub active: Option<AuditDecision>,
    /// The shadows' decisions.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub shadows: Vec<AuditDecision>,
    /// A split experiment's arms' decisions, in the experiment's order, each applied for its
    /// own jobs (no policy is active then).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub arms: Vec<AuditDecision>,
    /// Queued jobs the host started itself on this tick: the policy that places had left them
    /// waiting although they fit (the watchdog's stall rule).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub rescued: Vec<JobId>,
    /// The policy versions swapped in, refused, unloaded, rolled back or restored since the
    /// last line (a line is written for them even on a tick no policy was asked).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub changes: Vec<PolicyChange>,
    /// What the `[experiment]` did on this tick: a block began, or it concluded or stopped.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub experiment: Option<crate::experiment::ExperimentEvent>,
}

/// A change of the version a policy serves, as the audit log keeps it.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct PolicyChange {
    /// The policy.
    pub policy: String,
    /// What happened.
    pub outcome: ReloadOutcome,
    /// The version's sha256.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub sha256: Option<String>,
    /// What happened, in words.
    pub detail: String,
    /// Where the change came from: the resource, its generation and who changed it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub origin: Option<String>,
}

/// What a reload did.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum ReloadOutcome {
    /// A version now serves.
    Swapped,
    /// The file was refused; the previous version (if any) keeps serving.
    Refused,
    /// The file was deleted; the policy no longer serves.
    Unloaded,
    /// The previous version serves again.
    RolledBack,
    /// This host took the lead and started the policy from the state the last leader kept.
    Restored,
}

/// Milliseconds since the Unix epoch.
pub fn wall_ms() -> u64 {
    std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).map_or(0, |d| d.as_millis() as u64)
}

/// The first line of a telemetry recording.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct RecordingHeader {
    /// Always [`RECORDING_FORMAT`].
    pub format: String,
    /// The loop's tick, milliseconds.
    pub tick_ms: u64,
    /// The disruption budget the run went under; absent in recordings made before the budget.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub budget: Option<BudgetConfig>,
}

/// What a recording's header says it is.
pub const RECORDING_FORMAT: &str = "wasmsched-telemetry/1";

/// Writes the telemetry recording: every tick's delta, from a cursor of its own.
pub struct TelemetryRecorder {
    out: JsonLines,
    cursor: Cursor,
    pending: Option<(wit::Snapshot, Vec<DepartedRecord>)>,
    /// The last tick written.
    ticks: u64,
}

impl TelemetryRecorder {
    /// Start a recording at `path` (overwritten) for a loop ticking every `tick_ms`.
    pub fn create(path: &Path, tick_ms: u64, budget: BudgetConfig) -> Result<TelemetryRecorder, RecordError> {
        let mut out = JsonLines::create(path)?;
        out.write(&RecordingHeader { format: RECORDING_FORMAT.into(), tick_ms, budget: Some(budget) })?;
        Ok(TelemetryRecorder { out, cursor: Cursor::fresh(), pending: None, ticks: 0 })
    }

    /// The world as observed, before the policies see it: its delta, and the last records of
    /// the jobs that left since.
    pub fn observed(&mut self, world: &World) {
        let departed = world
            .departed_unsent(&self.cursor)
            .into_iter()
            .map(|(job, r)| DepartedRecord {
                job,
                time_ms: r.time_ms,
                epoch: r.epoch,
                values: r.values.iter().map(|v| v.is_finite().then_some(*v)).collect(),
            })
            .collect();
        self.pending = Some((world.snapshot_for(&mut self.cursor), departed));
    }

    /// The tick's outcome: writes its line.
    pub fn record(&mut self, tick: &Tick<'_>) -> Result<(), RecordError> {
        let recorded = |a: &crate::control::Decided| RecordedDecision {
            policy: a.policy.to_string(),
            sha256: a.digest.clone(),
            actions: a.outcome.actions.clone(),
            fallback: a.outcome.fallback.is_some(),
        };
        let decision = tick.active.as_ref().map(recorded);
        self.write(tick.number, decision, tick.arms.iter().map(recorded).collect())
    }

    /// The loop ended: the last observation (the one that found nothing left to run, which no
    /// tick follows) is written undecided.
    pub fn finish(&mut self) -> Result<(), RecordError> {
        self.write(self.ticks + 1, None, Vec::new())
    }

    fn write(
        &mut self,
        tick: u64,
        decision: Option<RecordedDecision>,
        arms: Vec<RecordedDecision>,
    ) -> Result<(), RecordError> {
        let Some((snapshot, departed)) = self.pending.take() else { return Ok(()) };
        self.ticks = tick;
        self.out.write(&RecordedTick { tick, snapshot, decision, arms, departed })
    }
}

/// A recording read back: its header and its ticks.
pub fn read_recording(path: &Path) -> Result<(RecordingHeader, Vec<RecordedTick>), RecordError> {
    let lines = read_lines(path)?;
    let Some(first) = lines.first() else {
        return Err(RecordError::Corrupt {
            path: path.to_path_buf(),
            line: 1,
            detail: "the recording is empty".into(),
        });
    };
    let header: RecordingHeader = parse(path, 1, first)?;
    if header.format != RECORDING_FORMAT {
        return Err(RecordError::Corrupt {
            path: path.to_path_buf(),
            line: 1,
            detail: format!("format {:?}; this host reads {RECORDING_FORMAT:?}", header.format),
        });
    }
    let ticks: Vec<RecordedTick> =
        lines.iter().enumerate().skip(1).map(|(i, l)| parse(path, i + 1, l)).collect::<Result<_, _>>()?;
    for (i, tick) in ticks.iter().enumerate() {
        check_snapshot(&tick.snapshot).map_err(|detail| RecordError::Corrupt {
            path: path.to_path_buf(),
            line: i + 2,
            detail,
        })?;
    }
    Ok((header, ticks))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[derive(Debug, PartialEq, Serialize, Deserialize)]
    struct Line {
        n: u32,
    }

    #[test]
    fn a_torn_last_line_is_skipped_by_the_reader_and_cut_when_the_log_is_opened_again() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("audit.jsonl");
        let mut log = JsonLines::append(&path).unwrap();
        for n in 1..=3 {
            log.write(&Line { n }).unwrap();
        }
        drop(log);
        // A kill in the middle of the fourth write.
        let mut f = OpenOptions::new().append(true).open(&path).unwrap();
        f.write_all(b"{\"n\":4, \"more\": [1, 2").unwrap();
        drop(f);
        assert_eq!(read_all::<Line>(&path).unwrap(), [Line { n: 1 }, Line { n: 2 }, Line { n: 3 }]);

        let mut log = JsonLines::append(&path).unwrap();
        log.write(&Line { n: 5 }).unwrap();
        let lines = read_all::<Line>(&path).unwrap();
        assert_eq!(lines.iter().map(|l| l.n).collect::<Vec<_>>(), [1, 2, 3, 5]);
    }

    #[test]
    fn a_corrupt_complete_line_is_an_error_naming_its_line() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("audit.jsonl");
        std::fs::write(&path, "{\"n\":1}\nnot json\n{\"n\":3}\n").unwrap();
        let e = read_all::<Line>(&path).unwrap_err().to_string();
        assert!(e.contains("line 2"), "{e}");
    }

    #[test]
    fn a_file_of_only_a_torn_line_is_emptied_on_open() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("a.jsonl");
        std::fs::write(&path, "{\"n\":").unwrap();
        assert!(read_all::<Line>(&path).unwrap().is_empty());
        JsonLines::append(&path).unwrap().write(&Line { n: 9 }).unwrap();
        assert_eq!(std::fs::read_to_string(&path).unwrap(), "{\"n\":9}\n");
    }
}
