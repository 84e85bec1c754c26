//! The `wasmsched` command line: parses arguments and calls into the library.

use std::path::PathBuf;
use std::process::ExitCode;
use std::time::Duration;

use anyhow::Context;
use clap::{Args, Parser, Subcommand};
use tracing_subscriber::EnvFilter;
use wasmsched::admission;
use wasmsched::runtime::{Limits, Runtime, RuntimeConfig};
use wasmsched::{shipped, snapshot};

/// A WebAssembly policy-plugin host for the schedulers of deep-learning containers.
#[derive(Parser)]
#[command(version, about)]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Subcommand)]
enum Command {
    /// Check and dry-run every shipped policy (the simulator's comparison comes next).
    Demo(RuntimeArgs),
    /// Check policy files: contract and version, init, and a dry-run decide. Exit 1 when
    /// any file fails.
    Validate {
        /// Policy components (`.wasm`); a `NAME.toml` beside one is its config.
        #[arg(required = true)]
        files: Vec<PathBuf>,
        #[command(flatten)]
        runtime: RuntimeArgs,
    },
}

#[derive(Args)]
struct RuntimeArgs {
    /// Deadline per policy call, in milliseconds.
    #[arg(long, default_value_t = 50)]
    deadline_ms: u64,
    /// Memory cap per policy instance, in MiB.
    #[arg(long, default_value_t = 64)]
    memory_mib: u64,
    /// Where compiled policies are cached (default: ~/.cache/wasmsched).
    #[arg(long)]
    cache_dir: Option<PathBuf>,
    /// Compile every time; do not read or write the cache.
    #[arg(long)]
    no_cache: bool,
}

impl RuntimeArgs {
    fn runtime(&self) -> anyhow::Result<(Runtime, Limits)> {
        let mut config = RuntimeConfig::default();
        if let Some(dir) = &self.cache_dir {
            config.cache_dir = Some(dir.clone());
        }
        if self.no_cache {
            config.cache_dir = None;
        }
        let rt = Runtime::new(config)
            .map_err(|e| anyhow::anyhow!("{e:#}"))
            .context("cannot start the WebAssembly engine")?;
        let limits = Limits {
            deadline: Duration::from_millis(self.deadline_ms),
            memory_bytes: self.memory_mib << 20,
            ..Limits::default()
        };
        Ok((rt, limits))
    }
}

fn main() -> ExitCode {
    let filter =
        EnvFilter::try_from_default_env().unwrap_or_else(|_| EnvFilter::new("info,cranelift=warn,wasmtime=warn"));
    tracing_subscriber::fmt().with_env_filter(filter).with_writer(std::io::stderr).init();
    match run(Cli::parse()) {
        Ok(code) => code,
        Err(e) => {
            eprintln!("error: {e:#}");
            ExitCode::from(2)
        }
    }
}

fn run(cli: Cli) -> anyhow::Result<ExitCode> {
    let world = snapshot::sample::world(2, 6, 5);
    match cli.command {
        Command::Demo(args) => {
            let (rt, limits) = args.runtime()?;
            let results = shipped::all()
                .iter()
                .map(|p| (p.name.to_string(), admission::admit(&rt, p.name, p.wasm, "{}", limits, &world)));
            let failed = print_admissions(results);
            println!("{} shipped policies, {failed} failed", shipped::all().len());
            Ok(if failed == 0 { ExitCode::SUCCESS } else { ExitCode::FAILURE })
        }
        Command::Validate { files, runtime } => {
            let (rt, limits) = runtime.runtime()?;
            let results =
                files.iter().map(|f| (f.display().to_string(), admission::admit_file(&rt, f, limits, &world)));
            let failed = print_admissions(results);
            Ok(if failed == 0 { ExitCode::SUCCESS } else { ExitCode::FAILURE })
        }
    }
}

/// One line per policy; returns how many failed.
fn print_admissions(
    results: impl Iterator<Item = (String, Result<admission::Admitted, admission::AdmissionError>)>,
) -> usize {
    let mut failed = 0;
    for (name, result) in results {
        match result {
            Ok(ok) => println!("{ok}"),
            Err(e) => {
                failed += 1;
                println!("FAILED {name}: {}", wasmsched::error_chain(&e));
            }
        }
    }
    failed
}
