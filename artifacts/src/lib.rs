//! wasmsched-artifacts: the policy components built from this workspace's `policies/`.
//!
//! Its build script compiles every policy crate (and the hostile fixtures under
//! `policies/hostile/`) to a wasm32-wasip2 component. The host embeds [`SHIPPED`]; tests
//! find any component by name through [`path`].

/// A shipped policy, embedded in the binary.
#[derive(Clone, Copy, Debug)]
pub struct Shipped {
    /// Its name: its folder under `policies/`.
    pub name: &'static str,
    /// The component.
    pub wasm: &'static [u8],
}

/// A component built from this workspace.
#[derive(Clone, Copy, Debug)]
pub struct Artifact {
    /// Its folder's name under `policies/` or `policies/hostile/`.
    pub name: &'static str,
    /// Where the component file is.
    pub path: &'static str,
    /// True for the test fixtures (the hostile ones, and those under `tests/fixtures/`).
    pub hostile: bool,
}

include!(concat!(env!("OUT_DIR"), "/artifacts.rs"));

/// The shipped policy named `name`.
pub fn shipped(name: &str) -> Option<&'static Shipped> {
    SHIPPED.iter().find(|s| s.name == name)
}

/// The path of the component named `name` (shipped or hostile).
///
/// # Panics
/// When no component has that name: a test asked for a fixture that does not exist.
pub fn path(name: &str) -> &'static str {
    ALL.iter().find(|a| a.name == name).map(|a| a.path).unwrap_or_else(|| panic!("no policy component named {name:?}"))
}
