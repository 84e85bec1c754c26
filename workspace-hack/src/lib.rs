//! No code: this crate exists for its `Cargo.toml`, which turns on in the demo binary's
//! dependencies the features the whole workspace turns on, so that `cargo run
//! --no-default-features -- demo` and `cargo test --workspace` build each dependency once.
