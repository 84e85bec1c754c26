//! Hot reload of the policies directory.
//!
//! A debounced watcher ([`watch`]) on the directory, never the file, turns changes into policy
//! names: `NAME.wasm` or the `NAME.toml` beside it, created (cargo replaces its output by a
//! hard link), written, renamed into place or deleted; hidden files and editors' temporaries
//! (`.NAME.wasm.swp`, `NAME.wasm~`) are ignored. A worker ([`work`]) takes each name off to
//! the side of the loop: it reads the file, merges its config, and runs it through
//! [`admission`] — the right contract and version, `init`, and a dry-run `decide` on the
//! latest snapshot within the deadline. A half-written file is never loaded: the debounce
//! waits until the file is quiet, and admission refuses a truncated component. What passes
//! becomes a [`Change`] that the host swaps in at a tick boundary, carrying the old version's
//! saved state; what fails is refused with a log line that says why, and the version serving
//! keeps serving.

use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::path::{Path, PathBuf};
use std::sync::mpsc::{Receiver, Sender};
use std::sync::{Arc, Mutex, PoisonError};
use std::time::{Duration, Instant};

use notify_debouncer_full::notify::{self, EventKind, PollWatcher, RecommendedWatcher, RecursiveMode};
use notify_debouncer_full::{
    DebounceEventResult, Debouncer, NoCache, RecommendedCache, new_debouncer, new_debouncer_opt,
};
use sha2::{Digest, Sha256};

use wasmsched_core::world::{World, sample};
use wasmsched_loop::record::wall_ms;
use wasmsched_runtime::admission::{self, AdmissionError};
use wasmsched_runtime::{LoadError, LoadedPolicy, Runtime};

use crate::config::PolicyConfig;
use crate::status::{ReloadOutcome, ReloadResult, StatusBoard};

/// Why the directory cannot be watched.
#[derive(Debug, thiserror::Error)]
#[error("cannot watch the policies directory {path}: {detail}")]
pub struct WatchError {
    /// The directory.
    pub path: PathBuf,
    /// The watcher's words.
    pub detail: String,
}

/// A version that passed admission, ready to swap in.
pub struct Candidate {
    /// The policy's name.
    pub name: String,
    /// The loaded component.
    pub policy: LoadedPolicy,
    /// Its config, as JSON.
    pub config_json: String,
    /// When the change was noticed.
    pub noticed: Instant,
    /// The policy's settings, where the change brings them (a `SchedulingPolicy`'s spec: its
    /// role, limits, fallback); None keeps the host config's.
    pub settings: Option<PolicyConfig>,
    /// Where the change came from, for the log and the audit log (the resource, its
    /// generation, who changed it); None for a file.
    pub origin: Option<String>,
}

/// What the worker found for one policy.
pub enum Change {
    /// A new version passed admission.
    Admitted(Box<Candidate>),
    /// Its file is gone.
    Deleted {
        /// The policy's name.
        name: String,
        /// When the deletion was noticed.
        noticed: Instant,
        /// Where the change came from (None for a file).
        origin: Option<String>,
    },
}

/// The world as last observed, published by the loop for the dry runs.
#[derive(Clone, Debug, Default)]
pub struct LatestWorld(Arc<Mutex<Option<Arc<World>>>>);

impl LatestWorld {
    /// Publish the world just observed.
    pub fn publish(&self, world: Arc<World>) {
        *self.0.lock().unwrap_or_else(PoisonError::into_inner) = Some(world);
    }

    /// The world to dry-run on: the latest one when it has jobs, else a small sample.
    pub fn for_dry_run(&self) -> Arc<World> {
        let latest = self.0.lock().unwrap_or_else(PoisonError::into_inner).clone();
        latest.filter(|w| w.job_count() + w.queue_len() > 0).unwrap_or_else(|| Arc::new(sample::with_queue(2, 6, 2, 5)))
    }
}

/// The policy a changed path belongs to: the stem of `NAME.wasm` or `NAME.toml`, unless
/// hidden.
pub fn policy_name(path: &Path) -> Option<String> {
    let ext = path.extension()?.to_str()?;
    let stem = path.file_stem()?.to_str()?;
    ((ext == "wasm" || ext == "toml") && !stem.is_empty() && !stem.starts_with('.')).then(|| stem.to_string())
}

