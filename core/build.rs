//! Writes the contract's types as plain Rust (`src/bindings.rs` includes them), so that core, and
//! the backends above it, build without wasmtime.

fn main() {
    wasmsched_build_support::contract::write("contract.rs", wasmsched_build_support::contract::Contract::types);
}
