//! One runtime per test process, with a cache directory of its own, and each component
//! loaded once.

use std::collections::HashMap;
use std::sync::{Mutex, OnceLock};
use std::time::Duration;

use wasmsched::runtime::{LoadedPolicy, Runtime, RuntimeConfig};

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
