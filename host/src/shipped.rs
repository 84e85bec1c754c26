//! The policies built from this workspace and embedded in the binary, by name.

pub use wasmsched_shipped::Shipped;

/// Every shipped policy.
pub fn all() -> &'static [Shipped] {
    wasmsched_shipped::SHIPPED
}

/// The shipped policy named `name`.
pub fn by_name(name: &str) -> Option<&'static Shipped> {
    wasmsched_shipped::by_name(name)
}

/// The names of the shipped policies, for error messages.
pub fn names() -> Vec<&'static str> {
    all().iter().map(|s| s.name).collect()
}
