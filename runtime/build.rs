//! Writes the conversions between the contract's plain types (core's) and bindgen's
//! (`src/current.rs` includes them).

fn main() {
    wasmsched_build_support::contract::write(
        "conversions.rs",
        wasmsched_build_support::contract::Contract::conversions,
    );
}
