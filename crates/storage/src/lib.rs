//! Emulated slow storage: a block device whose every request costs what a disk profile
//! says (a 5400 rpm laptop disk, an SD card, an IOPS-limited cloud volume, the doctor's
//! other `--disk` classes, or a profile file). A FUSE filesystem serves one disk image
//! from memory and answers each request when the profile's model says it completes; a
//! loop device with direct I/O on that image carries ext4. `EmulatedDisk` makes, fills,
//! mounts and tears down the whole stack; docs/storage.md says what it leaves out.
//! [`SlowMount`] is the other slow storage: a directory served through FUSE with a
//! fixed delay per request, like a network filesystem without attribute caching.

pub mod clock;
pub mod disk;
pub mod image;
pub mod leftovers;
pub mod profile;
pub mod slowfs;
pub mod stage;
mod sys;

pub use clock::{DeviceClock, Stats};
pub use disk::{EmulatedDisk, FillReport};
pub use profile::resolve;
pub use slowfs::{SlowMount, SlowStats};
pub use stage::StagedFiles;
pub use sys::{make_timely, scheduling_policy, terminate};

/// What can go wrong making or using an emulated disk.
#[derive(Debug, thiserror::Error)]
pub enum StorageError {
    /// A profile that cannot be used, said in one line.
    #[error("{0}")]
    Profile(String),
    #[error("{what}: {source}")]
    Io { what: String, source: std::io::Error },
    #[error("{0}")]
    Setup(String),
    #[error("{}: not a directory", .0.display())]
    NotADirectory(std::path::PathBuf),
}

impl StorageError {
    pub(crate) fn io(what: impl Into<String>) -> impl FnOnce(std::io::Error) -> StorageError {
        let what = what.into();
        move |source| StorageError::Io { what, source }
    }
}

pub type Result<T> = std::result::Result<T, StorageError>;
