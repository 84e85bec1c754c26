//! The workspace's integration tests: the host with real policy components, the hostile
//! fixtures included. The tests live in `tests/`, in two binaries: `integration` (everything
//! that needs no engine) and `docker` (the live backend against a real Docker Engine, alone so
//! that its CPU measurements do not share the machine with the other tests). This library is
//! what both use: one runtime per process ([`common`]) and the long-running host's set-up
//! ([`live`]).

pub mod cdp;
pub mod common;
pub mod live;
pub mod page;
pub mod whatif;
