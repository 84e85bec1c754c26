//! The workspace's integration tests: the host with real policy components, the hostile
//! fixtures included. They live in `tests/`; this library is empty.
