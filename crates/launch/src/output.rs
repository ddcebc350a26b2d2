//! The command's stdout or stderr read through a pipe: split into lines for
//! `output:REGEX` readiness and, when asked, copied line by line to our own stream.

use std::io::Write;
use std::os::fd::{AsFd, BorrowedFd, OwnedFd};

/// Lines longer than this are cut, so a command printing without newlines cannot
/// make us buffer without bound.
const MAX_LINE: usize = 64 * 1024;

/// Which of our streams a pipe is copied to.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Stream {
    Stdout,
    Stderr,
}

pub(crate) struct OutputPipe {
    fd: OwnedFd,
    echo: Option<Stream>,
    pending: Vec<u8>,
    eof: bool,
}

impl OutputPipe {
    /// `fd` is the read end, already non-blocking.
    pub(crate) fn new(fd: OwnedFd, echo: Option<Stream>) -> OutputPipe {
        OutputPipe { fd, echo, pending: Vec::new(), eof: false }
    }

    pub(crate) fn fd(&self) -> BorrowedFd<'_> {
        self.fd.as_fd()
    }

    pub(crate) fn is_eof(&self) -> bool {
        self.eof
    }

    /// Reads what is available and returns the complete lines (without their
    /// newline); at end of file, the last unterminated line too.
    pub(crate) fn read_lines(&mut self) -> Vec<String> {
        let mut buf = [0u8; 16 * 1024];
        loop {
            match crate::sys::read(self.fd.as_fd(), &mut buf) {
                Ok(0) => {
                    self.eof = true;
                    break;
                }
                Ok(n) => self.pending.extend_from_slice(&buf[..n]),
                Err(e) if e.kind() == std::io::ErrorKind::Interrupted => continue,
                Err(_) => break,
            }
        }
        let mut lines = Vec::new();
        while let Some(end) = self.pending.iter().position(|&b| b == b'\n') {
            let line: Vec<u8> = self.pending.drain(..=end).collect();
            lines.push(self.emit(line));
        }
        if self.pending.len() > MAX_LINE || (self.eof && !self.pending.is_empty()) {
            let line = std::mem::take(&mut self.pending);
            lines.push(self.emit(line));
        }
        lines
    }

    fn emit(&self, raw: Vec<u8>) -> String {
        match self.echo {
            Some(Stream::Stdout) => drop(std::io::stdout().lock().write_all(&raw)),
            Some(Stream::Stderr) => drop(std::io::stderr().lock().write_all(&raw)),
            None => {}
        }
        let text = String::from_utf8_lossy(&raw);
        text.trim_end_matches(['\n', '\r']).to_owned()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn splits_lines_across_reads_and_flushes_the_last_at_eof() {
        let (read, write) = crate::sys::pipe(true).unwrap();
        let mut pipe = OutputPipe::new(read, None);
        crate::sys::write(write.as_fd(), b"one\r\ntw").unwrap();
        assert_eq!(pipe.read_lines(), ["one"]);
        crate::sys::write(write.as_fd(), b"o\nthree").unwrap();
        assert_eq!(pipe.read_lines(), ["two"]);
        assert!(!pipe.is_eof());
        drop(write);
        assert_eq!(pipe.read_lines(), ["three"]);
        assert!(pipe.is_eof());
        assert!(pipe.read_lines().is_empty());
    }

    #[test]
    fn cuts_endless_lines() {
        let (read, write) = crate::sys::pipe(true).unwrap();
        let mut pipe = OutputPipe::new(read, None);
        let chunk = vec![b'x'; 60 * 1024];
        crate::sys::write(write.as_fd(), &chunk).unwrap();
        assert!(pipe.read_lines().is_empty());
        let mut written = 0;
        while written < 8 * 1024 {
            written += crate::sys::write(write.as_fd(), &chunk[..8 * 1024 - written]).unwrap();
        }
        let lines = pipe.read_lines();
        assert_eq!(lines.len(), 1);
        assert_eq!(lines[0].len(), 68 * 1024);
    }
}
