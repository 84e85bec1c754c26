//! The Rust types of the contract, written from the WIT at build time (`build.rs`, through
//! `wasmsched_build_support::contract`) and used everywhere in the host: no hand-written mirrors,
//! and no wasmtime, so core and the backends above it build without Cranelift. They have the
//! names, fields, derives and `Debug` output of `wasmtime::component::bindgen!`'s; the sandbox
//! (`wasmsched-runtime`) holds bindgen's own for the calls and converts at the boundary. The
//! current contract is `wasmsched:policy@0.4.0` ([`wit`]); components built against 0.3.0, 0.2.0
//! and 0.1.0 are still served, through bindings of their frozen contracts that only their
//! adapters in `wasmsched-runtime` (`v0_3`, `v0_2`, `v0_1`) generate and touch.

/// The types of the contract's `types` interface.
#[allow(missing_docs, reason = "generated from the WIT, whose docs it copies where they exist")]
pub mod wit {
    include!(concat!(env!("OUT_DIR"), "/contract.rs"));
}

/// The contract's package and version, as a component names it.
pub const PACKAGE: &str = "wasmsched:policy@0.4.0";
/// The interface a policy exports.
pub const POLICY_EXPORT: &str = "wasmsched:policy/policy@0.4.0";
/// The interfaces of the contract a policy may import: the host's `log`, and the types.
pub const CONTRACT_IMPORTS: [&str; 2] = ["wasmsched:policy/host@0.4.0", "wasmsched:policy/types@0.4.0"];

/// The contract versions this host serves, newest first.
#[derive(Clone, Copy, Debug, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub enum Contract {
    /// `wasmsched:policy@0.4.0`: what each piece requests and the labels it needs, nodes'
    /// labels, topology domains and room.
    #[serde(rename = "0.4.0")]
    V0_4,
    /// `wasmsched:policy@0.3.0`: GPU types, elastic jobs and `resize`, nodes that cannot take
    /// work, and why queued jobs wait.
    #[serde(rename = "0.3.0")]
    V0_3,
    /// `wasmsched:policy@0.2.0`: the queue, placement and preemption.
    #[serde(rename = "0.2.0")]
    V0_2,
    /// `wasmsched:policy@0.1.0`: limits, migration, delivery and stop on running jobs.
    #[serde(rename = "0.1.0")]
    V0_1,
}

impl Contract {
    /// The version, as the package names it.
    pub fn version(self) -> &'static str {
        match self {
            Contract::V0_4 => "0.4.0",
            Contract::V0_3 => "0.3.0",
            Contract::V0_2 => "0.2.0",
            Contract::V0_1 => "0.1.0",
        }
    }

    /// The interface a policy of this version exports.
    pub fn policy_export(self) -> &'static str {
        match self {
            Contract::V0_4 => POLICY_EXPORT,
            Contract::V0_3 => "wasmsched:policy/policy@0.3.0",
            Contract::V0_2 => "wasmsched:policy/policy@0.2.0",
            Contract::V0_1 => "wasmsched:policy/policy@0.1.0",
        }
    }

    /// The contract interfaces a policy of this version may import.
    pub fn imports(self) -> [&'static str; 2] {
        match self {
            Contract::V0_4 => CONTRACT_IMPORTS,
            Contract::V0_3 => ["wasmsched:policy/host@0.3.0", "wasmsched:policy/types@0.3.0"],
            Contract::V0_2 => ["wasmsched:policy/host@0.2.0", "wasmsched:policy/types@0.2.0"],
            Contract::V0_1 => ["wasmsched:policy/host@0.1.0", "wasmsched:policy/types@0.1.0"],
        }
    }
}

impl std::fmt::Display for Contract {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "wasmsched:policy@{}", self.version())
    }
}

impl wit::Resources {
    /// Nothing requested.
    pub const NONE: wit::Resources = wit::Resources { cpu_millicores: 0, memory_bytes: 0 };
}

impl wit::Scaling {
    /// A rigid job's: no GPU count but the one it asks for (the world adds `gpus` to every
    /// declaration's counts) and no batch size the host sets.
    pub fn rigid() -> Self {
        wit::Scaling { gpu_counts: Vec::new(), batch_size_min: 0, batch_size_max: 0 }
    }
}
