//! The one place the host runs `wasmtime::component::bindgen!`: the Rust types of the
//! `wasmsched:policy@0.1.0` contract, used everywhere in the host (no hand-written mirrors).

#![allow(missing_docs, reason = "generated code")]

wasmtime::component::bindgen!({
    path: "../wit",
    world: "policy-plugin",
    additional_derives: [PartialEq, serde::Serialize, serde::Deserialize],
});

pub use self::wasmsched::policy::types as wit;

/// The contract's package and version, as a component names it.
pub const PACKAGE: &str = "wasmsched:policy@0.1.0";
/// The interface a policy exports.
pub const POLICY_EXPORT: &str = "wasmsched:policy/policy@0.1.0";
/// The interfaces of the contract a policy may import: the host's `log`, and the types.
pub const CONTRACT_IMPORTS: [&str; 2] = ["wasmsched:policy/host@0.1.0", "wasmsched:policy/types@0.1.0"];
