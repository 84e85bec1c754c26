//! Logging from a policy. In a component the line goes to the host, which re-emits it under
//! target `policy` with the policy's name; natively (unit tests) it goes to stderr.

pub use crate::bindings::wasmsched::policy::host::Level;

/// Emit one log line. Prefer the macros: [`crate::info!`], [`crate::warn!`], …
pub fn emit(level: Level, message: &str) {
    #[cfg(target_arch = "wasm32")]
    crate::bindings::wasmsched::policy::host::log(level, message);
    #[cfg(not(target_arch = "wasm32"))]
    eprintln!("[policy {level:?}] {message}");
}

/// Log at `info` level, `format!`-style.
#[macro_export]
macro_rules! info {
    ($($arg:tt)*) => { $crate::log::emit($crate::log::Level::Info, &format!($($arg)*)) };
}

/// Log at `warn` level, `format!`-style.
#[macro_export]
macro_rules! warn {
    ($($arg:tt)*) => { $crate::log::emit($crate::log::Level::Warn, &format!($($arg)*)) };
}

/// Log at `debug` level, `format!`-style.
#[macro_export]
macro_rules! debug {
    ($($arg:tt)*) => { $crate::log::emit($crate::log::Level::Debug, &format!($($arg)*)) };
}

/// Log at `error` level, `format!`-style.
#[macro_export]
macro_rules! error {
    ($($arg:tt)*) => { $crate::log::emit($crate::log::Level::Error, &format!($($arg)*)) };
}