/// The watcher of the policies directory; the watch stops when it is dropped.
pub enum Watcher {
    /// The kernel's notifications (inotify): every write through this machine's kernel.
    Native(Debouncer<RecommendedWatcher, RecommendedCache>),
    /// A scan every poll interval, comparing times and contents: writes on a network volume
    /// made from another machine, which the kernel here never hears of.
    Polled(Debouncer<PollWatcher, NoCache>),
}

/// Watch `dir` (not recursively); each debounced batch of changes sends the names of the
/// policies they touch. Reads are not changes: the host's own reads of a file (and anyone
/// else's) do not bring it back. With `poll`, the directory is scanned that often instead of
/// listening to the kernel.
pub fn watch(
    dir: &Path,
    debounce: Duration,
    poll: Option<Duration>,
    names: Sender<BTreeSet<String>>,
) -> Result<Watcher, WatchError> {
    let err = |e: notify_debouncer_full::notify::Error| WatchError { path: dir.to_path_buf(), detail: e.to_string() };
    let handler = move |result: DebounceEventResult| match result {
        Ok(events) => {
            let touched: BTreeSet<String> = events
                .iter()
                .filter(|e| !matches!(e.kind, EventKind::Access(_)))
                .flat_map(|e| e.paths.iter().filter_map(|p| policy_name(p)))
                .collect();
            if !touched.is_empty() {
                let _ = names.send(touched);
            }
        }
        Err(errors) => {
            for e in errors {
                tracing::warn!(error = %e, "the policies directory watcher reported an error");
            }
        }
    };
    Ok(match poll {
        None => {
            let mut debouncer = new_debouncer(debounce, None, handler).map_err(err)?;
            debouncer.watch(dir, RecursiveMode::NonRecursive).map_err(err)?;
            Watcher::Native(debouncer)
        }
        Some(every) => {
            // By content, not only by time: a file copied in with an older time (tar keeps the
            // archive's) or twice within a second must not be missed.
            let config = notify::Config::default().with_poll_interval(every).with_compare_contents(true);
            let mut debouncer = new_debouncer_opt(debounce, None, handler, NoCache, config).map_err(err)?;
            debouncer.watch(dir, RecursiveMode::NonRecursive).map_err(err)?;
            Watcher::Polled(debouncer)
        }
    })
}

/// Why a file was refused.
#[derive(Debug, thiserror::Error)]
pub enum Refusal {
    /// It did not pass admission.
    #[error(transparent)]
    Admission(#[from] AdmissionError),
}

/// Checks changed policies: admission off to the side of the loop.
pub struct Reloader<'rt> {
    rt: &'rt Runtime,
    dir: PathBuf,
    policies: BTreeMap<String, PolicyConfig>,
    latest: LatestWorld,
    board: Arc<StatusBoard>,
    admitted: HashMap<String, (String, String)>,
    ignored: BTreeSet<String>,
}

impl<'rt> Reloader<'rt> {
    /// A reloader for the configured `policies` in `dir`.
    pub fn new(
        rt: &'rt Runtime,
        dir: &Path,
        policies: BTreeMap<String, PolicyConfig>,
        latest: LatestWorld,
        board: Arc<StatusBoard>,
    ) -> Self {
        Reloader {
            rt,
            dir: dir.to_path_buf(),
            policies,
            latest,
            board,
            admitted: HashMap::new(),
            ignored: BTreeSet::new(),
        }
    }

