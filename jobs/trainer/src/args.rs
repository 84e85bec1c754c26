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
  --rank R             this process's rank in a group training together, 0 to N-1; without
                       it, WASMSCHED_RANK (the host sets it), else RANK (torchrun's) [default: 0]
  --world-size N       ranks in the group, 1 to 65536; without it, WASMSCHED_WORLD_SIZE, else
                       WORLD_SIZE [default: 1]
  --rendezvous DIR     a folder every rank reaches (a shared volume), where the ranks meet after
                       each epoch; needed when N is above 1 [default: the checkpoint's folder
                       joined with `rendezvous`]
  -h, --help           print this help

As a group of N ranks (data-parallel, by model averaging) every rank draws the same shuffled
order each epoch and trains on its shard of it (positions R, R+N, R+2N, ...) with a batch of
the batch size divided by N; then it writes its weights to DIR/epoch-E-of-N/rank-R, waits for
every rank's and takes their mean, so all ranks hold the same model. Every rank prints the
epoch's line; only rank 0 saves the checkpoint, and every rank resumes from it. A stop asked
while waiting for the others waits 5 s more for them, then abandons the epoch (not printed,
not saved), which the resumed job trains again.

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
    /// This process's rank in its group; None: [`RANK_VAR`], else [`TORCHRUN_RANK_VAR`], else 0
    /// ([`Args::rank_and_world_size`]).
    pub rank: Option<usize>,
    /// Ranks in the group; None: [`WORLD_SIZE_VAR`], else [`TORCHRUN_WORLD_SIZE_VAR`], else 1
    /// ([`Args::rank_and_world_size`]).
    pub world_size: Option<usize>,
    /// The folder where the ranks of a group meet after each epoch; None: beside the checkpoint
    /// ([`Args::rendezvous_dir`]).
    pub rendezvous: Option<PathBuf>,
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
            rank: None,
            world_size: None,
            rendezvous: None,
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
    /// A group of several ranks with no folder to meet in: neither `--rendezvous` nor
    /// `--checkpoint` is given.
    NoRendezvous {
        /// Ranks in the group.
        world_size: usize,
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
            Self::NoRendezvous { world_size } => write!(
                f,
                "a group of {world_size} ranks needs a folder they all reach: give --rendezvous DIR \
                 (or --checkpoint PATH, whose folder then holds a `rendezvous` folder)"
            ),
        }
    }
}

impl std::error::Error for ArgsError {}

/// The options that take a value.
const OPTIONS: [&str; 12] = [
    "--epochs",
    "--samples",
    "--hidden",
    "--threads",
    "--batch-size",
    "--seed",
    "--lr",
    "--format",
    "--checkpoint",
    "--rank",
    "--world-size",
    "--rendezvous",
];

/// The environment variable a batch size comes from when `--batch-size` is not given: the host
/// sets it on a job it resizes, with the batch size the policy chose.
pub const BATCH_SIZE_VAR: &str = "WASMSCHED_BATCH_SIZE";

/// The largest batch size taken.
const MAX_BATCH: u64 = 65_536;

/// The environment variable a rank comes from when `--rank` is not given: the host sets it on
/// each pod of a distributed job.
pub const RANK_VAR: &str = "WASMSCHED_RANK";

/// The environment variable a world size comes from when `--world-size` is not given: the
/// host sets it on each pod of a distributed job.
pub const WORLD_SIZE_VAR: &str = "WASMSCHED_WORLD_SIZE";

/// torchrun's rank variable, read when neither `--rank` nor [`RANK_VAR`] is given.
pub const TORCHRUN_RANK_VAR: &str = "RANK";

/// torchrun's world size variable, read when neither `--world-size` nor [`WORLD_SIZE_VAR`] is
/// given.
pub const TORCHRUN_WORLD_SIZE_VAR: &str = "WORLD_SIZE";

/// The largest group taken.
const MAX_WORLD: u64 = 65_536;

