//! The policy runtime: one wasmtime [`Engine`] with epoch interruption, a linker that offers
//! a policy only `log` (and WASI with an empty, deterministic context where Rust's std needs
//! it), an on-disk cache of compiled components, and the loading of a policy file into a
//! [`LoadedPolicy`] ready to instantiate.
//!
//! Start at [`Runtime::load`], then [`instance`] (calls with limits) and [`supervise`]
//! (fallback and quarantine). [`validate`] checks every action a policy returns against the
//! world, by the contract's rules in `wasmsched-rules`; [`admission`] is what a policy must
//! pass to serve (the right contract, `init`, a dry-run `decide`), shared by `wasmsched
//! validate`, the hot reload and the SchedulingPolicy resources.
//!
//! This crate knows Wasm and the vocabulary (`wasmsched-core`), and no backend, loop or
//! experiment: it sits beside the simulator (`wasmsched-sim`) and the live backends.

pub mod admission;
pub mod cache;
pub mod current;
pub mod instance;
pub mod limits;
mod older;
pub mod producers;
pub mod supervise;
pub mod throttle;
mod v0_1;
mod v0_2;
mod v0_3;
pub mod validate;

use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use sha2::{Digest, Sha256};
use wasmtime::component::{Component, HasSelf, Linker, types::ComponentItem};
use wasmtime::{Config, Engine};

use wasmsched_core::bindings::{self, Contract};

use current::{PolicyPlugin, PolicyPluginPre};

pub use instance::{CallError, LoadedPolicy, PolicyInstance, TrapKind};
pub use limits::{Limits, SharedLogBudget, StoreState};
pub use throttle::{LogBudget, Throttle};

/// Engine-wide settings.
#[derive(Clone, Debug)]
pub struct RuntimeConfig {
    /// How often the epoch advances; deadlines are whole numbers of these.
    pub epoch_tick: Duration,
    /// Where compiled components are cached; None disables the cache.
    pub cache_dir: Option<PathBuf>,
    /// Count fuel in every call (a deterministic cost figure; slows calls down).
    pub fuel: bool,
}

impl Default for RuntimeConfig {
    fn default() -> Self {
        RuntimeConfig { epoch_tick: Duration::from_millis(5), cache_dir: cache::default_dir(), fuel: false }
    }
}

/// Why a policy file could not be loaded.
#[derive(Debug, thiserror::Error)]
pub enum LoadError {
    /// The file could not be read.
    #[error("cannot read policy file {path}")]
    Read {
        /// The file.
        path: PathBuf,
        /// Why.
        #[source]
        source: std::io::Error,
    },
    /// The file is empty.
    #[error(
        "policy {policy} is empty (0 bytes): a copy still in progress? Wait for it to finish, or rebuild the policy"
    )]
    Empty {
        /// The policy's name.
        policy: String,
    },
    /// The bytes are not a WebAssembly component.
    #[error("policy {policy} is not a WebAssembly component: {detail}")]
    NotComponent {
        /// The policy's name.
        policy: String,
        /// What is wrong and what to do.
        detail: String,
    },
    /// The component speaks another contract.
    #[error("policy {policy} {found}; this host speaks {expected} (and still 0.2.0 and 0.1.0) — rebuild it against the current SDK", expected = bindings::PACKAGE)]
    WrongWorld {
        /// The policy's name.
        policy: String,
        /// What it exports or imports instead.
        found: String,
    },
    /// Compiling or linking failed.
    #[error("policy {policy} could not be compiled or linked: {detail}")]
    Compile {
        /// The policy's name.
        policy: String,
        /// The engine's words.
        detail: String,
    },
}

/// The engine, the linker and the compiled-component cache, shared by every policy.
pub struct Runtime {
    engine: Engine,
    linker: Linker<StoreState>,
    cache: Option<cache::ArtifactCache>,
    config: RuntimeConfig,
    ticker: Ticker,
}