    /// Look at policy `name`'s files now. None when there is nothing to do: not configured,
    /// unchanged, refused (logged and shown in the status), or absent and never loaded.
    pub fn check(&mut self, name: &str, noticed: Instant) -> Option<Change> {
        let Some(config) = self.policies.get(name) else {
            if self.ignored.insert(name.to_string()) {
                tracing::info!(policy = name, dir = %self.dir.display(), "ignoring a policy file that the config does not name; add a [policy.{name}] table to serve it");
            }
            return None;
        };
        let wasm = self.dir.join(format!("{name}.wasm"));
        let bytes = match std::fs::read(&wasm) {
            Ok(bytes) => bytes,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
                return self.admitted.remove(name).map(|_| Change::Deleted {
                    name: name.into(),
                    noticed,
                    origin: None,
                });
            }
            Err(source) => {
                self.refuse(name, None, noticed, &AdmissionError::Load(LoadError::Read { path: wasm, source }).into());
                return None;
            }
        };
        let digest = hex::encode(Sha256::digest(&bytes));
        let config_json = match merged_config(&config.config, &wasm) {
            Ok(json) => json,
            Err(e) => {
                self.refuse(name, Some(&digest), noticed, &e.into());
                return None;
            }
        };
        let key = (digest.clone(), config_json.clone());
        if self.admitted.get(name) == Some(&key) {
            tracing::debug!(policy = name, sha256 = %digest, "policy file unchanged");
            return None;
        }
        let world = self.latest.for_dry_run();
        match admission::admit(self.rt, name, &bytes, &config_json, config.limits(), &world) {
            Ok(ok) => {
                tracing::info!(policy = name, sha256 = %digest, dry_run_ms = ok.dry_run.as_secs_f64() * 1e3, cache_hit = ok.policy.cache_hit(), "new version admitted; swapping it in at the next tick boundary");
                self.admitted.insert(name.into(), key);
                Some(Change::Admitted(Box::new(Candidate {
                    name: name.into(),
                    policy: ok.policy,
                    config_json,
                    noticed,
                    settings: None,
                    origin: None,
                })))
            }
            Err(e) => {
                self.refuse(name, Some(&digest), noticed, &e.into());
                None
            }
        }
    }

    fn refuse(&self, name: &str, digest: Option<&str>, noticed: Instant, why: &Refusal) {
        let detail = wasmsched_core::error_chain(why);
        tracing::warn!(policy = name, sha256 = digest.unwrap_or("-"), reason = %detail, "policy file refused; the version serving keeps serving");
        let result = ReloadResult {
            wall_ms: wall_ms(),
            outcome: ReloadOutcome::Refused,
            sha256: digest.map(str::to_string),
            detail,
            took_ms: noticed.elapsed().as_secs_f64() * 1e3,
        };
        self.board.update(|s| {
            s.refused += 1;
            if let Some(p) = s.policy_mut(name) {
                p.last_reload = Some(result);
            }
        });
    }
}

/// The policy's config as JSON: the host config's table, with the keys of `NAME.toml` beside
/// the component laid over it.
pub fn merged_config(base: &toml::Table, wasm: &Path) -> Result<String, AdmissionError> {
    let mut table = base.clone();
    let beside = wasm.with_extension("toml");
    if let Ok(text) = std::fs::read_to_string(&beside) {
        let over: toml::Table =
            toml::from_str(&text).map_err(|e| AdmissionError::Config { path: beside, detail: e.to_string() })?;
        table.extend(over);
    }
    Ok(serde_json::to_string(&table).expect("a TOML table is valid JSON"))
}

/// The worker: every batch of names from the watcher is checked, and what passes goes to
/// `sink`. Returns when the watcher stops.
pub fn work(mut reloader: Reloader<'_>, names: Receiver<BTreeSet<String>>, mut sink: impl FnMut(Change)) {
    for batch in names {
        let noticed = Instant::now();
        for name in batch {
            if let Some(change) = reloader.check(&name, noticed) {
                sink(change);
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_wasm_and_toml_files_that_are_not_hidden_name_a_policy() {
        assert_eq!(policy_name(Path::new("/p/flowcon.wasm")).as_deref(), Some("flowcon"));
        assert_eq!(policy_name(Path::new("/p/flowcon.toml")).as_deref(), Some("flowcon"));
        for other in ["/p/.flowcon.wasm.swp", "/p/flowcon.wasm~", "/p/.flowcon.wasm", "/p/flowcon.wasm.part", "/p/x"] {
            assert_eq!(policy_name(Path::new(other)), None, "{other}");
        }
    }

    #[test]
    fn the_file_beside_overrides_the_host_configs_keys() {
        let dir = tempfile::tempdir().unwrap();
        let wasm = dir.path().join("p.wasm");
        let base: toml::Table = toml::from_str("a = 1\nb = 2").unwrap();
        assert_eq!(merged_config(&base, &wasm).unwrap(), r#"{"a":1,"b":2}"#);
        std::fs::write(dir.path().join("p.toml"), "b = 3\nc = \"x\"").unwrap();
        assert_eq!(merged_config(&base, &wasm).unwrap(), r#"{"a":1,"b":3,"c":"x"}"#);
        std::fs::write(dir.path().join("p.toml"), "b = [").unwrap();
        assert!(merged_config(&base, &wasm).unwrap_err().to_string().contains("p.toml is not valid TOML"));
    }
}
