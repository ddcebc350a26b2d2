//! Device numbers, kept as (major, minor) and written as `major:minor`.
//!
//! The kernel uses two encodings: tracepoints carry `major << 20 | minor`, while
//! `stat()` returns the glibc `makedev` encoding. Both convert to [`Dev`] here so
//! the rest of the code never mixes them.

use std::fmt;
use std::str::FromStr;

use serde::{Deserialize, Deserializer, Serialize, Serializer};

/// A device number.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct Dev {
    pub major: u32,
    pub minor: u32,
}

impl Dev {
    pub const fn new(major: u32, minor: u32) -> Dev {
        Dev { major, minor }
    }

    /// From the encoding inside tracepoint records (`major << 20 | minor`).
    pub const fn from_kernel(raw: u32) -> Dev {
        Dev { major: raw >> 20, minor: raw & ((1 << 20) - 1) }
    }

    /// To the encoding inside tracepoint records, e.g. for tracefs filters.
    pub const fn to_kernel(self) -> u32 {
        (self.major << 20) | (self.minor & ((1 << 20) - 1))
    }

    /// From `st_dev` / `st_rdev` as `stat()` returns them (glibc `makedev`).
    pub const fn from_user(raw: u64) -> Dev {
        let major = ((raw >> 32) & 0xffff_f000) | ((raw >> 8) & 0x0000_0fff);
        let minor = ((raw >> 12) & 0xffff_ff00) | (raw & 0x0000_00ff);
        Dev { major: major as u32, minor: minor as u32 }
    }

    /// To the `st_dev` encoding.
    pub const fn to_user(self) -> u64 {
        let major = self.major as u64;
        let minor = self.minor as u64;
        ((major & 0xffff_f000) << 32)
            | ((major & 0x0000_0fff) << 8)
            | ((minor & 0xffff_ff00) << 12)
            | (minor & 0x0000_00ff)
    }
}

impl fmt::Display for Dev {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}:{}", self.major, self.minor)
    }
}

/// A device number that is not `major:minor`.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("not a device number (expected MAJOR:MINOR): {0:?}")]
pub struct ParseDevError(String);

impl FromStr for Dev {
    type Err = ParseDevError;

    fn from_str(s: &str) -> Result<Dev, ParseDevError> {
        let err = || ParseDevError(s.to_owned());
        let (major, minor) = s.split_once(':').ok_or_else(err)?;
        Ok(Dev {
            major: major.trim().parse().map_err(|_| err())?,
            minor: minor.trim().parse().map_err(|_| err())?,
        })
    }
}

impl Serialize for Dev {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        serializer.collect_str(self)
    }
}

impl<'de> Deserialize<'de> for Dev {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Dev, D::Error> {
        let s = String::deserialize(deserializer)?;
        s.parse().map_err(serde::de::Error::custom)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn kernel_encoding_of_vda() {
        assert_eq!(Dev::from_kernel(266_338_304), Dev::new(254, 0));
        assert_eq!(Dev::new(254, 0).to_kernel(), 266_338_304);
    }

    #[test]
    fn user_encoding_of_vda_and_large_minors() {
        assert_eq!(Dev::from_user(65024), Dev::new(254, 0));
        for dev in [Dev::new(7, 0), Dev::new(259, 3), Dev::new(8, 300), Dev::new(4095, 1 << 19)] {
            assert_eq!(Dev::from_user(dev.to_user()), dev);
            assert_eq!(Dev::from_kernel(dev.to_kernel()), dev);
        }
    }

    #[test]
    fn text_form() {
        assert_eq!(Dev::new(8, 16).to_string(), "8:16");
        assert_eq!("8:16".parse::<Dev>(), Ok(Dev::new(8, 16)));
        assert!("8".parse::<Dev>().is_err());
        assert!("a:b".parse::<Dev>().is_err());
    }
}