/// The folder made beside the checkpoint for a group's meetings when `--rendezvous` is not
/// given.
const RENDEZVOUS_BESIDE_CHECKPOINT: &str = "rendezvous";

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

    /// This process's rank as settled: `--rank` (which the binary sets from
    /// [`Args::rank_and_world_size`] before it trains), else 0.
    pub fn rank(&self) -> usize {
        self.rank.unwrap_or(0)
    }

    /// Ranks in the group as settled: `--world-size` (which the binary sets from
    /// [`Args::rank_and_world_size`] before it trains), else 1.
    pub fn world(&self) -> usize {
        self.world_size.unwrap_or(1)
    }

    /// Rank and world size: each from its option, else from the environment as `env` gives it
    /// (the `WASMSCHED_` variable, else torchrun's; unset or empty: not given), else rank 0 of
    /// a world of 1. A value in the environment that is not a rank or a world size is refused,
    /// as the option would be, and so is a rank that is not below the world size.
    pub fn rank_and_world_size(
        &self,
        env: impl Fn(&'static str) -> Option<OsString>,
    ) -> Result<(usize, usize), ArgsError> {
        let world = match (self.world_size, from_env(&env, [WORLD_SIZE_VAR, TORCHRUN_WORLD_SIZE_VAR])) {
            (Some(world), _) => world,
            (None, Some((var, value))) => number(var, &value, 1, MAX_WORLD)? as usize,
            (None, None) => 1,
        };
        let (source, rank) = match (self.rank, from_env(&env, [RANK_VAR, TORCHRUN_RANK_VAR])) {
            (Some(rank), _) => ("--rank", rank),
            (None, Some((var, value))) => (var, number(var, &value, 0, u64::MAX)? as usize),
            (None, None) => ("--rank", 0),
        };
        if rank >= world {
            let expected = format!("a whole number from 0 to {} (below the world size {world})", world - 1);
            return Err(ArgsError::InvalidValue { option: source, value: rank.to_string(), expected });
        }
        Ok((rank, world))
    }

    /// The folder where the ranks meet, for a group of more than one rank (None for one):
    /// `--rendezvous`, else the checkpoint's folder joined with `rendezvous`; refused when
    /// there is neither. Reads the world size as settled ([`Args::world`]).
    pub fn rendezvous_dir(&self) -> Result<Option<PathBuf>, ArgsError> {
        if self.world() == 1 {
            return Ok(None);
        }
        let beside_checkpoint = || {
            let folder = self.checkpoint.as_deref()?.parent()?;
            Some(folder.join(RENDEZVOUS_BESIDE_CHECKPOINT))
        };
        match self.rendezvous.clone().or_else(beside_checkpoint) {
            Some(dir) => Ok(Some(dir)),
            None => Err(ArgsError::NoRendezvous { world_size: self.world() }),
        }
    }
}

