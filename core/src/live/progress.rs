//! A job's progress, read from its log stream: the one reader the live backends (Docker and
//! Kubernetes) and `calibrate` share. Two line formats are understood:
//!
//! - **JSON lines**: one object per epoch, with the declared metrics by name and, optionally,
//!   the epoch: `{"epoch": 3, "accuracy": 0.81, "loss": 0.45}`. Other keys are ignored.
//! - **FlowCon's format**, for compatibility: `Loss: 0.4567 Time: 1.234`. It gives `loss`
//!   (and `time`, when the job declares such a metric).
//!
//! A record's values follow the job's declared metrics, main metric first. Any other line is
//! the job's own output and is ignored; a line that starts like a progress record but does not
//! parse, or lacks a declared metric, is garbage: reported (once per cause by the caller) and
//! skipped. Without an `epoch` key, epochs are counted from the records. Followers leave what
//! they read in an [`Inbox`]; each observation hands it to the world ([`hand`]).

use wasmsched_rules::JobId;

use crate::bindings::wit;

/// The longest line kept; a longer one is garbage (a job printing a blob, say).
pub const MAX_LINE: usize = 64 * 1024;

/// What one log line says.
#[derive(Clone, Debug, PartialEq)]
pub enum Line {
    /// A progress record: its epoch if the line gave one, and the declared metrics' values.
    Progress {
        /// The epoch the line names, if it does.
        epoch: Option<u32>,
        /// One value per declared metric, in their order.
        values: Vec<f64>,
    },
    /// The job's own output.
    Other,
    /// A line that looks like progress but cannot be read; says why.
    Garbage(String),
}

/// Read one line (without its timestamp) against the job's declared metrics.
pub fn parse(line: &str, metrics: &[wit::MetricSpec]) -> Line {
    let line = line.trim();
    if line.starts_with('{') {
        json(line, metrics)
    } else if let Some(rest) = line.strip_prefix("Loss:") {
        flowcon(rest, metrics)
    } else {
        Line::Other
    }
}

fn json(line: &str, metrics: &[wit::MetricSpec]) -> Line {
    let object: serde_json::Map<String, serde_json::Value> = match serde_json::from_str(line) {
        Ok(o) => o,
        Err(e) => return Line::Garbage(format!("a JSON progress line does not parse ({e})")),
    };
    let main = metrics.first().map_or("", |m| m.name.as_str());
    if !object.contains_key(main) && !object.contains_key("epoch") {
        return Line::Other;
    }
    let epoch = match object.get("epoch") {
        None => None,
        Some(e) => match e.as_u64().and_then(|e| u32::try_from(e).ok()) {
            Some(e) => Some(e),
            None => return Line::Garbage(format!("\"epoch\" is {e}, not a whole number of epochs")),
        },
    };
    project(metrics, epoch, |name| object.get(name).map(|v| v.as_f64().ok_or_else(|| v.to_string())))
}

fn flowcon(rest: &str, metrics: &[wit::MetricSpec]) -> Line {
    let (loss, time) = match rest.split_once("Time:") {
        Some((l, t)) => (l.trim(), Some(t.trim())),
        None => (rest.trim(), None),
    };
    let number = |text: &str| text.parse::<f64>().map_err(|_| text.to_string());
    project(metrics, None, |name| match name {
        "loss" => Some(number(loss)),
        "time" => time.map(number),
        _ => None,
    })
}

/// The declared metrics' values, in order, from `lookup` (None: absent; Err: not a number).
fn project(
    metrics: &[wit::MetricSpec],
    epoch: Option<u32>,
    lookup: impl Fn(&str) -> Option<Result<f64, String>>,
) -> Line {
    let mut values = Vec::with_capacity(metrics.len());
    for m in metrics {
        match lookup(&m.name) {
            Some(Ok(v)) if v.is_finite() => values.push(v),
            Some(Ok(v)) => return Line::Garbage(format!("{} is {v}, not a finite number", m.name)),
            Some(Err(text)) => return Line::Garbage(format!("{} is {text}, not a number", m.name)),
            None => {
                return Line::Garbage(format!(
                    "the line lacks the declared metric {:?}: print it, or fix the job's wasmsched.metric label",
                    m.name
                ));
            }
        }
    }
    Line::Progress { epoch, values }
}

/// Splits a log's timestamp (`docker logs --timestamps`) from its text: Unix ns and the rest.
pub fn timestamped(line: &str) -> Option<(u64, &str)> {
    let (stamp, text) = line.split_once(' ')?;
    Some((unix_ns(stamp)?, text))
}

/// A Docker time in RFC 3339 (`2026-11-23T10:56:00.450091411Z`) as Unix ns.
pub fn unix_ns(stamp: &str) -> Option<u64> {
    let at = humantime::parse_rfc3339(stamp).ok()?;
    u64::try_from(at.duration_since(std::time::UNIX_EPOCH).ok()?.as_nanos()).ok()
}

