//! `wasmsched run`, assembled: the config read, the engine started, the host built with the
//! lab's workload loader (for a simulated backend), Ctrl-C and SIGTERM heard, the control API
//! served when the config enables it, and the loop run to its end.

/// `wasmsched run --config PATH`: the host of the config at `path`, with its control API when
/// the config enables it (`serving` hears its address), until Ctrl-C or SIGTERM. The loop's
/// summary and the last status.
pub fn run_file(
    path: &std::path::Path,
    serving: impl FnOnce(&wasmsched_host::api::Listen),
) -> anyhow::Result<(wasmsched_loop::control::LoopSummary, wasmsched_host::status::Status)> {
    use anyhow::Context;
    let config = wasmsched_host::config::HostConfig::load(path)?;
    let mut runtime_config = wasmsched_runtime::RuntimeConfig::default();
    if let Some(dir) = &config.cache_dir {
        runtime_config.cache_dir = Some(dir.clone());
    }
    let rt = wasmsched_runtime::Runtime::new(runtime_config)
        .map_err(|e| anyhow::anyhow!("{e:#}"))
        .context("cannot start the WebAssembly engine")?;
    let host = wasmsched_host::host::Host::new(config.clone(), wasmsched_lab::scenario::Scenario::load_workload)
        .context("cannot start the host")?;
    let handle = host.handle();
    wasmsched_host::host::stop_on_signal(handle.clone()).context("cannot listen for Ctrl-C")?;
    let _api = if config.api.enabled {
        let server = wasmsched_host::api::serve(handle.clone(), config.api.listen.clone(), config.api.token.clone())?;
        serving(server.addr());
        Some(server)
    } else {
        None
    };
    let summary = host.run(&rt)?;
    Ok((summary, handle.board().get()))
}