/// The first of `vars` that `env` gives a value that is not empty, with its name.
fn from_env<const N: usize>(
    env: &impl Fn(&'static str) -> Option<OsString>,
    vars: [&'static str; N],
) -> Option<(&'static str, String)> {
    vars.into_iter().find_map(|var| {
        let value = env(var).filter(|v| !v.is_empty())?;
        Some((var, value.to_string_lossy().into_owned()))
    })
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
            "--rank" => parsed.rank = Some(number(option, &value, 0, MAX_WORLD - 1)? as usize),
            "--world-size" => parsed.world_size = Some(number(option, &value, 1, MAX_WORLD)? as usize),
            _ => {
                if raw.is_empty() {
                    return Err(ArgsError::MissingValue(option));
                }
                let path = Some(PathBuf::from(raw));
                if option == "--rendezvous" { parsed.rendezvous = path } else { parsed.checkpoint = path }
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
            "--rank",
            "2",
            "--world-size=4",
            "--rendezvous",
            "/shared/meet",
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
            rank: Some(2),
            world_size: Some(4),
            rendezvous: Some(PathBuf::from("/shared/meet")),
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

    /// An environment holding `vars`.
    fn env(vars: &[(&'static str, &'static str)]) -> impl Fn(&'static str) -> Option<OsString> {
        let vars = vars.to_vec();
        move |name| vars.iter().find(|(var, _)| *var == name).map(|(_, value)| value.into())
    }

    #[test]
    fn rank_and_world_size_come_from_the_options_else_wasmsched_else_torchrun_else_rank_0_of_1() {
        let unset = Args::default();
        assert_eq!(unset.rank_and_world_size(env(&[])), Ok((0, 1)));
        let torchrun = env(&[("RANK", "1"), ("WORLD_SIZE", "3")]);
        assert_eq!(unset.rank_and_world_size(&torchrun), Ok((1, 3)));
        let both = env(&[("RANK", "1"), ("WORLD_SIZE", "3"), ("WASMSCHED_RANK", "2"), ("WASMSCHED_WORLD_SIZE", "4")]);
        assert_eq!(unset.rank_and_world_size(&both), Ok((2, 4)), "the host's variables win over torchrun's");
        let given = Args { rank: Some(0), world_size: Some(2), ..Args::default() };
        assert_eq!(given.rank_and_world_size(&both), Ok((0, 2)), "the options win");
        let empty = env(&[("WASMSCHED_RANK", ""), ("WASMSCHED_WORLD_SIZE", ""), ("RANK", "1"), ("WORLD_SIZE", "2")]);
        assert_eq!(unset.rank_and_world_size(empty), Ok((1, 2)), "empty is unset");
        assert_eq!(Args { world_size: Some(5), ..Args::default() }.rank_and_world_size(&torchrun), Ok((1, 5)));
    }

    #[test]
    fn a_rank_or_world_size_that_is_not_one_is_refused_with_where_it_came_from() {
        let unset = Args::default();
        let cases: [(&[(&'static str, &'static str)], &str); 5] = [
            (
                &[("WASMSCHED_WORLD_SIZE", "0")],
                "WASMSCHED_WORLD_SIZE \"0\" is not valid: expected a whole number from 1",
            ),
            (&[("WORLD_SIZE", "two")], "WORLD_SIZE \"two\" is not valid"),
            (&[("WASMSCHED_RANK", "-1")], "WASMSCHED_RANK \"-1\" is not valid"),
            (&[("RANK", "1")], "RANK \"1\" is not valid: expected a whole number from 0 to 0 (below the world size 1)"),
            (&[("WASMSCHED_RANK", "4"), ("WASMSCHED_WORLD_SIZE", "4")], "from 0 to 3 (below the world size 4)"),
        ];
        for (vars, message) in cases {
            let err = unset.rank_and_world_size(env(vars)).expect_err("refused");
            assert!(err.to_string().contains(message), "{vars:?}: {err}");
        }
        let err = Args { rank: Some(2), world_size: Some(2), ..Args::default() }.rank_and_world_size(env(&[]));
        assert!(err.expect_err("refused").to_string().contains("--rank \"2\" is not valid"));
    }

    #[test]
    fn a_group_meets_in_the_rendezvous_folder_else_beside_the_checkpoint_and_one_rank_needs_none() {
        assert_eq!(Args::default().rendezvous_dir(), Ok(None));
        let pair = Args { rank: Some(1), world_size: Some(2), ..Args::default() };
        let err = pair.rendezvous_dir().expect_err("nowhere to meet");
        assert!(err.to_string().contains("give --rendezvous DIR"), "{err}");
        let beside = Args { checkpoint: Some("/ckpt/model".into()), ..pair.clone() };
        assert_eq!(beside.rendezvous_dir(), Ok(Some(PathBuf::from("/ckpt/rendezvous"))));
        let given = Args { rendezvous: Some("/shared/meet".into()), ..beside };
        assert_eq!(given.rendezvous_dir(), Ok(Some(PathBuf::from("/shared/meet"))));
    }

    #[test]
    fn bad_group_options_are_refused_with_a_reason() {
        let cases: [(&[&str], &str); 4] = [
            (&["--world-size", "0"], "expected a whole number from 1 to 65536"),
            (&["--rank", "x"], "--rank \"x\" is not valid"),
            (&["--rendezvous="], "--rendezvous needs a value"),
            (&["--rank", "0", "--rank", "1"], "--rank is given twice"),
        ];
        for (words, message) in cases {
            let err = parse_words(words).expect_err("refused");
            assert!(err.to_string().contains(message), "{words:?}: {err}");
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
