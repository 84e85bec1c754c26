//! Hostile fixture: a component of another world, `wasmsched:policy@0.2.0`, that a host
//! speaking 0.1.0 must refuse with a message saying to rebuild.

// Natively there is nothing to test, and wit-bindgen's export names do not link natively.
#![cfg(target_arch = "wasm32")]
#![allow(missing_docs, unsafe_code, reason = "wit-bindgen generates the export glue")]

// Written by wit-bindgen from `wit/` (tests/tests/bindings.rs), committed.
include!("bindings.rs");

struct Alien;

impl exports::wasmsched::policy::policy::Guest for Alien {
    fn decide(jobs: u32) -> u32 {
        jobs
    }
}

export!(Alien);
