//! The contract's bindings, written by wit-bindgen from `wit/policy.wit` and committed
//! (`bindings/generated.rs`; `tests/tests/bindings.rs` regenerates it and fails on a difference,
//! `WASMSCHED_BLESS=1` rewrites it). Authors never use this module; the SDK re-exports what
//! they need.

#![allow(missing_docs, unsafe_code, reason = "generated code: the ABI glue is unsafe by nature")]

include!("bindings/generated.rs");
