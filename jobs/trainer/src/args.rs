//! The command line, parsed by hand (the trainer keeps its dependencies to the one it needs).

use std::ffi::OsString;
use std::fmt;
use std::path::PathBuf;

/// The usage text, printed by `--help`.
pub const USAGE: &str = "\
wasmsched-trainer: trains a small MLP on generated data and prints one line per epoch.

Usage: wasmsched-trainer [OPTIONS]
       wasmsched-trainer export CHECKPOINT DESTINATION

`export` delivers the model: it checks the checkpoint whole and writes a copy to DESTINATION
(atomically), so a deployment never reads a half-written model.

Options:
  --epochs N           epochs to reach, counting those of a resumed checkpoint [default: 30]
  --samples N          generated samples, a fifth of them for validation [default: 40000]
  --hidden N           hidden units of the MLP [default: 512]
  --threads N          threads computing each minibatch's gradient, 1 to 64 [default: 2]
  --batch-size N       samples per minibatch, 1 to 65536; without it, the environment
                       variable WASMSCHED_BATCH_SIZE (the host sets it when it resizes an
                       elastic job) [default: 64]
  --seed N             seed of the data, the initial weights and the shuffling [default: 1]
  --lr RATE            learning rate of the first epoch; it halves by epoch 10; 0 leaves the
                       model as initialised, a job whose curve is flat [default: 0.05]
  --format FORMAT      json: {\"epoch\":3,\"accuracy\":0.8123,\"loss\":0.4567,\"time_s\":1.234}
                       flowcon: Loss: 0.4567 Time: 1.234 [default: json]
  --checkpoint PATH    save the model after every epoch (atomically, via PATH.tmp) and resume
                       from PATH when it holds a checkpoint of a run with the same settings
  -h, --help           print this help

On SIGTERM or SIGINT it finishes the epoch under way (saving and printing it) and exits with
status 143. Epoch lines go to stdout, everything else to stderr. Accuracy and loss are measured on the
validation set; time_s is the wall time of the epoch. The defaults take about one second of
one core per epoch.
";

/// How epoch lines are written.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Format {
    /// `{"epoch":3,"accuracy":0.8123,"loss":0.4567,"time_s":1.234}`
    Json,
    /// `Loss: 0.4567 Time: 1.234`, the format FlowCon's jobs printed.
    Flowcon,
}

/// A training run's settings.
#[derive(Clone, Debug, PartialEq)]
pub struct Args {
    /// Epochs to reach (a resumed run counts those already done).
    pub epochs: u64,
    /// Samples generated, training and validation.
    pub samples: usize,
    /// Hidden units.
    pub hidden: usize,
    /// Threads per minibatch.
    pub threads: usize,
    /// Samples per minibatch; None: [`BATCH_SIZE_VAR`], else [`crate::model::BATCH`]
    /// ([`Args::batch_size`]).
    pub batch_size: Option<usize>,
    /// Seed of data, initial weights and shuffling.
    pub seed: u64,
    /// Learning rate of the first epoch.
    pub lr: f32,
    /// Format of the epoch lines.
    pub format: Format,
    /// Where to save and resume, if anywhere.
    pub checkpoint: Option<PathBuf>,
}

impl Default for Args {
    fn default() -> Self {
        Self {
            epochs: 30,
            samples: 40_000,
            hidden: 512,
            threads: 2,
            batch_size: None,
            seed: 1,
            lr: crate::train::LEARNING_RATE,
            format: Format::Json,
            checkpoint: None,
        }
    }
}

/// What the command line asks for.
#[derive(Clone, Debug, PartialEq)]
pub enum Command {
    /// Train with these settings.
    Train(Args),
    /// Print [`USAGE`].
    Help,
    /// Deliver the model: copy a whole checkpoint to a destination.
    Export {
        /// The checkpoint to deliver.
        from: PathBuf,
        /// Where the delivered model goes.
        to: PathBuf,
    },
}

/// Why the command line was refused.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum ArgsError {
    /// An option this program does not know.
    UnknownOption(String),
    /// A word that is not an option.
    Unexpected(String),
    /// An option given without its value.
    MissingValue(&'static str),
    /// An option given twice.
    Repeated(&'static str),
    /// A value that is not what the option takes.
    InvalidValue {
        /// The option.
        option: &'static str,
        /// What was given.
        value: String,
        /// What it takes.
        expected: String,
    },
}

impl fmt::Display for ArgsError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Self::UnknownOption(option) => write!(f, "unknown option {option}"),
            Self::Unexpected(word) => write!(f, "unexpected argument {word:?}; every setting is an --option"),
            Self::MissingValue(option) => write!(f, "{option} needs a value"),
            Self::Repeated(option) => write!(f, "{option} is given twice"),
            Self::InvalidValue { option, value, expected } => {
                write!(f, "{option} {value:?} is not valid: expected {expected}")
            }
        }
    }
}

