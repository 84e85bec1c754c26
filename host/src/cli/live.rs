//! The live host's commands: `run` (the host), `status` and `rollback` (its control API),
//! and `replay` (a policy over a recording, diffed against what was done).

use std::path::Path;
use std::process::ExitCode;

use anyhow::Context;
use wasmsched::experiment::run::PolicyChoice;
use wasmsched::runtime::supervise::{Fallback, Quarantine, Supervised};
use wasmsched::{api, replay};

use super::{ApiArgs, RuntimeArgs};

pub fn run_host(path: &Path) -> anyhow::Result<ExitCode> {
    let (summary, status) = api::run_file(path, |addr| out!("control API on http://{addr}"))?;
    out!(
        "stopped after {} ticks ({:.1} s of backend time): {} decided, {} actions applied, {} swaps, {} files refused, {} late ticks",
        summary.ticks,
        summary.end_ms as f64 / 1000.0,
        summary.decisions,
        summary.applied,
        status.swaps,
        status.refused,
        status.late_ticks
    );
    Ok(ExitCode::SUCCESS)
}

/// Actions on one line, for a person.
fn actions(list: &Option<Vec<wasmsched::bindings::wit::Action>>) -> String {
    match list {
        None => "not asked".into(),
        Some(list) if list.is_empty() => "no actions".into(),
        Some(list) => {
            list.iter().map(|a| format!("job {} {:?} ({})", a.job, a.kind, a.reason)).collect::<Vec<_>>().join("; ")
        }
    }
}

/// `wasmsched replay`: run `policy` over the recording and print how its decisions differ.
pub fn replay(recording: &Path, policy: &str, show: usize, runtime: &RuntimeArgs) -> anyhow::Result<ExitCode> {
    let (rt, limits) = runtime.runtime()?;
    let choice = PolicyChoice::resolve(&rt, policy)?;
    let mut supervised =
        Supervised::new(choice.policy, choice.config_json, limits, Fallback::KeepLimits, Quarantine::default());
    let mut opened =
        replay::Recording::open(recording).with_context(|| format!("cannot replay {}", recording.display()))?;
    let report = replay::replay(&rt, &mut opened, &mut supervised);
    out!(
        "replayed {} ticks of {} with {policy}: {} decided, {} identical, {} differ",
        report.ticks,
        recording.display(),
        report.compared,
        report.identical,
        report.differences.len()
    );
    if report.recorded_fallbacks > 0 {
        out!("({} recorded ticks fell back; a deadline on the live host may not recur)", report.recorded_fallbacks);
    }
    for d in report.differences.iter().take(show) {
        out!("tick {}:\n  recorded: {}\n  replayed: {}", d.tick, actions(&d.recorded), actions(&d.replayed));
    }
    Ok(if report.is_identical() { ExitCode::SUCCESS } else { ExitCode::FAILURE })
}

/// `wasmsched status`: a running host's status, as text or JSON.
pub fn status(api: &ApiArgs, json: bool) -> anyhow::Result<ExitCode> {
    let status = api::client::status(&api.addr, api.token.as_deref())?;
    if json {
        out!("{}", serde_json::to_string_pretty(&status)?);
    } else {
        out!("{}", status.render().trim_end_matches('\n'));
    }
    Ok(ExitCode::SUCCESS)
}

/// `wasmsched rollback`: bring back a policy's previous version on a running host.
pub fn rollback(policy: &str, api: &ApiArgs) -> anyhow::Result<ExitCode> {
    let done = api::client::rollback(&api.addr, policy, api.token.as_deref())?;
    out!("{} rolled back: {} serves again", done.policy, done.sha256);
    Ok(ExitCode::SUCCESS)
}

/// `wasmsched probe ready|live`: a running host's readiness or liveness, for a pod's exec
/// probes: exit 0 when it says yes, else 1 and why.
pub fn probe(which: api::client::Probe, api: &ApiArgs) -> ExitCode {
    match api::client::probe(&api.addr, which) {
        Ok(()) => ExitCode::SUCCESS,
        Err(why) => {
            say!("{why}");
            ExitCode::FAILURE
        }
    }
}
