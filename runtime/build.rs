//! Writes the conversions between the contract's plain types (core's) and bindgen's
//! (`src/current.rs` includes them).

use wasmsched_build_support::contract::Contract;

fn main() {
    let wit = wasmsched_build_support::workspace_root().join("wit");
    let contract = Contract::load(&wit, "types").unwrap_or_else(|e| panic!("reading {}: {e:#}", wit.display()));
    wasmsched_build_support::watch(&wit, contract.sources());
    let out = std::path::PathBuf::from(std::env::var("OUT_DIR").expect("cargo sets OUT_DIR"));
    std::fs::write(out.join("conversions.rs"), contract.conversions()).expect("writing the contract's conversions");
}
