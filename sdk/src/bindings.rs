//! The one place the SDK runs `wit_bindgen::generate!`. Authors never use this module; the
//! SDK re-exports what they need.

#![allow(missing_docs, reason = "generated code")]

wit_bindgen::generate!({
    path: "../wit",
    world: "policy-plugin",
    pub_export_macro: true,
    export_macro_name: "__export_policy_plugin",
    default_bindings_module: "wasmsched_sdk::bindings",
    generate_all,
    additional_derives: [PartialEq, serde::Serialize, serde::Deserialize],
});
