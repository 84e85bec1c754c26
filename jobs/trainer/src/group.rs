//! Training as a group of ranks (data-parallel, by model averaging): after each epoch every
//! rank writes its weights to a folder they all reach, waits for the others' and takes the
//! mean of all of them, so every rank goes on from the same model.
//!
//! The folder `DIR/epoch-<E>-of-<N>` holds one file per rank, `rank-<R>`, written atomically
//! (to `rank-<R>.tmp`, then renamed). Layout, little-endian: the magic `wsrank\0\0`, the format
//! version (u32), the run's seed and samples (u64 each), the epoch (u64), the world size and the
//! rank (u32 each), the number of weights (u64), the weights (f32 each), and last the FNV-1a
//! hash (u64) of everything before it. A file that does not match what this rank expects (a
//! damaged one, or one of another run) counts as not there yet: the rank it belongs to replaces
//! it when it arrives.

use std::fmt;
use std::fs;
use std::io::{self, Write};
use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, Ordering};
use std::thread;
use std::time::{Duration, Instant};

use crate::checkpoint::fnv1a;

const MAGIC: &[u8; 8] = b"wsrank\0\0";
const VERSION: u32 = 1;
/// Bytes before the weights: magic, version, seed, samples, epoch, world size, rank and the
/// weight count.
const HEADER: usize = 8 + 4 + 8 + 8 + 8 + 4 + 4 + 8;

/// How a rank waits for the others.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Timing {
    /// How often it looks for the files of the ranks still missing.
    pub poll: Duration,
    /// How long it still waits once asked to stop: the others are stopped at the same moment
    /// and finish their epoch too.
    pub grace: Duration,
    /// After how long without a stop it says (once) which ranks are missing.
    pub report_after: Duration,
}

impl Default for Timing {
    fn default() -> Self {
        Self { poll: Duration::from_millis(20), grace: Duration::from_secs(5), report_after: Duration::from_secs(30) }
    }
}

/// One rank's place in a group, and where the group meets.
#[derive(Clone, Debug, PartialEq)]
pub struct Group {
    /// This rank, from 0.
    pub rank: usize,
    /// Ranks in the group, more than one.
    pub world: usize,
    /// The folder every rank reaches.
    pub dir: PathBuf,
    /// The run's data seed, written in every file and checked on reading.
    pub seed: u64,
    /// The run's samples, written in every file and checked on reading.
    pub samples: u64,
    /// How it waits.
    pub timing: Timing,
}

/// Why a rank could not take part in the group's meeting.
#[derive(Debug)]
pub struct RendezvousError {
    /// The file or folder being written.
    pub path: PathBuf,
    /// What the system said.
    pub source: io::Error,
}

impl fmt::Display for RendezvousError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "cannot write {} for the other ranks: {}; check that the rendezvous folder is writable",
            self.path.display(),
            self.source
        )
    }
}

impl std::error::Error for RendezvousError {}

/// A rank's file, as a rank waiting for it sees it.
enum Arrival {
    /// Its weights.
    Here(Vec<f32>),
    /// No file yet.
    Missing,
    /// A file that cannot be used (why): damaged, or of another run or epoch.
    Unusable(String),
}

impl Group {
    /// The folder of `epoch`'s meeting.
    pub fn epoch_dir(&self, epoch: u64) -> PathBuf {
        self.dir.join(format!("epoch-{epoch}-of-{}", self.world))
    }

    /// Where `rank` leaves its weights after `epoch`.
    pub fn file(&self, epoch: u64, rank: usize) -> PathBuf {
        self.epoch_dir(epoch).join(format!("rank-{rank}"))
    }

