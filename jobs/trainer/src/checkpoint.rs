//! The checkpoint: the weights, the epoch count and the shuffling generator's state, in a
//! small binary format, written atomically (to `PATH.tmp`, then renamed over `PATH`).
//!
//! Layout, little-endian: the magic `wstrain\0`, the format version (u32), seed (u64),
//! samples (u64), features, hidden units, classes (u32 each), epochs done (u64), generator
//! state (u64), the number of weights (u64), the weights (f32 each), and last the FNV-1a hash
//! (u64) of everything before it, so a truncated or damaged file is refused.

use std::ffi::OsString;
use std::fmt;
use std::fs;
use std::io::{self, Write};
use std::path::{Path, PathBuf};

const MAGIC: &[u8; 8] = b"wstrain\0";
const VERSION: u32 = 1;
/// Bytes before the weights: magic, version, seed, samples, three shape fields, epoch, rng
/// state and the weight count.
const HEADER: usize = 8 + 4 + 8 + 8 + 3 * 4 + 8 + 8 + 8;

/// Everything needed to continue a training run where it stopped.
#[derive(Clone, Debug, PartialEq)]
pub struct Checkpoint {
    /// The data seed of the run.
    pub seed: u64,
    /// Samples in all (training and validation).
    pub samples: u64,
    /// Features per sample.
    pub features: u32,
    /// Hidden units.
    pub hidden: u32,
    /// Classes.
    pub classes: u32,
    /// Epochs done.
    pub epoch: u64,
    /// The state of the generator that shuffles each epoch.
    pub rng_state: u64,
    /// The model's weights.
    pub params: Vec<f32>,
}

/// Why a checkpoint could not be read, used or written.
#[derive(Debug)]
pub enum CheckpointError {
    /// The file exists but could not be read.
    Read {
        /// The checkpoint.
        path: PathBuf,
        /// What the system said.
        source: io::Error,
    },
    /// The checkpoint (or its temporary file) could not be written or renamed.
    Write {
        /// The file being written.
        path: PathBuf,
        /// What the system said.
        source: io::Error,
    },
    /// The file does not start with the magic bytes.
    NotACheckpoint,
    /// A format version this build does not read.
    Version(u32),
    /// The file is shorter or longer than its header says.
    Length {
        /// Bytes the header implies.
        expected: u64,
        /// Bytes in the file.
        actual: u64,
    },
    /// The hash at the end does not match the content.
    Checksum,
    /// The checkpoint belongs to a run with other settings.
    Mismatch {
        /// The setting that differs.
        setting: &'static str,
        /// Its value in the checkpoint.
        checkpoint: u64,
        /// Its value in this run.
        requested: u64,
    },
}

impl fmt::Display for CheckpointError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Self::Read { path, source } => write!(f, "cannot read checkpoint {}: {source}", path.display()),
            Self::Write { path, source } => write!(
                f,
                "cannot write checkpoint {}: {source}; check that its directory exists and is writable",
                path.display()
            ),
            Self::NotACheckpoint => f.write_str("not a wasmsched-trainer checkpoint (wrong magic bytes)"),
            Self::Version(v) => write!(f, "checkpoint format version {v}; this build reads version {VERSION}"),
            Self::Length { expected, actual } => {
                write!(f, "truncated or padded: {actual} bytes where the header implies {expected}")
            }
            Self::Checksum => f.write_str("damaged: the checksum does not match the content"),
            Self::Mismatch { setting, checkpoint, requested } => {
                write!(f, "written by a run with {setting} {checkpoint}, this run has {setting} {requested}")
            }
        }
    }
}

impl std::error::Error for CheckpointError {}

impl Checkpoint {
    /// The file's bytes.
    pub fn encode(&self) -> Vec<u8> {
        let mut bytes = Vec::with_capacity(HEADER + 4 * self.params.len() + 8);
        bytes.extend_from_slice(MAGIC);
        bytes.extend_from_slice(&VERSION.to_le_bytes());
        for field in [self.seed, self.samples] {
            bytes.extend_from_slice(&field.to_le_bytes());
        }
        for field in [self.features, self.hidden, self.classes] {
            bytes.extend_from_slice(&field.to_le_bytes());
        }
        for field in [self.epoch, self.rng_state, self.params.len() as u64] {
            bytes.extend_from_slice(&field.to_le_bytes());
        }
        for w in &self.params {
            bytes.extend_from_slice(&w.to_le_bytes());
        }
        let hash = fnv1a(&bytes);
        bytes.extend_from_slice(&hash.to_le_bytes());
        bytes
    }

    /// Reads a checkpoint from its bytes, checking magic, version, length and hash.
    pub fn decode(bytes: &[u8]) -> Result<Self, CheckpointError> {
        if bytes.len() < MAGIC.len() || &bytes[..MAGIC.len()] != MAGIC {
            return Err(CheckpointError::NotACheckpoint);
        }
        let length_error = |expected: u64| CheckpointError::Length { expected, actual: bytes.len() as u64 };
        if bytes.len() < HEADER + 8 {
            return Err(length_error((HEADER + 8) as u64));
        }
        let mut reader = Reader { bytes, at: MAGIC.len() };
        let version = reader.u32();
        if version != VERSION {
            return Err(CheckpointError::Version(version));
        }
        let (seed, samples) = (reader.u64(), reader.u64());
        let (features, hidden, classes) = (reader.u32(), reader.u32(), reader.u32());
        let (epoch, rng_state, count) = (reader.u64(), reader.u64(), reader.u64());
        let expected = count.checked_mul(4).and_then(|w| w.checked_add(HEADER as u64 + 8));
        if expected != Some(bytes.len() as u64) {
            return Err(length_error(expected.unwrap_or(u64::MAX)));
        }
        let (content, hash) = bytes.split_at(bytes.len() - 8);
        if fnv1a(content).to_le_bytes() != hash {
            return Err(CheckpointError::Checksum);
        }
        let params = content[HEADER..].chunks_exact(4).map(|w| f32::from_le_bytes([w[0], w[1], w[2], w[3]])).collect();
        Ok(Self { seed, samples, features, hidden, classes, epoch, rng_state, params })
    }

