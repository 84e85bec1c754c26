//! The live host's commands: `run` (the host), `status`, `rollback` and `probe` (its control
//! API).

use std::path::Path;
use std::process::ExitCode;

use wasmsched::api;

use super::ApiArgs;

pub fn run_host(
    path: &Path,
    http: Option<std::net::SocketAddr>,
    token_file: Option<std::path::PathBuf>,
) -> anyhow::Result<ExitCode> {
    let mut config = wasmsched::config::HostConfig::load(path)?;
    config.api.also(http, token_file).map_err(|e| anyhow::anyhow!("{e}"))?;
    let (summary, status) = wasmsched::run::run_config(config, |addr| {
        out!("control API on http://{addr}");
        if let api::Listen::Tcp(a) = addr {
            out!("the operator's page: http://{a}/");
        }
    })?;
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

/// `wasmsched stop-experiment`: end a running host's `[experiment]`; its configured roles
/// serve again.
pub fn stop_experiment(api: &ApiArgs) -> anyhow::Result<ExitCode> {
    out!("{}", api::client::stop_experiment(&api.addr, api.token.as_deref())?);
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