impl std::error::Error for ArgsError {}

/// The options that take a value.
const OPTIONS: [&str; 9] =
    ["--epochs", "--samples", "--hidden", "--threads", "--batch-size", "--seed", "--lr", "--format", "--checkpoint"];

/// The environment variable a batch size comes from when `--batch-size` is not given: the host
/// sets it on a job it resizes, with the batch size the policy chose.
pub const BATCH_SIZE_VAR: &str = "WASMSCHED_BATCH_SIZE";

/// The largest batch size taken.
const MAX_BATCH: u64 = 65_536;

impl Args {
    /// Samples per minibatch as settled: `--batch-size` (which the binary sets from
    /// [`Args::batch_size`] before it trains), else [`crate::model::BATCH`].
    pub fn batch(&self) -> usize {
        self.batch_size.unwrap_or(crate::model::BATCH)
    }

    /// Samples per minibatch: `--batch-size`, else [`BATCH_SIZE_VAR`] as `from_env` gives it
    /// (unset or empty: not given), else [`crate::model::BATCH`]. A value in the environment
    /// that is not a batch size is refused, as the option would be.
    pub fn batch_size(&self, from_env: Option<OsString>) -> Result<usize, ArgsError> {
        match from_env.filter(|v| !v.is_empty() && self.batch_size.is_none()) {
            Some(value) => Ok(number(BATCH_SIZE_VAR, &value.to_string_lossy(), 1, MAX_BATCH)? as usize),
            None => Ok(self.batch()),
        }
    }
}

/// Parses the arguments after the program name.
pub fn parse(args: impl IntoIterator<Item = OsString>) -> Result<Command, ArgsError> {
    let mut parsed = Args::default();
    let mut seen = [false; OPTIONS.len()];
    let mut args = args.into_iter().peekable();
    if args.peek().is_some_and(|a| a == "export") {
        let words: Vec<OsString> = args.skip(1).collect();
        return match <[OsString; 2]>::try_from(words) {
            Ok([from, to]) => Ok(Command::Export { from: from.into(), to: to.into() }),
            Err(_) => Err(ArgsError::Unexpected("export takes two paths: CHECKPOINT DESTINATION".into())),
        };
    }
    while let Some(arg) = args.next() {
        let text = arg.to_string_lossy().into_owned();
        if text == "-h" || text == "--help" {
            return Ok(Command::Help);
        }
        if !text.starts_with("--") {
            return Err(ArgsError::Unexpected(text));
        }
        let (name, inline) = match text.split_once('=') {
            Some((name, value)) => (name.to_owned(), Some(value.to_owned())),
            None => (text.clone(), None),
        };
        let index = OPTIONS.iter().position(|o| *o == name).ok_or(ArgsError::UnknownOption(name))?;
        let option = OPTIONS[index];
        if std::mem::replace(&mut seen[index], true) {
            return Err(ArgsError::Repeated(option));
        }
        // The path keeps its bytes; the other values are text.
        let raw = match inline {
            Some(value) => OsString::from(value),
            None => args.next().ok_or(ArgsError::MissingValue(option))?,
        };
        let value = raw.to_string_lossy().into_owned();
        match option {
            "--epochs" => parsed.epochs = number(option, &value, 0, u64::MAX)?,
            "--samples" => parsed.samples = number(option, &value, 100, 10_000_000)? as usize,
            "--hidden" => parsed.hidden = number(option, &value, 1, 65_536)? as usize,
            "--threads" => parsed.threads = number(option, &value, 1, 64)? as usize,
            "--batch-size" => parsed.batch_size = Some(number(option, &value, 1, MAX_BATCH)? as usize),
            "--seed" => parsed.seed = number(option, &value, 0, u64::MAX)?,
            "--lr" => {
                parsed.lr = match value.parse::<f32>() {
                    Ok(lr) if lr.is_finite() && (0.0..=10.0).contains(&lr) => lr,
                    _ => {
                        let expected = "a number from 0 to 10, e.g. 0.05".to_owned();
                        return Err(ArgsError::InvalidValue { option, value, expected });
                    }
                }
            }
            "--format" => {
                parsed.format = match value.as_str() {
                    "json" => Format::Json,
                    "flowcon" => Format::Flowcon,
                    _ => return Err(ArgsError::InvalidValue { option, value, expected: "json or flowcon".to_owned() }),
                }
            }
            _ => {
                if raw.is_empty() {
                    return Err(ArgsError::MissingValue(option));
                }
                parsed.checkpoint = Some(PathBuf::from(raw));
            }
        }
    }
    Ok(Command::Train(parsed))
}

