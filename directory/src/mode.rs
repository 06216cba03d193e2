//! The routing mode, chosen explicitly at start (DIR-2).
//!
//! Defaults, all of them:
//!
//! - the port name a `config_center_file` router selects when none is given
//!   is [`DEFAULT_PORT_NAME`] (`invoke`).
//!
//! There is no default mode: a router is told `direct` or
//! `config_center_file`, and nothing is inferred from which paths or files
//! happen to exist.

use std::fmt;
use std::path::PathBuf;
use std::str::FromStr;

use crate::error::ConfigError;
use crate::names::PortName;
use crate::path::quote;
use crate::source::FsSource;

/// The port name a `config_center_file` router selects unless configured
/// otherwise.
pub const DEFAULT_PORT_NAME: &str = "invoke";

/// How a router finds the network destination of a release.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum Mode {
    /// `direct`: invoke the canonical endpoint of the target.
    Direct,
    /// `config_center_file`: invoke the one ready instance a directory
    /// document lists for the target.
    ConfigCenterFile,
}

impl Mode {
    /// The mode as written in configuration.
    #[must_use]
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Direct => "direct",
            Self::ConfigCenterFile => "config_center_file",
        }
    }
}

impl FromStr for Mode {
    type Err = ConfigError;

    /// Accepts exactly `direct` or `config_center_file`: no other spelling,
    /// case or surrounding whitespace.
    fn from_str(text: &str) -> Result<Self, Self::Err> {
        match text {
            "direct" => Ok(Self::Direct),
            "config_center_file" => Ok(Self::ConfigCenterFile),
            other => Err(ConfigError::UnknownMode {
                given: quote(other),
            }),
        }
    }
}

impl fmt::Display for Mode {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// A mode with everything it needs; the argument of
/// [`Router::start`](crate::Router::start).
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub enum Routing<S = FsSource> {
    /// Invoke the canonical endpoint; no directory is read.
    Direct,
    /// Invoke the instance the document from `source` lists.
    ConfigCenterFile(FileRouting<S>),
}

impl<S> Routing<S> {
    /// The mode this routing is for.
    #[must_use]
    pub fn mode(&self) -> Mode {
        match self {
            Self::Direct => Mode::Direct,
            Self::ConfigCenterFile(_) => Mode::ConfigCenterFile,
        }
    }
}

/// What a `config_center_file` router reads and selects.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FileRouting<S = FsSource> {
    /// The one source of the directory document.
    pub source: S,
    /// The port every selected endpoint must have.
    pub port_name: PortName,
}

/// Start-up settings as an operator gives them, before they are checked
/// against each other.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RoutingParts {
    /// The mode, always given.
    pub mode: Mode,
    /// The directory document's path; required in file mode, refused in
    /// direct mode.
    pub directory: Option<PathBuf>,
    /// The port name; refused in direct mode, [`DEFAULT_PORT_NAME`] in file
    /// mode when absent.
    pub port_name: Option<PortName>,
}

impl Routing<FsSource> {
    /// Checks that the parts fit the chosen mode. A part the mode would
    /// ignore is refused rather than ignored, so that a configuration never
    /// says more than the router does.
    pub fn from_parts(parts: RoutingParts) -> Result<Self, ConfigError> {
        match parts.mode {
            Mode::Direct => {
                if parts.directory.is_some() {
                    return Err(ConfigError::DirectoryWithDirectMode);
                }
                if parts.port_name.is_some() {
                    return Err(ConfigError::PortNameWithDirectMode);
                }
                Ok(Self::Direct)
            }
            Mode::ConfigCenterFile => {
                let path = parts.directory.ok_or(ConfigError::DirectoryMissing)?;
                let port_name = match parts.port_name {
                    Some(port_name) => port_name,
                    None => default_port_name(),
                };
                Ok(Self::ConfigCenterFile(FileRouting {
                    source: FsSource::new(path),
                    port_name,
                }))
            }
        }
    }
}

/// [`DEFAULT_PORT_NAME`] as a [`PortName`].
#[must_use]
pub fn default_port_name() -> PortName {
    match PortName::new(DEFAULT_PORT_NAME) {
        Ok(port_name) => port_name,
        // The constant is checked by a unit test below.
        Err(_) => unreachable!("DEFAULT_PORT_NAME is a valid port name"),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_default_port_name_is_valid() {
        assert_eq!(default_port_name().as_str(), DEFAULT_PORT_NAME);
    }
}
