//! Copies raw ring-buffer pages from every `per_cpu/cpuN/trace_pipe_raw` of the
//! recorder's instances into the spool, one page per read, without decoding them.
//! The thread sleeps in poll(2) until a buffer is `buffer_percent` full, and drains
//! every buffer once a second so that a killed recorder loses at most a second.

use std::fs::File;
use std::io::{ErrorKind, Read, Write};
use std::os::fd::AsFd;
use std::os::unix::fs::OpenOptionsExt;
use std::path::PathBuf;
use std::sync::Arc;

use nix::poll::{PollFd, PollFlags, PollTimeout, poll};

use crate::capture::Stop;
use crate::error::{IoContext, Result};

/// One per-CPU buffer and the spool file its pages go to.
pub struct PageSource {
    pub pipe: File,
    pub pipe_path: PathBuf,
    pub out: File,
    pub out_path: PathBuf,
    pub pages: u64,
}

impl PageSource {
    pub fn open(pipe_path: PathBuf, out: File, out_path: PathBuf) -> Result<PageSource> {
        let pipe = std::fs::OpenOptions::new()
            .read(true)
            .custom_flags(nix::fcntl::OFlag::O_NONBLOCK.bits())
            .open(&pipe_path)
            .at(&pipe_path)?;
        Ok(PageSource { pipe, pipe_path, out, out_path, pages: 0 })
    }

    /// Reads pages until the buffer has nothing more to give now.
    fn drain(&mut self, buf: &mut [u8]) -> Result<()> {
        loop {
            match self.pipe.read(buf) {
                Ok(0) => return Ok(()),
                Ok(n) => {
                    buf[n..].fill(0);
                    self.out.write_all(buf).at(&self.out_path)?;
                    self.pages += 1;
                }
                Err(e) if e.kind() == ErrorKind::WouldBlock || e.kind() == ErrorKind::Interrupted => {
                    return Ok(());
                }
                Err(e) => return Err(e).at(&self.pipe_path),
            }
        }
    }
}

/// Runs until `stop` fires, then drains every buffer a last time (the caller turns
/// tracing off first). Returns the number of pages copied.
pub fn run(mut sources: Vec<PageSource>, page_size: usize, stop: Arc<Stop>) -> Result<u64> {
    let mut buf = vec![0u8; page_size];
    loop {
        let ready: Vec<bool>;
        let stopped;
        {
            let mut fds: Vec<PollFd> =
                sources.iter().map(|s| PollFd::new(s.pipe.as_fd(), PollFlags::POLLIN)).collect();
            fds.push(PollFd::new(stop.fd(), PollFlags::POLLIN));
            let n = match poll(&mut fds, PollTimeout::from(1000u16)) {
                Ok(n) => n,
                Err(nix::errno::Errno::EINTR) => continue,
                Err(e) => return Err(std::io::Error::from(e)).at("poll"),
            };
            let timed_out = n == 0;
            let is_ready = |f: &PollFd| f.revents().is_some_and(|r| !r.is_empty());
            stopped = fds.last().is_some_and(is_ready);
            ready = fds[..sources.len()].iter().map(|f| timed_out || is_ready(f)).collect();
        }
        for (source, ready) in sources.iter_mut().zip(ready) {
            if ready || stopped {
                source.drain(&mut buf)?;
            }
        }
        if stopped {
            break;
        }
    }
    for s in &mut sources {
        s.out.flush().at(&s.out_path)?;
    }
    Ok(sources.iter().map(|s| s.pages).sum())
}