/// Turns a log stream's chunks into whole lines. A line longer than [`MAX_LINE`] is cut to
/// that length and marked, never kept growing.
#[derive(Default)]
pub struct Lines {
    partial: Vec<u8>,
    overlong: bool,
}

impl Lines {
    /// Feed a chunk; `each` gets every line it completes (lossy UTF-8) and whether it was cut.
    pub fn feed(&mut self, chunk: &[u8], mut each: impl FnMut(&str, bool)) {
        for piece in chunk.split_inclusive(|&b| b == b'\n') {
            let (body, ends) = match piece.strip_suffix(b"\n") {
                Some(b) => (b, true),
                None => (piece, false),
            };
            let room = MAX_LINE.saturating_sub(self.partial.len());
            self.overlong |= body.len() > room;
            self.partial.extend_from_slice(&body[..body.len().min(room)]);
            if ends {
                let text = String::from_utf8_lossy(&self.partial);
                each(text.trim_end_matches('\r'), self.overlong);
                self.partial.clear();
                self.overlong = false;
            }
        }
    }
}

/// A log follower's reading of one job's stream (timestamps on): whole lines, each with the
/// time it was written, read against the job's metrics; lines at or before `after` (Unix ns,
/// the last line a previous follower read) are skipped, so a resumed stream reads no line
/// twice. The Docker and Kubernetes backends follow their logs through it.
pub struct Reader {
    lines: Lines,
    metrics: Vec<wit::MetricSpec>,
    after: u64,
}

impl Reader {
    /// A reader for a job with `metrics`, resuming after `after_ns` (0: from the start).
    pub fn new(metrics: Vec<wit::MetricSpec>, after_ns: u64) -> Reader {
        Reader { lines: Lines::default(), metrics, after: after_ns }
    }

    /// Feed a chunk; `each` gets every new line that is not the job's own output: its time
    /// (Unix ns) and what it says. Every new line read, output included, moves `last_ns`.
    pub fn feed(&mut self, chunk: &[u8], last_ns: &std::sync::atomic::AtomicU64, mut each: impl FnMut(u64, Line)) {
        let (metrics, after) = (&self.metrics, self.after);
        self.lines.feed(chunk, |text, cut| {
            let Some((at_ns, text)) = timestamped(text) else { return };
            if at_ns <= after && after > 0 {
                return;
            }
            last_ns.store(at_ns, std::sync::atomic::Ordering::Relaxed);
            let line =
                if cut { Line::Garbage(format!("a line longer than {MAX_LINE} bytes")) } else { parse(text, metrics) };
            if line != Line::Other {
                each(at_ns, line);
            }
        });
    }
}

/// Where log followers leave the lines they read, keyed by job (a container's id, a pod's
/// uid), until the next observation hands them to the world. Shared by the followers (on the
/// backend's runtime) and the backend.
#[derive(Clone, Default)]
pub struct Inbox(std::sync::Arc<std::sync::Mutex<Vec<Incoming>>>);

/// One line a follower read: whose, when it was written (Unix ms), and what it says.
pub struct Incoming {
    /// The job's key: a container's id, a pod's uid.
    pub key: std::sync::Arc<str>,
    /// When the line was written, Unix milliseconds.
    pub at_unix_ms: u64,
    /// What it says.
    pub line: Line,
}

impl Inbox {
    /// Read `chunk` of job `key`'s stream through `reader` and keep the lines that say something.
    pub fn feed(
        &self,
        key: &std::sync::Arc<str>,
        reader: &mut Reader,
        chunk: &[u8],
        last_ns: &std::sync::atomic::AtomicU64,
    ) {
        let mut batch = Vec::new();
        reader.feed(chunk, last_ns, |at_ns, line| {
            batch.push(Incoming { key: key.clone(), at_unix_ms: at_ns / 1_000_000, line });
        });
        if !batch.is_empty() {
            self.0.lock().expect("inbox lock").extend(batch);
        }
    }

    /// Every line kept so far, in the order read; the inbox is left empty.
    pub fn take(&self) -> Vec<Incoming> {
        std::mem::take(&mut *self.0.lock().expect("inbox lock"))
    }
}