impl Runtime {
    /// Build the engine and start its epoch ticker.
    pub fn new(config: RuntimeConfig) -> wasmtime::Result<Self> {
        let mut wasm = Config::new();
        wasm.wasm_component_model(true).epoch_interruption(true).consume_fuel(config.fuel);
        let engine = Engine::new(&wasm)?;
        let mut linker = Linker::new(&engine);
        wasmtime_wasi::p2::add_to_linker_sync(&mut linker)?;
        PolicyPlugin::add_to_linker::<StoreState, HasSelf<StoreState>>(&mut linker, |s| s)?;
        v0_3::PolicyPlugin::add_to_linker::<StoreState, HasSelf<StoreState>>(&mut linker, |s| s)?;
        v0_2::PolicyPlugin::add_to_linker::<StoreState, HasSelf<StoreState>>(&mut linker, |s| s)?;
        v0_1::PolicyPlugin::add_to_linker::<StoreState, HasSelf<StoreState>>(&mut linker, |s| s)?;
        let cache = config.cache_dir.as_deref().map(|dir| cache::ArtifactCache::new(dir, &engine));
        let ticker = Ticker::start(engine.clone(), config.epoch_tick);
        Ok(Runtime { engine, linker, cache, config, ticker })
    }

    /// The engine settings in force.
    pub fn config(&self) -> &RuntimeConfig {
        &self.config
    }

    /// How many epoch ticks have passed since the runtime started.
    pub fn epoch(&self) -> u64 {
        self.ticker.count.load(Ordering::Relaxed)
    }

    /// The deadline in whole epoch ticks (at least one).
    pub fn deadline_ticks(&self, deadline: Duration) -> u64 {
        let tick = self.config.epoch_tick.as_nanos().max(1);
        deadline.as_nanos().div_ceil(tick).max(1) as u64
    }

    /// Load a policy file; its name is the file stem.
    pub fn load_file(&self, path: &Path) -> Result<LoadedPolicy, LoadError> {
        let bytes = std::fs::read(path).map_err(|source| LoadError::Read { path: path.to_path_buf(), source })?;
        let name = path.file_stem().map_or_else(|| path.display().to_string(), |s| s.to_string_lossy().into_owned());
        self.load(&name, &bytes)
    }

    /// Check, compile (or fetch from the cache) and link a policy component.
    pub fn load(&self, name: &str, bytes: &[u8]) -> Result<LoadedPolicy, LoadError> {
        check_header(name, bytes)?;
        let digest = hex::encode(Sha256::digest(bytes));
        let started = Instant::now();
        let compile = |bytes: &[u8]| Component::new(&self.engine, bytes);
        let (component, cache_hit) = match &self.cache {
            Some(cache) => cache.get_or_compile(&digest, bytes, compile),
            None => compile(bytes).map(|c| (c, false)),
        }
        .map_err(|e| LoadError::NotComponent { policy: name.into(), detail: format!("{e:#}") })?;
        let compile_time = started.elapsed();
        let contract = check_world(name, &self.engine, &component)?;
        let pre = self
            .linker
            .instantiate_pre(&component)
            .map_err(|e| LoadError::Compile { policy: name.into(), detail: format!("{e:#}") })?;
        let mismatch = |e: wasmtime::Error| LoadError::WrongWorld {
            policy: name.into(),
            found: format!("does not match {contract}: {e:#}"),
        };
        let pre = match contract {
            Contract::V0_4 => instance::Pre::Current(PolicyPluginPre::new(pre).map_err(mismatch)?),
            Contract::V0_3 => instance::Pre::V0_3(v0_3::PolicyPluginPre::new(pre).map_err(mismatch)?),
            Contract::V0_2 => instance::Pre::V0_2(v0_2::PolicyPluginPre::new(pre).map_err(mismatch)?),
            Contract::V0_1 => instance::Pre::V0_1(v0_1::PolicyPluginPre::new(pre).map_err(mismatch)?),
        };
        Ok(LoadedPolicy::new(name.into(), digest, pre, compile_time, cache_hit))
    }

    pub(crate) fn engine(&self) -> &Engine {
        &self.engine
    }
}

