//! Empty: the crate has a build script only so that its build-dependencies take part in
//! feature resolution (see `Cargo.toml`).

fn main() {}
