//! On-disk cache of compiled components, keyed by the policy file's sha256 and the engine's
//! settings: a restart with an unchanged file does not compile again.

use std::hash::{DefaultHasher, Hash, Hasher};
use std::path::{Path, PathBuf};

use wasmtime::Engine;
use wasmtime::component::Component;

/// `$XDG_CACHE_HOME/wasmsched` or `~/.cache/wasmsched`, when either is known.
pub fn default_dir() -> Option<PathBuf> {
    let base = std::env::var_os("XDG_CACHE_HOME")
        .map(PathBuf::from)
        .or_else(|| std::env::var_os("HOME").map(|h| PathBuf::from(h).join(".cache")))?;
    Some(base.join("wasmsched"))
}

/// Compiled components in one directory.
pub struct ArtifactCache {
    dir: PathBuf,
    engine: Engine,
    engine_key: String,
}

impl ArtifactCache {
    /// A cache in `dir` for components compiled by `engine`.
    pub fn new(dir: &Path, engine: &Engine) -> Self {
        let mut h = DefaultHasher::new();
        engine.precompile_compatibility_hash().hash(&mut h);
        let engine_key = format!("{:016x}", h.finish());
        ArtifactCache { dir: dir.to_path_buf(), engine: engine.clone(), engine_key }
    }

    /// Where the artifact for `digest` lives.
    pub fn path_for(&self, digest: &str) -> PathBuf {
        self.dir.join(format!("{digest}-{}.cwasm", self.engine_key))
    }

    /// The cached component for `digest`, or `compile(bytes)` stored for next time. The bool
    /// says whether it came from the cache. A cache that cannot be read or written is only
    /// logged: compiling still works.
    pub fn get_or_compile(
        &self,
        digest: &str,
        bytes: &[u8],
        compile: impl FnOnce(&[u8]) -> wasmtime::Result<Component>,
    ) -> wasmtime::Result<(Component, bool)> {
        let path = self.path_for(digest);
        if path.is_file() {
            match self.deserialize(&path) {
                Ok(component) => return Ok((component, true)),
                Err(e) => {
                    tracing::warn!(path = %path.display(), error = %e, "compiled-policy cache entry unusable; compiling again");
                    let _ = std::fs::remove_file(&path);
                }
            }
        }
        let component = compile(bytes)?;
        if let Err(e) = self.store(&path, &component) {
            tracing::warn!(dir = %self.dir.display(), error = %e, "cannot write the compiled-policy cache; going on without it");
        }
        Ok((component, false))
    }

    #[allow(unsafe_code, reason = "deserializing native code we compiled and wrote ourselves")]
    fn deserialize(&self, path: &Path) -> wasmtime::Result<Component> {
        // SAFETY: the file was written by `store` below with this engine's settings (the
        // name carries the engine's compatibility hash, and wasmtime checks it again), into
        // a directory of ours; it is never taken from a policy author.
        unsafe { Component::deserialize_file(&self.engine, path) }
    }

    fn store(&self, path: &Path, component: &Component) -> std::io::Result<()> {
        std::fs::create_dir_all(&self.dir)?;
        let bytes = component.serialize().map_err(|e| std::io::Error::other(e.to_string()))?;
        let tmp = tempfile_in(&self.dir)?;
        std::fs::write(&tmp, bytes)?;
        std::fs::rename(&tmp, path)
    }
}

fn tempfile_in(dir: &Path) -> std::io::Result<PathBuf> {
    use std::time::{SystemTime, UNIX_EPOCH};
    let nanos = SystemTime::now().duration_since(UNIX_EPOCH).map_or(0, |d| d.subsec_nanos());
    Ok(dir.join(format!(".tmp-{}-{nanos}", std::process::id())))
}