/// Whether `bytes` can be a component at all, by its first eight bytes: the WebAssembly magic
/// and the component layer's version (a core module, an empty file and any other bytes are
/// told apart, each with what to do). `name` is the policy's name in the error. Cheap: what
/// `load` checks before it compiles, and what `wasmsched push` checks before it connects.
pub fn check_header(name: &str, bytes: &[u8]) -> Result<(), LoadError> {
    const MAGIC: &[u8] = b"\0asm";
    const COMPONENT_VERSION: [u8; 4] = [0x0d, 0x00, 0x01, 0x00];
    const MODULE_VERSION: [u8; 4] = [0x01, 0x00, 0x00, 0x00];
    let not = |detail: &str| Err(LoadError::NotComponent { policy: name.into(), detail: detail.into() });
    if bytes.is_empty() {
        return Err(LoadError::Empty { policy: name.into() });
    }
    if bytes.len() < 8 || &bytes[..4] != MAGIC {
        return not(
            "it does not start with the WebAssembly magic bytes (is it the right file?); build the policy with `cargo build --release --target wasm32-wasip2`",
        );
    }
    if bytes[4..8] == MODULE_VERSION {
        return not(
            "it is a core module, not a component; build it for the wasm32-wasip2 target (`cargo build --release --target wasm32-wasip2`), which makes a component",
        );
    }
    if bytes[4..8] != COMPONENT_VERSION {
        return not("its component-model version is not one this host reads; rebuild it with the current toolchain");
    }
    Ok(())
}

/// Which contract the component speaks, or why it speaks none this host serves.
fn check_world(name: &str, engine: &Engine, component: &Component) -> Result<Contract, LoadError> {
    let ty = component.component_type();
    let exports: Vec<String> = ty.exports(engine).map(|(n, _)| n.to_string()).collect();
    let Some(contract) = [Contract::V0_4, Contract::V0_3, Contract::V0_2, Contract::V0_1]
        .into_iter()
        .find(|c| exports.iter().any(|e| e == c.policy_export()))
    else {
        let found = match exports.iter().find(|e| e.starts_with("wasmsched:policy/")) {
            Some(other) => format!("exports `{other}`"),
            None if exports.is_empty() => "exports nothing".to_string(),
            None => format!("exports {}", exports.join(", ")),
        };
        return Err(LoadError::WrongWorld { policy: name.into(), found });
    };
    for (import, item) in ty.imports(engine) {
        let allowed = contract.imports().contains(&import)
            || (import.starts_with("wasi:") && matches!(item.ty, ComponentItem::ComponentInstance(_)));
        if !allowed {
            return Err(LoadError::WrongWorld {
                policy: name.into(),
                found: format!("imports `{import}`, which policies may not use"),
            });
        }
    }
    Ok(contract)
}

/// Advances the engine's epoch every tick on a thread of its own; stops when dropped.
struct Ticker {
    stop: Arc<AtomicBool>,
    count: Arc<AtomicU64>,
    thread: Option<JoinHandle<()>>,
}

impl Ticker {
    fn start(engine: Engine, tick: Duration) -> Self {
        let stop = Arc::new(AtomicBool::new(false));
        let count = Arc::new(AtomicU64::new(0));
        let (s, c) = (stop.clone(), count.clone());
        let thread = std::thread::Builder::new()
            .name("wasmsched-epoch".into())
            .spawn(move || {
                while !s.load(Ordering::Relaxed) {
                    std::thread::sleep(tick);
                    c.fetch_add(1, Ordering::Relaxed);
                    engine.increment_epoch();
                }
            })
            .expect("the epoch ticker thread starts");
        Ticker { stop, count, thread: Some(thread) }
    }
}

impl Drop for Ticker {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::Relaxed);
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn kind(bytes: &[u8]) -> String {
        check_header("p", bytes).unwrap_err().to_string()
    }

    #[test]
    fn empty_random_and_core_module_bytes_are_told_apart() {
        assert!(kind(b"").contains("empty"));
        assert!(kind(b"\x7fELF\x02\x01\x01\x00garbage").contains("magic bytes"));
        assert!(kind(b"\0asm\x01\0\0\0").contains("core module"));
        assert!(check_header("p", b"\0asm\x0d\0\x01\0").is_ok());
    }
}