    /// Leaves `params`, this rank's weights after `epoch`, for the others; waits until every
    /// rank's are there (without a stop, as long as it takes) and gives their element-wise
    /// mean, the same on every rank. Once `stop` is set it waits [`Timing::grace`] more, then
    /// gives up: `Ok(None)`, the epoch abandoned.
    ///
    /// A file already there from an earlier incarnation of the job, for the same epoch and
    /// world size, is taken as it is: that rank trained it from the same checkpoint on the
    /// same shard, in the same order, so it holds what the rank would write again (up to the
    /// order of floating-point sums, when it ran on other threads or at another batch size
    /// after a resize, which is as good a contribution to the mean).
    pub fn average(
        &self,
        epoch: u64,
        params: &[f32],
        stop: &AtomicBool,
        log: &mut dyn Write,
    ) -> Result<Option<Vec<f32>>, RendezvousError> {
        self.leave(epoch, params)?;
        let started = Instant::now();
        let (mut stopped_at, mut reported) = (None, false);
        let mut arrived: Vec<Option<Vec<f32>>> = (0..self.world).map(|_| None).collect();
        arrived[self.rank] = Some(params.to_vec());
        loop {
            let mut unusable = Vec::new();
            for (rank, slot) in arrived.iter_mut().enumerate().filter(|(_, slot)| slot.is_none()) {
                match self.read(epoch, rank, params.len()) {
                    Arrival::Here(weights) => *slot = Some(weights),
                    Arrival::Missing => {}
                    Arrival::Unusable(why) => unusable.push(format!("rank {rank}: {why}")),
                }
            }
            let missing: Vec<usize> = (0..self.world).filter(|&r| arrived[r].is_none()).collect();
            if missing.is_empty() {
                return Ok(Some(mean(arrived.into_iter().flatten(), params.len())));
            }
            if stop.load(Ordering::Relaxed) {
                let since = *stopped_at.get_or_insert_with(Instant::now);
                if since.elapsed() >= self.timing.grace {
                    return Ok(None);
                }
            } else if !reported && started.elapsed() >= self.timing.report_after {
                reported = true;
                let waited = started.elapsed().as_secs();
                let _ = writeln!(
                    log,
                    "epoch {epoch}: still waiting after {waited} s for ranks {missing:?} of {} in {}{}",
                    self.world,
                    self.epoch_dir(epoch).display(),
                    if unusable.is_empty() { String::new() } else { format!(" ({})", unusable.join("; ")) },
                );
            }
            thread::sleep(self.timing.poll);
        }
    }

    /// Removes the meetings of epochs two or more before `epoch`, of any world size; best
    /// effort (a folder that cannot be removed is left). Every rank has read them: it wrote
    /// its file for the epoch before `epoch` only after.
    pub fn clean(&self, epoch: u64) {
        let Ok(entries) = fs::read_dir(&self.dir) else { return };
        for entry in entries.flatten() {
            let name = entry.file_name();
            let old = meeting_epoch(&name.to_string_lossy()).is_some_and(|e| e.saturating_add(2) <= epoch);
            if old {
                let _ = fs::remove_dir_all(entry.path());
            }
        }
    }

    /// Writes this rank's file for `epoch` atomically: to `rank-<R>.tmp`, then renamed.
    fn leave(&self, epoch: u64, params: &[f32]) -> Result<(), RendezvousError> {
        let dir = self.epoch_dir(epoch);
        fs::create_dir_all(&dir).map_err(|source| RendezvousError { path: dir, source })?;
        let path = self.file(epoch, self.rank);
        let tmp = path.with_extension("tmp");
        let write = || -> io::Result<()> {
            let mut file = fs::File::create(&tmp)?;
            file.write_all(&self.encode(epoch, self.rank, params))?;
            file.sync_all()
        };
        if let Err(source) = write() {
            let _ = fs::remove_file(&tmp); // best effort; the error that matters is `source`
            return Err(RendezvousError { path: tmp, source });
        }
        fs::rename(&tmp, &path).map_err(|source| RendezvousError { path, source })
    }

    /// `rank`'s file for `epoch`, if it is there and fits: this run, `count` weights.
    fn read(&self, epoch: u64, rank: usize, count: usize) -> Arrival {
        match fs::read(self.file(epoch, rank)) {
            Ok(bytes) => self.decode(&bytes, epoch, rank, count).map_or_else(Arrival::Unusable, Arrival::Here),
            Err(e) if e.kind() == io::ErrorKind::NotFound => Arrival::Missing,
            Err(e) => Arrival::Unusable(format!("cannot read it: {e}")),
        }
    }

