//! Reading the files a user names (flows, inputs, records, contexts) with a
//! size cap: `coxswain run /dev/zero` or `--input @/dev/zero` must end with an
//! error, not with the machine out of memory.

use std::io::Read;
use std::path::Path;

/// The most a command reads from one file or from standard input: far more
/// than any flow, input, record or context needs (a Run's status must fit
/// in etcd's 1.5 MiB object limit), far less than a machine's memory.
pub const READ_CAP: u64 = 16 * 1024 * 1024;

/// Why a file could not be read; each names the file and what it was for.
#[derive(Debug, thiserror::Error)]
pub enum ReadError {
    /// The file could not be opened or read.
    #[error("cannot read {what} {path}: {source}")]
    Io {
        /// What the file was for: `flow`, `input`, `record`, `context`.
        what: &'static str,
        /// The file as the user named it.
        path: String,
        /// What the operating system said.
        source: std::io::Error,
    },
    /// More than the cap was there to read; reading stopped at the cap.
    #[error("{what} {path} is larger than {}: reading stopped there", size(*cap))]
    TooLarge {
        /// What the file was for.
        what: &'static str,
        /// The file as the user named it.
        path: String,
        /// The cap in bytes.
        cap: u64,
    },
    /// A FIFO, socket or device where only a regular file will do: opening
    /// a FIFO blocks until someone writes, a device may never end.
    #[error("{what} {path} is not a regular file (it is a {kind})")]
    NotRegular {
        /// What the file was for.
        what: &'static str,
        /// The file as the user named it.
        path: String,
        /// What it is instead: `FIFO`, `socket`, `device`, `directory`.
        kind: &'static str,
    },
    /// The bytes are not UTF-8 text.
    #[error("{what} {path} is not UTF-8 text: {source}")]
    NotText {
        /// What the file was for.
        what: &'static str,
        /// The file as the user named it.
        path: String,
        /// Where the first invalid byte is.
        source: std::string::FromUtf8Error,
    },
}

/// The whole text of `path`, or an error once more than [`READ_CAP`] bytes
/// came (a device such as `/dev/zero` ends there too). `what` says what the
/// file is for, in the message.
pub fn read_text(path: &Path, what: &'static str) -> Result<String, ReadError> {
    let shown = path.display().to_string();
    let file = std::fs::File::open(path).map_err(|source| ReadError::Io {
        what,
        path: shown.clone(),
        source,
    })?;
    read_capped(file, what, shown, READ_CAP)
}

/// Like [`read_text`], but only a regular file (or a link to one) is
/// opened: `lint` reads what a pull request put in a repository, where a
/// FIFO would block it forever.
pub fn read_regular_text(path: &Path, what: &'static str) -> Result<String, ReadError> {
    let shown = path.display().to_string();
    let meta = std::fs::metadata(path).map_err(|source| ReadError::Io {
        what,
        path: shown.clone(),
        source,
    })?;
    if !meta.is_file() {
        let kind = kind_of(&meta.file_type());
        return Err(ReadError::NotRegular {
            what,
            path: shown,
            kind,
        });
    }
    read_text(path, what)
}

/// A word for a file type that is not a regular file.
fn kind_of(file_type: &std::fs::FileType) -> &'static str {
    use std::os::unix::fs::FileTypeExt;
    if file_type.is_dir() {
        "directory"
    } else if file_type.is_fifo() {
        "FIFO"
    } else if file_type.is_socket() {
        "socket"
    } else if file_type.is_block_device() || file_type.is_char_device() {
        "device"
    } else {
        "special file"
    }
}

/// All of standard input, with the same cap as [`read_text`].
pub fn read_stdin(what: &'static str) -> Result<String, ReadError> {
    read_capped(std::io::stdin().lock(), what, "-".into(), READ_CAP)
}

/// `16 MiB` for whole mebibytes, else `N bytes`.
fn size(bytes: u64) -> String {
    const MIB: u64 = 1024 * 1024;
    if bytes >= MIB && bytes.is_multiple_of(MIB) {
        format!("{} MiB", bytes / MIB)
    } else {
        format!("{bytes} bytes")
    }
}

/// Reads at most `cap + 1` bytes from `source`: one more than the cap
/// tells a source of exactly `cap` bytes from a larger one.
fn read_capped(
    source: impl Read,
    what: &'static str,
    path: String,
    cap: u64,
) -> Result<String, ReadError> {
    let mut bytes = Vec::new();
    let read = source
        .take(cap.saturating_add(1))
        .read_to_end(&mut bytes)
        .map_err(|source| ReadError::Io {
            what,
            path: path.clone(),
            source,
        })?;
    if read as u64 > cap {
        return Err(ReadError::TooLarge { what, path, cap });
    }
    String::from_utf8(bytes).map_err(|source| ReadError::NotText { what, path, source })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn exactly_the_cap_is_read_and_one_byte_more_is_refused() {
        let at_cap = read_capped(&b"abcd"[..], "flow", "f.yaml".into(), 4);
        assert_eq!(at_cap.ok().as_deref(), Some("abcd"));
        let over = read_capped(&b"abcde"[..], "flow", "f.yaml".into(), 4);
        let message = over.err().map(|e| e.to_string());
        assert_eq!(
            message.as_deref(),
            Some("flow f.yaml is larger than 4 bytes: reading stopped there")
        );
        assert_eq!(size(READ_CAP), "16 MiB");
    }
}
