//! One runtime per test process, with a cache directory of its own, and each component
//! loaded once.

use std::collections::HashMap;
use std::io::Write;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, OnceLock};
use std::time::Duration;

use wasmsched::runtime::supervise::{Fallback, Quarantine, Supervised};
use wasmsched::runtime::{Limits, LoadedPolicy, Runtime, RuntimeConfig};

/// The epoch tick the tests run with: coarse enough that a loaded machine does not blur it.
pub const TICK: Duration = Duration::from_millis(20);

/// The process's compiled-component cache, in a temp dir of its own.
pub fn cache_dir() -> &'static std::path::Path {
    static DIR: OnceLock<tempfile::TempDir> = OnceLock::new();
    DIR.get_or_init(|| tempfile::tempdir().expect("a temp dir")).path()
}

/// The process's one runtime, with the test epoch tick and the cache above.
pub fn runtime() -> &'static Runtime {
    static RT: OnceLock<Runtime> = OnceLock::new();
    RT.get_or_init(|| {
        Runtime::new(RuntimeConfig { epoch_tick: TICK, cache_dir: Some(cache_dir().to_path_buf()), fuel: false })
            .expect("the engine starts")
    })
}

/// The component built from `policies/<name>` (or `policies/hostile/<name>`), loaded.
pub fn loaded(name: &str) -> LoadedPolicy {
    static LOADED: OnceLock<Mutex<HashMap<String, LoadedPolicy>>> = OnceLock::new();
    let map = LOADED.get_or_init(Default::default);
    if let Some(p) = map.lock().unwrap().get(name) {
        return p.clone();
    }
    let p = runtime()
        .load_file(std::path::Path::new(wasmsched_test_artifacts::path(name)))
        .unwrap_or_else(|e| panic!("{name}: {e}"));
    map.lock().unwrap().insert(name.into(), p.clone());
    p
}

/// The `misbehave` fixture doing `behaviour`, supervised with the default limits and quarantine,
/// keeping the limits in force when it fails.
pub fn misbehaving(behaviour: &str) -> Supervised {
    let config = format!(r#"{{"behaviour": "{behaviour}"}}"#);
    Supervised::new(loaded("misbehave"), config, Limits::default(), Fallback::KeepLimits, Quarantine::default())
}

/// The host's own log as `run` writes it (every level from info up), counted in bytes rather
/// than kept: a dispatcher to run code under, and the count so far.
pub fn counted_log() -> (tracing::Dispatch, Arc<AtomicUsize>) {
    let bytes = Arc::new(AtomicUsize::new(0));
    let counter = bytes.clone();
    let subscriber = tracing_subscriber::fmt()
        .with_max_level(tracing::Level::INFO)
        .with_writer(move || Counted(counter.clone()))
        .finish();
    (tracing::Dispatch::new(subscriber), bytes)
}

/// A writer that counts what it is given.
struct Counted(Arc<AtomicUsize>);

impl Write for Counted {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        self.0.fetch_add(buf.len(), Ordering::Relaxed);
        Ok(buf.len())
    }

    fn flush(&mut self) -> std::io::Result<()> {
        Ok(())
    }
}
