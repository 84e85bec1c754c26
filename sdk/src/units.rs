//! Units in types: mixing cores, millicores and nanocpus is the classic scheduler bug.

use std::fmt;
use std::ops::{Add, AddAssign, Sub};

/// CPU in thousandths of a core.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct Millicores(pub u64);

impl Millicores {
    /// Whole or fractional cores, rounded to the nearest millicore (negative and NaN give 0).
    pub fn from_cores(cores: f64) -> Self {
        Millicores(if cores.is_finite() && cores > 0.0 { (cores * 1000.0).round() as u64 } else { 0 })
    }

    /// This amount in cores.
    pub fn cores(self) -> f64 {
        self.0 as f64 / 1000.0
    }

    /// This amount as a fraction of `total` (0 when `total` is zero).
    pub fn fraction_of(self, total: Millicores) -> f64 {
        if total.0 == 0 { 0.0 } else { self.0 as f64 / total.0 as f64 }
    }
}

impl fmt::Display for Millicores {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}m", self.0)
    }
}

/// Memory in bytes.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct Bytes(pub u64);

impl Bytes {
    /// `n` mebibytes.
    pub const fn mib(n: u64) -> Self {
        Bytes(n << 20)
    }

    /// `n` gibibytes.
    pub const fn gib(n: u64) -> Self {
        Bytes(n << 30)
    }
}

impl fmt::Display for Bytes {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}B", self.0)
    }
}

/// A duration or an instant, in seconds since the host's epoch.
#[derive(Clone, Copy, Debug, Default, PartialEq, PartialOrd)]
pub struct Seconds(pub f64);

impl Seconds {
    /// From milliseconds, as the contract carries time.
    pub fn from_millis(ms: u64) -> Self {
        Seconds(ms as f64 / 1000.0)
    }

    /// In whole milliseconds, rounded; negative and NaN give 0.
    pub fn as_millis(self) -> u64 {
        if self.0.is_finite() && self.0 > 0.0 { (self.0 * 1000.0).round() as u64 } else { 0 }
    }
}

impl Add for Seconds {
    type Output = Seconds;
    fn add(self, rhs: Seconds) -> Seconds {
        Seconds(self.0 + rhs.0)
    }
}

impl AddAssign for Seconds {
    fn add_assign(&mut self, rhs: Seconds) {
        self.0 += rhs.0;
    }
}

impl Sub for Seconds {
    type Output = Seconds;
    fn sub(self, rhs: Seconds) -> Seconds {
        Seconds(self.0 - rhs.0)
    }
}

impl fmt::Display for Seconds {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{:.3}s", self.0)
    }
}

/// A job's handle and a node's: the contract's rules' types, which the host's side names its
/// jobs and nodes by too. Each prints as its number.
pub use wasmsched_rules::{JobId, NodeId};

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn fractional_cores_round_to_the_nearest_millicore() {
        assert_eq!(Millicores::from_cores(1.2345), Millicores(1235));
        assert_eq!(Millicores::from_cores(-1.0), Millicores(0));
        assert_eq!(Millicores::from_cores(f64::NAN), Millicores(0));
        assert_eq!(Millicores(1500).cores(), 1.5);
    }

    #[test]
    fn fraction_of_an_empty_total_is_zero() {
        assert_eq!(Millicores(5).fraction_of(Millicores(0)), 0.0);
        assert_eq!(Millicores(2000).fraction_of(Millicores(8000)), 0.25);
    }

    #[test]
    fn seconds_convert_to_millis_and_back() {
        assert_eq!(Seconds::from_millis(1500), Seconds(1.5));
        assert_eq!(Seconds(0.0305).as_millis(), 31);
        assert_eq!(Seconds(-3.0).as_millis(), 0);
    }
}
