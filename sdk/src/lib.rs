//! wasmsched-sdk: what a scheduling-policy author depends on.
//!
//! Implement [`Policy`] for your type and call [`export_policy!`]; build with
//! `cargo build --release --target wasm32-wasip2` and drop the `.wasm` into the host's
//! policies directory. The SDK keeps the job table inside the guest, so each tick only what
//! changed crosses from the host, yet your `decide` sees complete, typed jobs
//! ([`Snapshot`], [`Job`]). Units are types ([`Millicores`], [`Bytes`], [`Seconds`]).
//!
//! Start reading at [`Policy`], then [`view`] and [`decision`]. The computations several
//! papers share (windowed means, normalised progress, growth efficiency, a proportional
//! split with floors and caps) are in [`stats`]; [`testing`] builds snapshots natively so a
//! policy is unit-tested with plain `cargo test`.

pub mod bindings;
pub mod decision;
pub mod log;
pub mod policy;
pub mod sched;
pub mod stats;
pub mod testing;
pub mod units;
pub mod view;

pub use decision::{Action, ActionKind, Decision, Rounds};
pub use policy::{NoConfig, Policy, PolicyError, Runner, state};
pub use units::{Bytes, JobId, Millicores, NodeId, Seconds};
pub use view::{
    Direction, Gpu, GpuSlot, Job, JobKind, Node, ProgressRecord, Scaling, Snapshot, Tenant, Values, WaitReason,
};
/// What tenants hold against their limits ([`Snapshot::ledger`]), and why a placement would
/// pass one: the host's own rules.
pub use wasmsched_rules::{Ledger, OverLimit};

/// Everything a policy usually needs, in one `use`.
pub mod prelude {
    pub use crate::decision::{Action, ActionKind, Decision, Rounds};
    pub use crate::policy::{NoConfig, Policy, PolicyError, state};
    pub use crate::sched;
    pub use crate::stats;
    pub use crate::units::{Bytes, JobId, Millicores, NodeId, Seconds};
    pub use crate::view::{
        Direction, GpuSlot, Job, JobKind, Node, ProgressRecord, Scaling, Snapshot, Tenant, Tiers, WaitReason,
    };
    pub use crate::{Ledger, OverLimit};
    pub use crate::{debug, error, export_policy, info, keep_state, warn};
}

/// Keeps a policy's state across hot swaps: implements [`Policy::save_state`] and
/// [`Policy::restore_state`] for a policy whose whole state is one field (anything
/// serde can encode), inside its `impl Policy` block.
///
/// ```
/// use wasmsched_sdk::prelude::*;
///
/// #[derive(Default)]
/// struct Counter {
///     calls: u32,
/// }
///
/// impl Policy for Counter {
///     type Config = NoConfig;
///     fn new(_: NoConfig) -> Result<Self, PolicyError> {
///         Ok(Counter::default())
///     }
///     fn decide(&mut self, _: &Snapshot) -> Result<Decision, PolicyError> {
///         self.calls += 1;
///         Ok(Decision::new())
///     }
///     keep_state!(calls);
/// }
///
/// let saved = Counter { calls: 3 }.save_state();
/// let mut newer = Counter::default();
/// newer.restore_state(&saved).unwrap();
/// assert_eq!(newer.calls, 3);
/// ```
#[macro_export]
macro_rules! keep_state {
    ($field:ident) => {
        fn save_state(&self) -> ::std::vec::Vec<u8> {
            $crate::state::encode(&self.$field)
        }

        fn restore_state(&mut self, saved: &[u8]) -> ::std::result::Result<(), $crate::PolicyError> {
            self.$field = $crate::state::decode(saved)?;
            ::std::result::Result::Ok(())
        }
    };
}

/// Export a [`Policy`] as the component's `wasmsched:policy/policy` interface. Natively
/// (unit tests, benchmarks) it expands to nothing: the policy is driven through [`Runner`].
///
/// ```ignore
/// export_policy!(MyPolicy);
/// ```
#[macro_export]
macro_rules! export_policy {
    ($policy:ty) => {
        #[cfg(target_arch = "wasm32")]
        const _: () = {
            ::std::thread_local! {
                static RUNNER: ::std::cell::RefCell<::std::option::Option<$crate::Runner<$policy>>> =
                    const { ::std::cell::RefCell::new(::std::option::Option::None) };
            }

            struct Export;

            impl $crate::bindings::exports::wasmsched::policy::policy::Guest for Export {
                fn init(
                    config_json: ::std::string::String,
                    saved_state: ::std::option::Option<::std::vec::Vec<u8>>,
                ) -> ::std::result::Result<$crate::bindings::wasmsched::policy::types::Abilities, $crate::PolicyError>
                {
                    $crate::policy::glue::init(&RUNNER, config_json, saved_state)
                }

                fn decide(
                    snapshot: $crate::bindings::wasmsched::policy::types::Snapshot,
                ) -> ::std::result::Result<$crate::bindings::wasmsched::policy::types::Decision, $crate::PolicyError>
                {
                    $crate::policy::glue::decide(&RUNNER, snapshot)
                }

                fn save_state() -> ::std::vec::Vec<u8> {
                    $crate::policy::glue::save_state(&RUNNER)
                }
            }

    $crate::bindings::__export_policy_plugin!(Export with_types_in $crate::bindings);
        };
        // Natively the policy is reached through `Runner`; say so, so it is not dead code.
        #[cfg(not(target_arch = "wasm32"))]
        const _: fn(
            &str,
            ::std::option::Option<&[u8]>,
        ) -> ::std::result::Result<$crate::Runner<$policy>, $crate::PolicyError> = $crate::Runner::<$policy>::init;
    };
}

/// The README's policy example, compiled as a doctest so that it cannot rot.
#[cfg(doctest)]
#[doc = include_str!("../../README.md")]
struct ReadmeExample;
