//! `wasmsched run`, assembled: the config read, the engine started, the host built with the
//! lab's workload loader (for a simulated backend), Ctrl-C and SIGTERM heard, the control API
//! served when the config enables it, and the loop run to its end.

/// `wasmsched run --config PATH`: the host of the config at `path`, with its control API when
/// the config enables it (`serving` hears each address it is served on), until Ctrl-C or SIGTERM. The loop's
/// summary and the last status.
pub fn run_file(
    path: &std::path::Path,
    serving: impl Fn(&wasmsched_host::api::Listen),
) -> anyhow::Result<(wasmsched_loop::control::LoopSummary, wasmsched_host::status::Status)> {
    run_config(wasmsched_host::config::HostConfig::load(path)?, serving)
}

/// [`run_file`] with the config already read.
pub fn run_config(
    config: wasmsched_host::config::HostConfig,
    serving: impl Fn(&wasmsched_host::api::Listen),
) -> anyhow::Result<(wasmsched_loop::control::LoopSummary, wasmsched_host::status::Status)> {
    use anyhow::Context;
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
    let mut servers = Vec::new();
    for addr in config.api.addresses().into_iter().filter(|_| config.api.enabled) {
        let server = wasmsched_host::api::serve(handle.clone(), addr, config.api.token.clone())?;
        serving(server.addr());
        servers.push(server);
    }
    let summary = host.run(&rt)?;
    Ok((summary, handle.board().get()))
}