/// Hand one line of job `handle` to the world: a progress record at the time it was written
/// on the backend's clock (whose zero is `origin_unix_ms`; never later than `until_ms`),
/// numbered by the epoch it names or else counted on from `epochs`. A garbage line comes back
/// as what the backend logs once: its key (per job and cause) and the message, naming the job
/// by its spec or else by `fallback_name` (asked only then).
pub fn hand(
    world: &mut crate::world::World,
    handle: JobId,
    epochs: &mut u32,
    incoming: Incoming,
    (origin_unix_ms, until_ms): (u64, u64),
    fallback_name: impl FnOnce() -> String,
) -> Option<(String, String)> {
    match incoming.line {
        Line::Progress { epoch, values } => {
            *epochs = epoch.unwrap_or(*epochs + 1);
            let at = incoming.at_unix_ms.saturating_sub(origin_unix_ms).min(until_ms);
            world.record_at(handle, at, *epochs, values);
            None
        }
        Line::Garbage(why) => {
            let cause = why.split(['(', ':']).next().unwrap_or("");
            let name = world.spec(handle).map_or_else(fallback_name, |s| s.name.clone());
            Some((
                format!("garbage:{}:{cause}", incoming.key),
                format!("job {name}: skipped a log line ({why}); later such lines are skipped silently"),
            ))
        }
        Line::Other => None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn metrics(names: &[(&str, wit::Direction)]) -> Vec<wit::MetricSpec> {
        names.iter().map(|(n, d)| wit::MetricSpec { name: n.to_string(), direction: *d }).collect()
    }

    const HIGHER: wit::Direction = wit::Direction::HigherIsBetter;
    const LOWER: wit::Direction = wit::Direction::LowerIsBetter;

    #[test]
    fn json_lines_give_the_declared_metrics_in_order() {
        let m = metrics(&[("accuracy", HIGHER), ("loss", LOWER)]);
        let line = r#"{"epoch":3,"loss":0.45,"accuracy":0.81,"time_s":1.2}"#;
        assert_eq!(parse(line, &m), Line::Progress { epoch: Some(3), values: vec![0.81, 0.45] });
        assert_eq!(parse(r#"{"accuracy":0.5,"loss":1}"#, &m), Line::Progress { epoch: None, values: vec![0.5, 1.0] });
    }

    #[test]
    fn flowcon_lines_give_loss_and_time() {
        let m = metrics(&[("loss", LOWER)]);
        assert_eq!(parse("Loss: 0.4567 Time: 1.234", &m), Line::Progress { epoch: None, values: vec![0.4567] });
        let with_time = metrics(&[("loss", LOWER), ("time", LOWER)]);
        assert_eq!(parse("Loss: 2 Time: 30", &with_time), Line::Progress { epoch: None, values: vec![2.0, 30.0] });
    }

    #[test]
    fn other_output_is_ignored() {
        let m = metrics(&[("accuracy", HIGHER)]);
        for line in ["starting", "", "Epoch 3/10", r#"{"level":"info","msg":"hi"}"#] {
            assert_eq!(parse(line, &m), Line::Other, "{line}");
        }
    }

    #[test]
    fn garbage_says_what_is_wrong() {
        let m = metrics(&[("accuracy", HIGHER), ("loss", LOWER)]);
        let cases = [
            (r#"{"epoch":1,"accuracy":0.5"#, "does not parse"),
            (r#"{"epoch":-1,"accuracy":0.5,"loss":1}"#, "not a whole number"),
            (r#"{"epoch":2,"accuracy":"high","loss":1}"#, "not a number"),
            (r#"{"epoch":2,"accuracy":0.5}"#, "lacks the declared metric \"loss\""),
            ("Loss: x Time: 1", "lacks the declared metric \"accuracy\""),
        ];
        for (line, why) in cases {
            match parse(line, &m) {
                Line::Garbage(reason) => assert!(reason.contains(why), "{line}: {reason}"),
                other => panic!("{line}: {other:?}"),
            }
        }
        let loss = metrics(&[("loss", LOWER)]);
        assert!(matches!(parse("Loss: nan", &loss), Line::Garbage(r) if r.contains("finite")));
        assert!(matches!(parse("Loss: x", &loss), Line::Garbage(r) if r.contains("not a number")));
    }

    #[test]
    fn timestamps_are_split_off() {
        let (ns, text) = timestamped("2026-11-23T10:56:00.450091411Z {\"epoch\":1}").unwrap();
        assert_eq!(ns % 1_000_000_000, 450_091_411);
        assert_eq!(text, "{\"epoch\":1}");
        assert_eq!(timestamped("no stamp here"), None);
    }

    #[test]
    fn lines_are_whole_across_chunks_and_capped() {
        let mut lines = Lines::default();
        let mut seen = Vec::new();
        for chunk in [&b"Loss: 1 Ti"[..], b"me: 2\nLoss: 3", b"\r\n\n"] {
            lines.feed(chunk, |l, cut| seen.push((l.to_string(), cut)));
        }
        assert_eq!(seen, [("Loss: 1 Time: 2".to_string(), false), ("Loss: 3".into(), false), (String::new(), false)]);
        seen.clear();
        lines.feed(&vec![b'x'; MAX_LINE + 10], |_, _| unreachable!("no newline yet"));
        lines.feed(b"yy\nok\n", |l, cut| seen.push((l.len().to_string(), cut)));
        assert_eq!(seen, [(MAX_LINE.to_string(), true), ("2".into(), false)]);
    }
}
