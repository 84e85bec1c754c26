//! wasmsched-shipped: what the `wasmsched` binary ships, embedded — the Rust policies under
//! `policies/` as wasm32-wasip2 components ([`SHIPPED`]) and the files `wasmsched new` writes
//! from ([`SCAFFOLD_FILES`]).
//!
//! Its build script (`build.rs`) compiles only the shipped policy crates, with a nested cargo
//! under `target/policies`; the components only the tests use (hostile fixtures, the other
//! languages' policies, the training job) are `wasmsched-test-artifacts`' business
//! (`tests/artifacts/`), which the host's binary never builds.

/// A shipped policy, embedded in the binary.
#[derive(Clone, Copy, Debug)]
pub struct Shipped {
    /// Its name: its folder under `policies/`.
    pub name: &'static str,
    /// The component.
    pub wasm: &'static [u8],
}

include!(concat!(env!("OUT_DIR"), "/shipped.rs"));

/// The shipped policy named `name`.
pub fn by_name(name: &str) -> Option<&'static Shipped> {
    SHIPPED.iter().find(|s| s.name == name)
}

/// The names of the shipped policies, for error messages.
pub fn names() -> Vec<&'static str> {
    SHIPPED.iter().map(|s| s.name).collect()
}
