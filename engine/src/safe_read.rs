//! Reading a file the user names (`session import -i`, `actor context import --input`, an
//! exported context given as `--context`): only a regular file, and only up to a cap, so that
//! a device (`/dev/zero`), a FIFO or a huge file is refused before anything is read.

use std::io::Read;
use std::path::Path;

/// The largest export file read: 64 MiB.
pub const IMPORT_MAX_BYTES: u64 = 64 * 1024 * 1024;

/// The text of `path` when it is a regular file (symlinks followed) of at most `cap` bytes.
///
/// # Errors
/// A sentence saying why: it cannot be read, is not a regular file, is over `cap` (also when
/// it grows while being read) or is not UTF-8.
pub fn read_regular_text(path: &Path, cap: u64) -> Result<String, String> {
    // Checked before opening: opening a FIFO waits for a writer.
    let meta = std::fs::metadata(path).map_err(|e| e.to_string())?;
    if !meta.is_file() {
        return Err("not a regular file".into());
    }
    let too_big = |len: u64| format!("{len} bytes is more than the {cap} bytes read from a file");
    if meta.len() > cap {
        return Err(too_big(meta.len()));
    }
    let file = std::fs::File::open(path).map_err(|e| e.to_string())?;
    let mut bytes = Vec::new();
    file.take(cap + 1)
        .read_to_end(&mut bytes)
        .map_err(|e| e.to_string())?;
    if bytes.len() as u64 > cap {
        return Err(too_big(bytes.len() as u64));
    }
    String::from_utf8(bytes).map_err(|_| "not UTF-8 text".into())
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
        assert!(read_regular_text(&big, 10).unwrap_err().contains("11 bytes"));
        assert_eq!(
            read_regular_text(Path::new("/dev/zero"), 10).unwrap_err(),
            "not a regular file"
        );
        assert_eq!(
            read_regular_text(dir.path(), 10).unwrap_err(),
            "not a regular file"
        );
    }
}
