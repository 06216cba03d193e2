//! Where a directory document comes from: the [`DocumentSource`] contract
//! and [`FsSource`], the file a `config_center_file` router reads.

use std::fs::File;
use std::io::Read;
use std::path::{Path, PathBuf};

use crate::error::SourceError;
use crate::limits::DOCUMENT_BYTES_MAX;

/// Hands over the current bytes of one directory document.
///
/// A router calls [`read_document`](Self::read_document) once per invocation
/// and once per readiness check, and never otherwise (DIR-3, DIR-6), so a
/// source that counts its reads can prove it. A source has exactly one
/// document: it never falls back to another location or to a copy it kept
/// (DIR-8).
pub trait DocumentSource {
    /// Reads the whole document once, as one snapshot.
    ///
    /// A source need not return more than
    /// [`DOCUMENT_BYTES_MAX`] + 1 bytes: anything past the bound is refused
    /// by the parser without being looked at.
    fn read_document(&self) -> Result<Vec<u8>, SourceError>;

    /// Where the document lives, for error messages.
    fn location(&self) -> &str;
}

impl<S: DocumentSource + ?Sized> DocumentSource for &S {
    fn read_document(&self) -> Result<Vec<u8>, SourceError> {
        (**self).read_document()
    }

    fn location(&self) -> &str {
        (**self).location()
    }
}

/// A document in a file, read whole on every call.
///
/// Deployments should replace the file atomically (write a new file, then
/// rename it over the old one): a reader that meets a half-written file
/// finds it malformed and fails closed, it never guesses.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FsSource {
    path: PathBuf,
    location: String,
}

impl FsSource {
    /// A source for the file at `path`. Nothing is read until asked.
    pub fn new(path: impl Into<PathBuf>) -> Self {
        let path = path.into();
        let location = path.display().to_string();
        Self { path, location }
    }

    /// The file's path.
    #[must_use]
    pub fn path(&self) -> &Path {
        &self.path
    }
}

impl DocumentSource for FsSource {
    fn read_document(&self) -> Result<Vec<u8>, SourceError> {
        let file = File::open(&self.path)?;
        let mut bytes = Vec::new();
        // One byte past the bound is enough to know the file is too large.
        let bytes_max = u64::try_from(DOCUMENT_BYTES_MAX + 1).unwrap_or(u64::MAX);
        file.take(bytes_max).read_to_end(&mut bytes)?;
        Ok(bytes)
    }

    fn location(&self) -> &str {
        &self.location
    }
}

#[cfg(test)]
mod tests {
    use std::io;

    use super::*;

    // spec: DIR-3
    #[test]
    fn operating_system_errors_map_to_the_failure_they_mean() {
        let denied = io::Error::from_raw_os_error(13); // EACCES
        assert_eq!(SourceError::from(denied), SourceError::PermissionDenied);
        let missing = io::Error::from_raw_os_error(2); // ENOENT
        assert_eq!(SourceError::from(missing), SourceError::NotFound);
        let broken = io::Error::from_raw_os_error(5); // EIO
        assert!(matches!(
            SourceError::from(broken),
            SourceError::Unavailable { .. }
        ));
    }
}
