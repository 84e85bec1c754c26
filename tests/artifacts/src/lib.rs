//! wasmsched-test-artifacts: what only the tests use, built from this workspace's source — the
//! hostile fixtures (`policies/hostile/`) and the test-only policies (`tests/fixtures/`) as
//! wasm32-wasip2 components, the policies in Python and JavaScript (`policies/python/`,
//! `policies/js/`) with their toolchains, and the statically linked training job.
//!
//! Its build script (`build.rs`) builds them; the shipped policies are built once, by
//! `wasmsched-shipped`, which this crate depends on and re-exports. Tests find any component
//! by name through [`path`], and a policy in another language through [`foreign`], which says
//! why it is missing where its toolchain could not be installed.

pub use wasmsched_shipped::{SHIPPED, Shipped};

/// A Rust component built from this workspace.
#[derive(Clone, Copy, Debug)]
pub struct Artifact {
    /// Its folder's name under `policies/`, `policies/hostile/` or `tests/fixtures/`.
    pub name: &'static str,
    /// Where the component file is.
    pub path: &'static str,
    /// True for the test fixtures (the hostile ones, and those under `tests/fixtures/`).
    pub hostile: bool,
}

/// A policy written in another language (Python, JavaScript), built by its toolchain.
#[derive(Clone, Copy, Debug)]
pub struct Foreign {
    /// Its folder's name under `policies/<language>/`, with `-py` or `-js` after it.
    pub name: &'static str,
    /// `"python"` or `"js"`.
    pub language: &'static str,
    /// Its source folder.
    pub source: &'static str,
    /// Where the component file is.
    pub path: &'static str,
}

include!(concat!(env!("OUT_DIR"), "/artifacts.rs"));

/// The policy in another language named `name`, or why it was not built (its toolchain could
/// not be installed here, or its build failed): a test that needs it says so and skips.
pub fn foreign(name: &str) -> Result<&'static Foreign, String> {
    if let Some(f) = FOREIGN.iter().find(|f| f.name == name) {
        return Ok(f);
    }
    let language = if name.ends_with("-py") { "python" } else { "js" };
    Err(match UNBUILT.iter().find(|(l, _)| *l == language) {
        Some((_, why)) => format!("{name} was not built: {why}"),
        None => format!("no policy named {name} under policies/{language}/"),
    })
}

/// The path of the component named `name` (shipped, test fixture, or in another language).
///
/// # Panics
/// When no component has that name: a test asked for a fixture that does not exist, or for a
/// policy in another language that was not built (ask [`foreign`] first).
pub fn path(name: &str) -> &'static str {
    let rust = ALL.iter().find(|a| a.name == name).map(|a| a.path);
    rust.or_else(|| FOREIGN.iter().find(|f| f.name == name).map(|f| f.path))
        .unwrap_or_else(|| panic!("no policy component named {name:?}"))
}
