//! World recordings (`record::read_recording`, `replay::Recording::open`) and audit logs
//! (`record::read_all`): JSON lines.

use std::path::Path;

use proptest::prelude::*;
use proptest::test_runner::TestCaseError;

use wasmsched::backend::Backend;
use wasmsched::bindings::wit;
use wasmsched::error_chain;
use wasmsched::record::{self, AuditLine, RECORDING_FORMAT};
use wasmsched::world::{Cursor, JobId, World, sample};

use super::{Checked, Edit, apply, bytes, cases, file, list, names};

/// A change to a JSON value of a line: `at` picks which value (of those the change applies to).
#[derive(Clone, Debug)]
enum Change {
    Set(&'static str),
    Remove,
    Push,
    Pop,
    AddKey,
}

#[derive(Clone, Debug)]
enum LinesEdit {
    Line(Edit),
    Value(usize, usize, Change),
    Torn(usize),
}

fn lines_edits() -> impl Strategy<Value = Vec<LinesEdit>> {
    let values = list(
        "null|-1|1.5|0|255|256|65536|4294967295|4294967296|18446744073709551615|1e300|\"x\"|\"\"|[]|{}|true|[1]|\
         \"wasmsched-telemetry/2\"|\"never-started\"|\"preempted\"",
    );
    let change = prop_oneof![
        4 => prop::sample::select(values).prop_map(Change::Set),
        2 => Just(Change::Remove),
        2 => Just(Change::Push),
        2 => Just(Change::Pop),
        1 => Just(Change::AddKey),
    ];
    let lines = vec!["", "{}", "null", "[]", "{\"tick\": 1}", "\u{1b}[0m"];
    let at = || any::<usize>();
    let line = prop_oneof![
        at().prop_map(Edit::Delete),
        at().prop_map(Edit::Duplicate),
        (at(), at()).prop_map(|(l, c)| Edit::Truncate(l, c)),
        (at(), at()).prop_map(|(l, c)| Edit::Misspell(l, c)),
        (at(), prop::sample::select(lines)).prop_map(|(l, s)| Edit::Insert(l, s.to_string())),
    ]
    .prop_map(LinesEdit::Line);
    let edit = prop_oneof![
        2 => line,
        6 => (at(), at(), change).prop_map(|(l, at, c)| LinesEdit::Value(l, at, c)),
        1 => any::<usize>().prop_map(LinesEdit::Torn),
    ];
    prop::collection::vec(edit, 1..4)
}

/// Every value's JSON pointer, the root's (`""`) first.
fn pointers(value: &serde_json::Value, at: String, out: &mut Vec<(String, u8)>) {
    use serde_json::Value;
    let kind = match value {
        Value::Array(_) => 1,
        Value::Object(_) => 2,
        _ => 0,
    };
    out.push((at.clone(), kind));
    match value {
        Value::Object(map) => {
            for (k, v) in map {
                pointers(v, format!("{at}/{}", k.replace('~', "~0").replace('/', "~1")), out);
            }
        }
        Value::Array(items) => {
            for (i, v) in items.iter().enumerate() {
                pointers(v, format!("{at}/{i}"), out);
            }
        }
        _ => {}
    }
}

fn change_json(line: &str, at: usize, change: &Change) -> String {
    use serde_json::Value;
    let Ok(mut value) = serde_json::from_str::<Value>(line) else { return line.to_string() };
    let mut all = Vec::new();
    pointers(&value, String::new(), &mut all);
    let wanted = |kind: u8| match change {
        Change::Set(_) | Change::Remove => true,
        Change::Push | Change::Pop => kind == 1,
        Change::AddKey => kind == 2,
    };
    let mut candidates: Vec<&String> = all.iter().skip(1).filter(|(_, kind)| wanted(*kind)).map(|(p, _)| p).collect();
    // Half the values set are a job's or a node's handle: the numbers a replay indexes by.
    let ids: Vec<&String> =
        candidates.iter().copied().filter(|p| ["/handle", "/job", "/node"].iter().any(|k| p.contains(k))).collect();
    if matches!(change, Change::Set(_)) && at.is_multiple_of(2) && !ids.is_empty() {
        candidates = ids;
    }
    let Some(pointer) = candidates.get(at % candidates.len().max(1)).map(|p| p.as_str()) else {
        return line.to_string();
    };
    match (change, value.pointer_mut(pointer)) {
        (Change::Set(text), Some(v)) => *v = serde_json::from_str(text).expect("valid JSON"),
        (Change::Push, Some(Value::Array(items))) => items.push(items.last().cloned().unwrap_or(Value::from(0))),
        (Change::Pop, Some(Value::Array(items))) => drop(items.pop()),
        (Change::AddKey, Some(Value::Object(map))) => drop(map.insert("colour".into(), Value::from(1))),
        (Change::Remove, _) => {
            let (parent, key) = pointer.rsplit_once('/').expect("not the root");
            let key = key.replace("~1", "/").replace("~0", "~");
            match value.pointer_mut(parent) {
                Some(Value::Object(map)) => drop(map.remove(&key)),
                Some(Value::Array(items)) => drop(items.remove(key.parse::<usize>().expect("an index"))),
                _ => {}
            }
        }
        _ => {}
    }
    value.to_string()
}

/// The lines with the edits made, as a file's bytes.
fn edit_lines(lines: &[String], edits: &[LinesEdit]) -> Vec<u8> {
    let mut lines = lines.to_vec();
    let mut torn = None;
    for edit in edits {
        match edit {
            LinesEdit::Line(e) => {
                lines = apply(&lines.join("\n"), std::slice::from_ref(e), false).lines().map(str::to_string).collect()
            }
            LinesEdit::Value(l, at, change) if !lines.is_empty() => {
                let n = lines.len();
                lines[l % n] = change_json(&lines[l % n], *at, change);
            }
            LinesEdit::Value(..) => {}
            LinesEdit::Torn(at) => torn = Some(*at),
        }
    }
    let mut text = lines.join("\n") + "\n";
    if let Some(at) = torn {
        let mut keep = text.len() - 1 - at % text.len().max(1) % 40;
        while !text.is_char_boundary(keep) {
            keep -= 1;
        }
        text.truncate(keep);
    }
    text.into_bytes()
}

#[derive(Clone, Debug)]
struct RecordingGen {
    nodes: usize,
    jobs: usize,
    queued: usize,
    epochs: u32,
    tick_ms: u64,
    /// Per tick: whether a job ends before it, and whether the policy decided.
    ticks: Vec<(bool, bool)>,
}

fn recording() -> impl Strategy<Value = RecordingGen> {
    (1..4usize, 0..6usize, 0..3usize, 0..4u32, 1..100_000u64, prop::collection::vec(any::<(bool, bool)>(), 1..5))
        .prop_map(|(nodes, jobs, queued, epochs, tick_ms, ticks)| RecordingGen {
            nodes,
            jobs,
            queued,
            epochs,
            tick_ms,
            ticks,
        })
}

/// A recording's lines as a host writes them, each tick's snapshot, and the world at the end.
fn recording_lines(g: &RecordingGen) -> (Vec<String>, Vec<wit::Snapshot>, World) {
    let mut world = sample::with_queue(g.nodes, g.jobs, g.queued, g.epochs);
    let mut cursor = Cursor::fresh();
    let mut lines = vec![serde_json::json!({ "format": RECORDING_FORMAT, "tick_ms": g.tick_ms }).to_string()];
    let mut snapshots = Vec::new();
    for (n, &(ends, decides)) in g.ticks.iter().enumerate() {
        if n > 0 {
            world.set_time_ms(world.time_ms() + g.tick_ms);
            world.accrue_service(g.tick_ms);
            let running: Vec<JobId> = world.jobs().map(|(s, _)| s.handle).collect();
            for (i, &h) in running.iter().enumerate() {
                world.record(h, n as u32 + g.epochs, vec![0.5 + i as f64 / 64.0]);
            }
            if let Some(&first) = running.first().filter(|_| ends) {
                world.remove_job(first);
            }
        }
        let snapshot = world.snapshot_for(&mut cursor);
        let action = wit::Action { job: JobId(0), kind: wit::ActionKind::SetCpu(Some(1500)), reason: "cap".into() };
        let decision = decides
            .then(|| serde_json::json!({ "policy": "p", "sha256": "ab12", "actions": [action], "fallback": false }));
        lines.push(serde_json::json!({ "tick": n + 1, "snapshot": snapshot, "decision": decision }).to_string());
        snapshots.push(snapshot);
    }
    (lines, snapshots, world)
}

/// A recording that reads plays back without a panic; an error names the file and the line.
fn check_recording(path: &Path, lines: usize) -> Checked {
    match record::read_recording(path) {
        Ok(_) => {
            let mut replay =
                wasmsched::replay::Recording::open(path).map_err(|e| TestCaseError::fail(error_chain(&e)))?;
            let mut world = World::new();
            replay.backend.observe(&mut world, u64::MAX);
            let _ = world.snapshot_for(&mut Cursor::fresh());
            prop_assert_eq!(world.job_count() + world.queue_len(), world.all_jobs().len());
            // `whatif` reads it too: a scenario or a reason, never a panic.
            if let Ok(recorded) = wasmsched::whatif::Recorded::open(path) {
                let _ = recorded.scenario();
            }
        }
        Err(e) => names(&e, &path.display().to_string(), lines)?,
    }
    Ok(())
}

fn audit_line() -> impl Strategy<Value = serde_json::Value> {
    let decision = (
        "[a-z][a-z0-9-]{0,8}",
        "[0-9a-f]{8}",
        prop::collection::vec((any::<u32>(), prop::option::of(any::<u64>())), 0..3),
        (any::<u64>(), prop::sample::select(vec!["null", "\"keep-limits\"", "\"fair-share\""])),
        (prop::option::of(".{0,12}"), prop::option::of(any::<bool>())),
    )
        .prop_map(|(policy, sha256, actions, (latency_us, fallback), (failure, agrees))| {
            let actions: Vec<wit::Action> = actions
                .into_iter()
                .map(|(job, cpu)| wit::Action {
                    job: JobId(job),
                    kind: wit::ActionKind::SetCpu(cpu),
                    reason: "why".into(),
                })
                .collect();
            let mut d = serde_json::json!({
                "policy": policy, "sha256": sha256, "actions": actions, "latency_us": latency_us,
                "rejected": [{ "job": 1, "reason": "too low" }],
                "fallback": serde_json::from_str::<serde_json::Value>(fallback).expect("JSON"),
            });
            if let Some(failure) = failure {
                d["failure"] = failure.into();
            }
            if let Some(agrees) = agrees {
                d["agrees"] = agrees.into();
            }
            d
        });
    (any::<u64>(), any::<u64>(), any::<u64>(), prop::option::of(decision.clone()), prop::collection::vec(decision, 0..3))
        .prop_map(|(tick, time_ms, wall_ms, active, shadows)| {
            serde_json::json!({ "tick": tick, "time_ms": time_ms, "wall_ms": wall_ms, "active": active, "shadows": shadows })
        })
}

proptest! {
    #![proptest_config(cases())]

    #[test]
    fn any_recording_or_audit_log_reads_or_names_its_path_and_line(bytes in bytes()) {
        let (_dir, path) = file("run.jsonl", &bytes);
        let lines = String::from_utf8_lossy(&bytes).lines().count();
        check_recording(&path, lines)?;
        if let Err(e) = record::read_all::<AuditLine>(&path) {
            names(&e, &path.display().to_string(), lines)?;
        }
    }

    #[test]
    fn a_valid_recording_reads_back_and_replays_into_the_world_it_was_cut_from(g in recording()) {
        let (lines, snapshots, world) = recording_lines(&g);
        let (_dir, path) = file("run.jsonl", (lines.join("\n") + "\n").as_bytes());
        let (header, ticks) = record::read_recording(&path).map_err(|e| TestCaseError::fail(error_chain(&e)))?;
        prop_assert_eq!((header.format.as_str(), header.tick_ms), (RECORDING_FORMAT, g.tick_ms));
        prop_assert_eq!(ticks.len(), snapshots.len());
        for (n, (t, s)) in ticks.iter().zip(&snapshots).enumerate() {
            prop_assert_eq!((t.tick, &t.snapshot), (n as u64 + 1, s));
            prop_assert_eq!(t.decision.as_ref().map(|d| d.actions.len()), g.ticks[n].1.then_some(1));
        }
        let mut replay = wasmsched::replay::Recording::open(&path).map_err(|e| TestCaseError::fail(error_chain(&e)))?;
        let mut replayed = World::new();
        replay.backend.observe(&mut replayed, u64::MAX);
        let handles = |w: &World| -> (Vec<JobId>, Vec<JobId>) {
            (w.jobs().map(|(s, _)| s.handle).collect(), w.queue().map(|(s, _)| s.handle).collect())
        };
        prop_assert_eq!(handles(&replayed), handles(&world));
        prop_assert_eq!(replayed.nodes(), world.nodes());
    }

    #[test]
    fn a_recording_near_a_valid_one_replays_or_names_its_path_and_line(g in recording(), edits in lines_edits()) {
        let (lines, _, _) = recording_lines(&g);
        let bytes = edit_lines(&lines, &edits);
        let (_dir, path) = file("run.jsonl", &bytes);
        check_recording(&path, String::from_utf8_lossy(&bytes).lines().count())?;
    }

    #[test]
    fn a_valid_audit_log_reads_back_line_by_line(lines in prop::collection::vec(audit_line(), 0..5)) {
        let text: String = lines.iter().map(|l| format!("{l}\n")).collect();
        let (_dir, path) = file("audit.jsonl", text.as_bytes());
        let read = record::read_all::<AuditLine>(&path).map_err(|e| TestCaseError::fail(error_chain(&e)))?;
        prop_assert_eq!(read.len(), lines.len());
        for (got, wanted) in read.iter().zip(&lines) {
            prop_assert_eq!((got.tick, got.time_ms, got.wall_ms), (wanted["tick"].as_u64().expect("u64"), wanted["time_ms"].as_u64().expect("u64"), wanted["wall_ms"].as_u64().expect("u64")));
            prop_assert_eq!(got.shadows.len(), wanted["shadows"].as_array().map_or(0, Vec::len));
            let decisions = got.active.iter().chain(&got.shadows);
            let wanted_decisions = wanted["active"].as_object().into_iter().chain(wanted["shadows"].as_array().into_iter().flatten().filter_map(|d| d.as_object()));
            for (d, w) in decisions.zip(wanted_decisions) {
                prop_assert_eq!(serde_json::to_value(&d.actions).expect("JSON"), w["actions"].clone());
                prop_assert_eq!((&d.policy, d.latency_us, d.rejected.len()), (&w["policy"].as_str().expect("a name").to_string(), w["latency_us"].as_u64().expect("u64"), 1));
                prop_assert_eq!(serde_json::to_value(d.fallback).expect("JSON"), w["fallback"].clone());
                prop_assert_eq!((d.failure.as_deref(), d.agrees), (w.get("failure").and_then(|f| f.as_str()), w.get("agrees").and_then(|a| a.as_bool())));
            }
        }
    }

    #[test]
    fn an_audit_log_near_a_valid_one_reads_or_names_its_path_and_line(
        lines in prop::collection::vec(audit_line(), 1..5),
        edits in lines_edits(),
    ) {
        let lines: Vec<String> = lines.iter().map(|l| l.to_string()).collect();
        let bytes = edit_lines(&lines, &edits);
        let (_dir, path) = file("audit.jsonl", &bytes);
        if let Err(e) = record::read_all::<AuditLine>(&path) {
            names(&e, &path.display().to_string(), String::from_utf8_lossy(&bytes).lines().count())?;
        }
    }
}

/// A recording of one tick with `change` made to its snapshot.
fn recording_with(change: impl FnOnce(&mut serde_json::Value)) -> (tempfile::TempDir, std::path::PathBuf) {
    let g = RecordingGen { nodes: 1, jobs: 2, queued: 1, epochs: 1, tick_ms: 1000, ticks: vec![(false, false)] };
    let (lines, _, _) = recording_lines(&g);
    let mut tick: serde_json::Value = serde_json::from_str(&lines[1]).expect("a tick");
    change(&mut tick["snapshot"]);
    file("run.jsonl", format!("{}\n{tick}\n", lines[0]).as_bytes())
}

#[test]
fn a_recording_whose_columns_do_not_line_up_is_refused_naming_its_line_not_replayed_into_a_panic() {
    for (group, column) in [("jobs", "node"), ("jobs", "run_ms"), ("queue", "reason"), ("progress", "epoch")] {
        let (_dir, path) = recording_with(|s| drop(s[group][column].as_array_mut().expect("a column").pop()));
        let e = wasmsched::replay::Recording::open(&path).err().map(|e| error_chain(&e)).unwrap_or_default();
        assert!(e.contains(&format!("{}, line 2: the {group} columns", path.display())), "{group}.{column}: {e}");
    }
}

#[test]
fn a_recording_that_adds_the_last_possible_job_handle_is_refused_not_replayed_into_an_overflow() {
    let (_dir, path) = recording_with(|s| s["added"][0]["handle"] = u32::MAX.into());
    let e = wasmsched::replay::Recording::open(&path).err().map(|e| error_chain(&e)).unwrap_or_default();
    assert!(e.contains(&format!("{}, line 2: a job handle is 4294967295", path.display())), "{e}");
}
