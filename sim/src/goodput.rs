//! How fast an elastic job learns: goodput, as Pollux defines it and Sia's simulator runs it
//! (`wasmsched_goodput::goodput` has the model, shared with the policies that plan with it).

pub use wasmsched_goodput::goodput::{best_config, boundary, gain, speed, split};
