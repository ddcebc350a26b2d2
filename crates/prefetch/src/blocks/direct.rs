//! A device or image file opened for direct I/O (O_DIRECT): reads go to the device and leave
//! no copy in the page cache. Buffers are aligned to 4 KiB, as direct I/O requires.

use std::fs::File;
use std::io::{Seek, SeekFrom};
use std::os::unix::fs::{FileExt, OpenOptionsExt};
use std::path::{Path, PathBuf};

use super::{ALIGN, BlockError};

/// An open device (or image file) and its size.
#[derive(Debug)]
pub struct DirectDevice {
    file: File,
    path: PathBuf,
    size_bytes: u64,
}

/// A heap buffer with a 4 KiB-aligned window of `len` bytes.
pub struct AlignedBuffer {
    storage: Vec<u8>,
    start: usize,
    len: usize,
}

impl AlignedBuffer {
    fn new(len: usize) -> AlignedBuffer {
        let align = ALIGN as usize;
        let storage = vec![0u8; len + align];
        let start = storage.as_ptr().align_offset(align);
        AlignedBuffer { storage, start, len }
    }

    fn window(&mut self, len: usize) -> &mut [u8] {
        &mut self.storage[self.start..self.start + len.min(self.len)]
    }
}

impl DirectDevice {
    /// Opens `path` read-only with O_DIRECT; its size is where a seek to the end lands (a
    /// block device's size, or an image file's).
    pub fn open(path: &Path) -> Result<DirectDevice, BlockError> {
        let mut file = std::fs::OpenOptions::new()
            .read(true)
            .custom_flags(libc::O_DIRECT)
            .open(path)
            .map_err(|e| BlockError::file(path, e))?;
        let size_bytes = file.seek(SeekFrom::End(0)).map_err(|e| BlockError::file(path, e))?;
        Ok(DirectDevice { file, path: path.to_owned(), size_bytes })
    }

    pub fn path(&self) -> &Path {
        &self.path
    }

    pub fn size_bytes(&self) -> u64 {
        self.size_bytes
    }

    /// A buffer for reads of up to `len` bytes.
    pub fn buffer(&self, len: usize) -> AlignedBuffer {
        AlignedBuffer::new(len)
    }

    /// Reads `len` bytes at `offset` (fewer at the device's end) into `buffer`, returning them.
    pub fn read_block<'b>(
        &self,
        offset: u64,
        buffer: &'b mut AlignedBuffer,
        len: usize,
    ) -> Result<&'b [u8], BlockError> {
        let window = buffer.window(len);
        let mut done = 0;
        while done < window.len() {
            let at = offset + done as u64;
            match self.file.read_at(&mut window[done..], at) {
                Ok(0) => break,
                Ok(n) => done += n,
                Err(e) if e.kind() == std::io::ErrorKind::Interrupted => {}
                Err(source) => {
                    return Err(BlockError::Read { device: self.path.clone(), offset: at, source });
                }
            }
        }
        Ok(&window[..done])
    }
}
