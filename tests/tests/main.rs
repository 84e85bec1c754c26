//! Integration tests: one binary, so wasmtime is linked once.

mod common;
mod runtime;
mod sandbox;
mod sim;