    /// The bytes of `rank`'s file for `epoch`.
    fn encode(&self, epoch: u64, rank: usize, params: &[f32]) -> Vec<u8> {
        let mut bytes = Vec::with_capacity(HEADER + 4 * params.len() + 8);
        bytes.extend_from_slice(MAGIC);
        bytes.extend_from_slice(&VERSION.to_le_bytes());
        for field in [self.seed, self.samples, epoch] {
            bytes.extend_from_slice(&field.to_le_bytes());
        }
        for field in [self.world as u32, rank as u32] {
            bytes.extend_from_slice(&field.to_le_bytes());
        }
        bytes.extend_from_slice(&(params.len() as u64).to_le_bytes());
        for w in params {
            bytes.extend_from_slice(&w.to_le_bytes());
        }
        let hash = fnv1a(&bytes);
        bytes.extend_from_slice(&hash.to_le_bytes());
        bytes
    }

    /// The weights in `bytes`, or why they are not those of `rank` after `epoch` of this run.
    fn decode(&self, bytes: &[u8], epoch: u64, rank: usize, count: usize) -> Result<Vec<f32>, String> {
        let expected = self.encode(epoch, rank, &[]);
        let header = &expected[..HEADER - 8];
        if bytes.len() != HEADER + 4 * count + 8 {
            return Err(format!("{} bytes where {count} weights take {}", bytes.len(), HEADER + 4 * count + 8));
        }
        if bytes[..MAGIC.len()] != *MAGIC {
            return Err("not a rank's weights (wrong magic bytes)".to_owned());
        }
        if bytes[..header.len()] != *header || bytes[header.len()..HEADER] != (count as u64).to_le_bytes() {
            return Err("written by another run, epoch, world size or format version".to_owned());
        }
        let (content, hash) = bytes.split_at(bytes.len() - 8);
        if fnv1a(content).to_le_bytes() != hash {
            return Err("damaged: the checksum does not match the content".to_owned());
        }
        Ok(content[HEADER..].chunks_exact(4).map(|w| f32::from_le_bytes([w[0], w[1], w[2], w[3]])).collect())
    }
}

/// The epoch of a meeting folder's name, `epoch-<E>-of-<N>`.
fn meeting_epoch(name: &str) -> Option<u64> {
    let (epoch, world) = name.strip_prefix("epoch-")?.split_once("-of-")?;
    world.parse::<u64>().ok()?;
    epoch.parse().ok()
}

/// The element-wise mean of `models`, each of `count` weights, summed in rank order (so every
/// rank computes the same bits).
fn mean(models: impl Iterator<Item = Vec<f32>>, count: usize) -> Vec<f32> {
    let mut sum = vec![0.0f64; count];
    let mut n = 0usize;
    for model in models {
        for (s, w) in sum.iter_mut().zip(model) {
            *s += f64::from(w);
        }
        n += 1;
    }
    sum.into_iter().map(|s| (s / n.max(1) as f64) as f32).collect()
}

#[cfg(test)]
mod tests {
    use std::path::Path;

    use super::*;

    /// A fresh directory for one test.
    fn temp_dir(name: &str) -> PathBuf {
        let dir = std::env::temp_dir().join(format!("wasmsched-trainer-group-{}-{name}", std::process::id()));
        let _ = fs::remove_dir_all(&dir);
        fs::create_dir_all(&dir).expect("temp dir");
        dir
    }

    fn group(dir: &Path, rank: usize, world: usize) -> Group {
        let timing =
            Timing { poll: Duration::from_millis(5), grace: Duration::from_millis(100), report_after: Duration::ZERO };
        Group { rank, world, dir: dir.to_owned(), seed: 7, samples: 100, timing }
    }

    #[test]
    fn every_rank_gets_the_mean_of_all() {
        let dir = temp_dir("mean");
        let never = AtomicBool::new(false);
        let params = [[1.0, -2.0, 0.5], [3.0, 2.0, 0.25], [2.0, 0.0, 0.0]];
        let means: Vec<Vec<f32>> = thread::scope(|s| {
            let handles: Vec<_> = (0..3)
                .map(|rank| {
                    let (group, params, never) = (group(&dir, rank, 3), &params[rank], &never);
                    s.spawn(move || group.average(4, params, never, &mut Vec::new()).expect("meets").expect("all"))
                })
                .collect();
            handles.into_iter().map(|h| h.join().expect("rank")).collect()
        });
        for mean in &means {
            assert_eq!(mean, &[2.0, 0.0, 0.25]);
        }
        assert!(dir.join("epoch-4-of-3/rank-2").exists() && !dir.join("epoch-4-of-3/rank-2.tmp").exists());
        fs::remove_dir_all(dir).expect("cleanup");
    }

