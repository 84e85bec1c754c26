//! The guests' WIT bindings, generated once and committed: the SDK's (`sdk/src/bindings/`) and
//! those of the two components that use wit-bindgen directly, the hostile fixture of another
//! world and the policy of contract 0.1.0. Committed, no policy build compiles wit-bindgen's
//! macro and the WIT parser and encoder under it (a fifth of the shipped policies' build), and
//! an author reads the types the SDK hands out in a file. This test writes each again with the
//! generator the macro would have run, at the version of the runtime half the guests link
//! (`Cargo.lock` holds both), and fails when the committed file differs.

use wasmsched_tests::common::{committed, repo};
use wit_bindgen_core::wit_parser::Resolve;
use wit_bindgen_core::{Files, WorldGenerator};
use wit_bindgen_rust::Opts;

/// One committed bindings file: where it is, the WIT folder and world it is written from
/// (paths from the repository's root), and the generator's options.
struct Bindings {
    file: &'static str,
    wit: &'static str,
    world: &'static str,
    opts: fn() -> Opts,
}

const BINDINGS: [Bindings; 3] = [
    Bindings {
        file: "sdk/src/bindings/generated.rs",
        wit: "wit",
        world: "policy-plugin",
        // The export macro public and named apart, for the SDK's `export_policy!` to call; every
        // type generated, the ones no function of the world takes included; records that
        // compare and serialize, for the SDK's tests and a policy's state.
        opts: || Opts {
            pub_export_macro: true,
            export_macro_name: Some("__export_policy_plugin".into()),
            default_bindings_module: Some("wasmsched_sdk::bindings".into()),
            generate_all: true,
            additional_derive_attributes: ["PartialEq", "serde::Serialize", "serde::Deserialize"]
                .map(String::from)
                .into(),
            ..Opts::default()
        },
    },
    Bindings {
        file: "policies/hostile/alien/src/bindings.rs",
        wit: "policies/hostile/alien/wit",
        world: "policy-plugin",
        opts: Opts::default,
    },
    Bindings {
        file: "tests/fixtures/contract-0-1/src/bindings.rs",
        wit: "wit/0.1.0",
        world: "policy-plugin",
        opts: || Opts { pub_export_macro: true, ..Opts::default() },
    },
];

/// What the generator writes for `b`, as the committed file holds it.
fn generate(b: &Bindings) -> String {
    let mut resolve = Resolve::default();
    let (package, _) = resolve.push_path(repo().join(b.wit)).unwrap_or_else(|e| panic!("{}: {e:#}", b.wit));
    let world = resolve.select_world(&[package], Some(b.world)).unwrap_or_else(|e| panic!("{}: {e:#}", b.world));
    let mut files = Files::default();
    Opts { format: true, ..(b.opts)() }
        .build()
        .generate(&mut resolve, world, &mut files)
        .unwrap_or_else(|e| panic!("generating {}: {e:#}", b.file));
    let [(_, text)] = files.iter().collect::<Vec<_>>()[..] else { panic!("the generator writes one file") };
    String::from_utf8(text.to_vec()).expect("generated Rust is UTF-8")
}

#[test]
fn the_committed_bindings_are_what_wit_bindgen_generates_from_the_wit() {
    for b in &BINDINGS {
        committed(b.file, &generate(b), "the WIT or wit-bindgen changed", "bindings");
    }
}
