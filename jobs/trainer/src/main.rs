//! The `wasmsched-trainer` binary: parses the command line and calls [`wasmsched_trainer::run`].

use std::io;
use std::process::ExitCode;
use std::sync::Arc;
use std::sync::atomic::AtomicBool;

use wasmsched_trainer::Ended;
use wasmsched_trainer::args::{self, Command, USAGE};

/// The exit status after a stop asked for: a process ended by SIGTERM, as shells count it.
const STOPPED: u8 = 128 + 15;

fn main() -> ExitCode {
    let mut args = match args::parse(std::env::args_os().skip(1)) {
        Ok(Command::Train(args)) => args,
        Ok(Command::Help) => {
            print!("{USAGE}");
            return ExitCode::SUCCESS;
        }
        Ok(Command::Export { from, to }) => {
            return match wasmsched_trainer::export(&from, &to) {
                Ok(()) => {
                    eprintln!("wasmsched-trainer: delivered {} to {}", from.display(), to.display());
                    ExitCode::SUCCESS
                }
                Err(e) => {
                    eprintln!("wasmsched-trainer: cannot deliver: {e}");
                    ExitCode::FAILURE
                }
            };
        }
        Err(e) => {
            eprintln!("wasmsched-trainer: {e}\nRun `wasmsched-trainer --help` for the options.");
            return ExitCode::from(2);
        }
    };
    match args.batch_size(std::env::var_os(args::BATCH_SIZE_VAR)) {
        Ok(batch) => args.batch_size = Some(batch),
        Err(e) => {
            eprintln!("wasmsched-trainer: {e}\nSet it to a whole number of samples, or unset it for the default.");
            return ExitCode::from(2);
        }
    }
    match args.rank_and_world_size(std::env::var_os) {
        Ok((rank, world)) => (args.rank, args.world_size) = (Some(rank), Some(world)),
        Err(e) => {
            eprintln!(
                "wasmsched-trainer: {e}\nGive a rank from 0 to the world size less one, or unset them for one rank."
            );
            return ExitCode::from(2);
        }
    }
    match args.rendezvous_dir() {
        Ok(dir) => args.rendezvous = dir,
        Err(e) => {
            eprintln!("wasmsched-trainer: {e}");
            return ExitCode::from(2);
        }
    }
    let stop = Arc::new(AtomicBool::new(false));
    for signal in [signal_hook::consts::SIGTERM, signal_hook::consts::SIGINT] {
        if let Err(e) = signal_hook::flag::register(signal, stop.clone()) {
            eprintln!("wasmsched-trainer: cannot catch signal {signal} ({e}); a stop will end the epoch under way");
        }
    }
    let result = wasmsched_trainer::run(&args, &mut io::stdout().lock(), &mut io::stderr().lock(), &stop);
    match result {
        Ok(Ended::Trained) => ExitCode::SUCCESS,
        Ok(Ended::Stopped(_)) => ExitCode::from(STOPPED),
        Err(e) => {
            eprintln!("wasmsched-trainer: {e}");
            ExitCode::FAILURE
        }
    }
}