    #[test]
    fn a_stopped_rank_gives_up_after_the_grace_and_says_who_is_missing_meanwhile() {
        let dir = temp_dir("grace");
        let (stop, mut log) = (AtomicBool::new(true), Vec::new());
        let started = Instant::now();
        assert_eq!(group(&dir, 0, 2).average(1, &[1.0], &stop, &mut log).expect("no error"), None);
        assert!(started.elapsed() >= Duration::from_millis(100), "it waited the grace");
        let never = AtomicBool::new(false);
        let waiting = thread::scope(|s| {
            let waiter = s.spawn(|| group(&dir, 0, 2).average(2, &[1.0], &never, &mut log).expect("meets"));
            thread::sleep(Duration::from_millis(50));
            group(&dir, 1, 2).average(2, &[3.0], &never, &mut Vec::new()).expect("meets");
            waiter.join().expect("waiter")
        });
        assert_eq!(waiting, Some(vec![2.0]));
        let log = String::from_utf8(log).expect("utf-8");
        assert!(log.contains("epoch 2: still waiting after 0 s for ranks [1] of 2"), "{log}");
        assert_eq!(log.lines().count(), 1, "said once: {log}");
        fs::remove_dir_all(dir).expect("cleanup");
    }

    #[test]
    fn a_file_of_another_run_or_shape_is_not_averaged_in() {
        let dir = temp_dir("other");
        let other = Group { seed: 8, ..group(&dir, 1, 2) };
        other.leave(1, &[9.0]).expect("written");
        let (stop, mut log) = (AtomicBool::new(true), Vec::new());
        let mine = group(&dir, 0, 2);
        assert_eq!(mine.average(1, &[1.0], &stop, &mut log).expect("no error"), None, "seed 8 is not this run");
        group(&dir, 1, 2).leave(1, &[9.0, 9.0]).expect("written");
        assert_eq!(mine.average(1, &[1.0], &stop, &mut log).expect("no error"), None, "two weights, not one");
        let mut bytes = mine.encode(1, 1, &[3.0]);
        bytes[HEADER] ^= 1;
        fs::write(mine.file(1, 1), bytes).expect("written");
        assert_eq!(mine.average(1, &[1.0], &stop, &mut log).expect("no error"), None, "damaged");
        group(&dir, 1, 2).leave(1, &[3.0]).expect("written");
        assert_eq!(mine.average(1, &[1.0], &stop, &mut log).expect("no error"), Some(vec![2.0]));
        fs::remove_dir_all(dir).expect("cleanup");
    }

    #[test]
    fn clean_removes_meetings_two_or_more_epochs_old() {
        let dir = temp_dir("clean");
        for name in ["epoch-1-of-2", "epoch-2-of-2", "epoch-3-of-2", "epoch-4-of-2", "epoch-2-of-3", "other"] {
            fs::create_dir_all(dir.join(name).join("rank-0")).expect("folder");
        }
        group(&dir, 0, 2).clean(4);
        let mut left: Vec<String> = fs::read_dir(&dir)
            .expect("dir")
            .map(|e| e.expect("entry").file_name().into_string().expect("utf-8"))
            .collect();
        left.sort();
        assert_eq!(left, ["epoch-3-of-2", "epoch-4-of-2", "other"]);
        fs::remove_dir_all(dir).expect("cleanup");
    }

    #[test]
    fn an_unwritable_folder_is_an_error_with_the_path() {
        let dir = temp_dir("unwritable");
        fs::write(dir.join("file"), b"").expect("a file where a folder should be");
        let group = Group { dir: dir.join("file"), ..group(&dir, 0, 2) };
        let err = group.average(1, &[1.0], &AtomicBool::new(false), &mut Vec::new()).expect_err("cannot write");
        assert!(err.to_string().contains("file/epoch-1-of-2"), "{err}");
        fs::remove_dir_all(dir).expect("cleanup");
    }
}
