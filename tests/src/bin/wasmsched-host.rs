//! `wasmsched run` and `wasmsched probe` as a binary of the tests package (`wasmsched-host run
//! --config FILE`, `wasmsched-host probe ready|live --addr ADDR`): the scale test runs the host
//! as a process of its own, as an operator does, the replicas test runs it in pods (whose exec
//! probes ask it), and cargo builds a package's binaries only for that package's tests.

use std::path::Path;
use std::process::ExitCode;

use tracing_subscriber::EnvFilter;

fn main() -> ExitCode {
    let args: Vec<String> = std::env::args().collect();
    if let [_, probe, which, flag, addr] = args.as_slice()
        && probe == "probe"
        && flag == "--addr"
    {
        use wasmsched::api::client::{self, Probe};
        let which = match which.as_str() {
            "ready" => Probe::Ready,
            "live" => Probe::Live,
            _ => {
                eprintln!("usage: wasmsched-host probe ready|live --addr ADDR");
                return ExitCode::from(2);
            }
        };
        let Ok(addr) = addr.parse::<wasmsched::api::Listen>() else { return ExitCode::from(2) };
        return match client::probe(addr, which) {
            Ok(()) => ExitCode::SUCCESS,
            Err(why) => {
                eprintln!("{why}");
                ExitCode::FAILURE
            }
        };
    }
    let [_, run, flag, path] = args.as_slice() else {
        eprintln!("usage: wasmsched-host run --config FILE");
        return ExitCode::from(2);
    };
    if run != "run" || flag != "--config" {
        eprintln!("usage: wasmsched-host run --config FILE");
        return ExitCode::from(2);
    }
    let filter = EnvFilter::try_from_default_env()
        .unwrap_or_else(|_| EnvFilter::new("info,cranelift=warn,wasmtime=warn,kube_client::client::builder=off"));
    tracing_subscriber::fmt().with_env_filter(filter).with_writer(std::io::stderr).init();
    match wasmsched::run::run_file(Path::new(path), |addr| println!("control API on http://{addr}")) {
        Ok(_) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("error: {e:#}");
            ExitCode::FAILURE
        }
    }
}
