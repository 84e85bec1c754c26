//! Integration tests: one binary, so wasmtime is linked once.

mod api;
mod architecture;
mod bindings;
mod browser;
mod conformance;
mod experiment;
mod fuzz;
mod hostile;
mod languages;
mod oci;
mod page;
mod parsers;
mod reload;
mod replay;
mod replicas;
mod results;
mod runtime;
mod sandbox;
mod scheduling;
mod shadow;
mod sim;
mod whatif;
