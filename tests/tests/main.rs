//! Integration tests: one binary, so wasmtime is linked once.

mod api;
mod common;
mod docker;
mod live;
mod reload;
mod replay;
mod runtime;
mod sandbox;
mod shadow;
mod sim;