    /// Reads the checkpoint at `path`; `Ok(None)` when there is none yet.
    pub fn load(path: &Path) -> Result<Option<Self>, CheckpointError> {
        match fs::read(path) {
            Ok(bytes) => Self::decode(&bytes).map(Some),
            Err(e) if e.kind() == io::ErrorKind::NotFound => Ok(None),
            Err(source) => Err(CheckpointError::Read { path: path.to_owned(), source }),
        }
    }

    /// Writes the checkpoint to `PATH.tmp`, flushes it to disk and renames it over `path`, so
    /// `path` always holds a whole checkpoint, the previous or this one.
    pub fn save(&self, path: &Path) -> Result<(), CheckpointError> {
        let mut tmp = OsString::from(path.as_os_str());
        tmp.push(".tmp");
        let tmp = PathBuf::from(tmp);
        let write = || -> io::Result<()> {
            let mut file = fs::File::create(&tmp)?;
            file.write_all(&self.encode())?;
            file.sync_all()
        };
        if let Err(source) = write() {
            let _ = fs::remove_file(&tmp); // best effort; the error that matters is `source`
            return Err(CheckpointError::Write { path: tmp, source });
        }
        fs::rename(&tmp, path).map_err(|source| CheckpointError::Write { path: path.to_owned(), source })
    }
}

/// Reads fixed-size little-endian fields; the caller has checked the length.
struct Reader<'a> {
    bytes: &'a [u8],
    at: usize,
}

impl Reader<'_> {
    fn take<const N: usize>(&mut self) -> [u8; N] {
        let mut field = [0; N];
        field.copy_from_slice(&self.bytes[self.at..self.at + N]);
        self.at += N;
        field
    }

    fn u32(&mut self) -> u32 {
        u32::from_le_bytes(self.take())
    }

    fn u64(&mut self) -> u64 {
        u64::from_le_bytes(self.take())
    }
}

/// The 64-bit FNV-1a hash.
pub(crate) fn fnv1a(bytes: &[u8]) -> u64 {
    bytes.iter().fold(0xCBF2_9CE4_8422_2325, |h, &b| (h ^ u64::from(b)).wrapping_mul(0x0100_0000_01B3))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn checkpoint() -> Checkpoint {
        Checkpoint {
            seed: 1,
            samples: 100,
            features: 2,
            hidden: 3,
            classes: 2,
            epoch: 7,
            rng_state: 0xDEAD_BEEF,
            params: vec![0.5, -1.25, 3.0],
        }
    }

    /// A fresh directory for one test.
    fn temp_dir(name: &str) -> PathBuf {
        let dir = std::env::temp_dir().join(format!("wasmsched-trainer-{}-{name}", std::process::id()));
        let _ = fs::remove_dir_all(&dir);
        fs::create_dir_all(&dir).expect("temp dir");
        dir
    }

    #[test]
    fn encode_then_decode_gives_the_checkpoint_back() {
        assert_eq!(Checkpoint::decode(&checkpoint().encode()).expect("decodes"), checkpoint());
    }

    #[test]
    fn a_flipped_bit_is_refused_by_the_checksum() {
        let mut bytes = checkpoint().encode();
        bytes[HEADER + 1] ^= 0x10;
        assert!(matches!(Checkpoint::decode(&bytes), Err(CheckpointError::Checksum)));
    }

    #[test]
    fn a_truncated_file_is_refused() {
        let bytes = checkpoint().encode();
        for len in [0, 5, HEADER, bytes.len() - 1] {
            let err = Checkpoint::decode(&bytes[..len]).expect_err("truncated");
            assert!(matches!(err, CheckpointError::NotACheckpoint | CheckpointError::Length { .. }), "{len}: {err}");
        }
    }

    #[test]
    fn another_file_or_version_is_refused() {
        assert!(matches!(Checkpoint::decode(b"{\"epoch\": 3}"), Err(CheckpointError::NotACheckpoint)));
        let mut bytes = checkpoint().encode();
        bytes[8] = 9;
        assert!(matches!(Checkpoint::decode(&bytes), Err(CheckpointError::Version(9))));
    }

    #[test]
    fn save_replaces_the_file_and_leaves_no_temporary() {
        let dir = temp_dir("save");
        let path = dir.join("model.ckpt");
        fs::write(&path, b"old").expect("write");
        checkpoint().save(&path).expect("saves");
        assert_eq!(Checkpoint::load(&path).expect("loads"), Some(checkpoint()));
        assert!(!dir.join("model.ckpt.tmp").exists());
        fs::remove_dir_all(dir).expect("cleanup");
    }

    #[test]
    fn a_missing_file_is_no_checkpoint_and_no_error() {
        let dir = temp_dir("missing");
        assert_eq!(Checkpoint::load(&dir.join("absent")).expect("ok"), None);
        fs::remove_dir_all(dir).expect("cleanup");
    }

    #[test]
    fn saving_into_a_missing_directory_says_where() {
        let dir = temp_dir("nodir");
        let err = checkpoint().save(&dir.join("no/such/dir/model.ckpt")).expect_err("no directory");
        assert!(err.to_string().contains("dir/model.ckpt.tmp"), "{err}");
        fs::remove_dir_all(dir).expect("cleanup");
    }
}
