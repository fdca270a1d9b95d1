//! Reading a file the user names (`session import -i`, `actor context import --input`, an
//! exported context given as `--context`): only a regular file, and only up to a cap, so that
//! a device (`/dev/zero`), a FIFO or a huge file is refused before anything is read.

use std::io::Read;
use std::path::Path;

/// The largest export file read: 64 MiB.
pub const IMPORT_MAX_BYTES: u64 = 64 * 1024 * 1024;

/// Why a file was not read.
#[derive(Debug, thiserror::Error)]
pub enum ReadError {
    /// It could not be opened or read.
    #[error(transparent)]
    Io(#[from] std::io::Error),
    /// A directory, device, FIFO or socket.
    #[error("not a regular file")]
    NotRegular,
    /// Larger than the cap (also when it grew while being read).
    #[error("{len} bytes is more than the {cap} bytes read from a file")]
    TooBig {
        /// Its size.
        len: u64,
        /// The cap.
        cap: u64,
    },
    /// Its bytes are not UTF-8.
    #[error("not UTF-8 text")]
    NotUtf8,
}

/// The text of `path` when it is a regular file (symlinks followed) of at most `cap` bytes.
///
/// # Errors
/// [`ReadError`]: it cannot be read, is not a regular file, is over `cap` or is not UTF-8.
pub fn read_regular_text(path: &Path, cap: u64) -> Result<String, ReadError> {
    // Checked before opening: opening a FIFO waits for a writer.
    let meta = std::fs::metadata(path)?;
    if !meta.is_file() {
        return Err(ReadError::NotRegular);
    }
    if meta.len() > cap {
        return Err(ReadError::TooBig {
            len: meta.len(),
            cap,
        });
    }
    let mut bytes = Vec::new();
    std::fs::File::open(path)?
        .take(cap + 1)
        .read_to_end(&mut bytes)?;
    if bytes.len() as u64 > cap {
        return Err(ReadError::TooBig {
            len: bytes.len() as u64,
            cap,
        });
    }
    String::from_utf8(bytes).map_err(|_| ReadError::NotUtf8)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_regular_files_within_the_cap_are_read() {
        let dir = tempfile::tempdir().unwrap();
        let small = dir.path().join("small.json");
        std::fs::write(&small, "{}").unwrap();
        assert_eq!(read_regular_text(&small, 10).unwrap(), "{}");
        let big = dir.path().join("big.json");
        std::fs::File::create(&big)
            .unwrap()
            .set_len(11)
            .unwrap();
        assert!(read_regular_text(&big, 10).unwrap_err().to_string().contains("11 bytes"));
        assert_eq!(
            read_regular_text(Path::new("/dev/zero"), 10).unwrap_err().to_string(),
            "not a regular file"
        );
        assert_eq!(
            read_regular_text(dir.path(), 10).unwrap_err().to_string(),
            "not a regular file"
        );
    }
}
