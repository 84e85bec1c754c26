//! The `wasmsched-trainer` binary: parses the command line and calls [`wasmsched_trainer::run`].

use std::io;
use std::process::ExitCode;

use wasmsched_trainer::args::{self, Command, USAGE};

fn main() -> ExitCode {
    let args = match args::parse(std::env::args_os().skip(1)) {
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
    let result = wasmsched_trainer::run(&args, &mut io::stdout().lock(), &mut io::stderr().lock());
    match result {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("wasmsched-trainer: {e}");
            ExitCode::FAILURE
        }
    }
}