/// `value` as a whole number in `min..=max`.
fn number(option: &'static str, value: &str, min: u64, max: u64) -> Result<u64, ArgsError> {
    match value.parse::<u64>() {
        Ok(n) if (min..=max).contains(&n) => Ok(n),
        _ => Err(ArgsError::InvalidValue {
            option,
            value: value.to_owned(),
            expected: if max == u64::MAX {
                "a whole number".to_owned()
            } else {
                format!("a whole number from {min} to {max}")
            },
        }),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn parse_words(words: &[&str]) -> Result<Command, ArgsError> {
        parse(words.iter().map(OsString::from))
    }

    #[test]
    fn no_arguments_give_the_defaults() {
        assert_eq!(parse_words(&[]), Ok(Command::Train(Args::default())));
    }

    #[test]
    fn every_option_is_read_with_a_space_or_an_equals_sign() {
        let command = parse_words(&[
            "--epochs",
            "5",
            "--samples=2000",
            "--hidden",
            "16",
            "--threads=3",
            "--batch-size",
            "256",
            "--seed",
            "9",
            "--lr=0",
            "--format",
            "flowcon",
            "--checkpoint=/ckpt/model",
        ]);
        let expected = Args {
            epochs: 5,
            samples: 2000,
            hidden: 16,
            threads: 3,
            batch_size: Some(256),
            seed: 9,
            lr: 0.0,
            format: Format::Flowcon,
            checkpoint: Some(PathBuf::from("/ckpt/model")),
        };
        assert_eq!(command, Ok(Command::Train(expected)));
    }

    #[test]
    fn the_batch_size_comes_from_the_option_else_the_environment_else_the_default() {
        let given = Args { batch_size: Some(32), ..Args::default() };
        assert_eq!(given.batch_size(Some("256".into())), Ok(32), "the option wins");
        let unset = Args::default();
        assert_eq!(unset.batch_size(Some("256".into())), Ok(256));
        assert_eq!(unset.batch_size(None), Ok(crate::model::BATCH));
        assert_eq!(unset.batch_size(Some("".into())), Ok(crate::model::BATCH), "empty is unset");
        for bad in ["0", "big", "70000"] {
            let err = unset.batch_size(Some(bad.into())).expect_err("refused");
            assert!(err.to_string().contains("WASMSCHED_BATCH_SIZE"), "{bad}: {err}");
        }
    }

    #[test]
    fn export_takes_two_paths() {
        let to = Command::Export { from: "/ckpt/model".into(), to: "/out/model".into() };
        assert_eq!(parse_words(&["export", "/ckpt/model", "/out/model"]), Ok(to));
        assert!(parse_words(&["export", "/ckpt/model"]).is_err());
    }

    #[test]
    fn help_wins_over_everything_after_it() {
        assert_eq!(parse_words(&["--help", "--bogus"]), Ok(Command::Help));
        assert_eq!(parse_words(&["-h"]), Ok(Command::Help));
    }

    #[test]
    fn bad_arguments_are_refused_with_a_reason() {
        let cases: [(&[&str], &str); 12] = [
            (&["--epoch", "3"], "unknown option --epoch"),
            (&["30"], "unexpected argument \"30\""),
            (&["--epochs"], "--epochs needs a value"),
            (&["--epochs", "-1"], "--epochs \"-1\" is not valid: expected a whole number"),
            (&["--threads", "0"], "expected a whole number from 1 to 64"),
            (&["--threads", "two"], "--threads \"two\" is not valid"),
            (&["--samples", "10"], "expected a whole number from 100 to 10000000"),
            (&["--batch-size", "0"], "expected a whole number from 1 to 65536"),
            (&["--format", "csv"], "expected json or flowcon"),
            (&["--lr", "-0.1"], "expected a number from 0 to 10"),
            (&["--lr", "fast"], "expected a number from 0 to 10"),
            (&["--seed", "1", "--seed=2"], "--seed is given twice"),
        ];
        for (words, message) in cases {
            let err = parse_words(words).expect_err("refused");
            assert!(err.to_string().contains(message), "{words:?}: {err}");
        }
    }
}
