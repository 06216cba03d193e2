//! [`MemorySource`]: a directory document held in memory, for tests and
//! simulations, that can be replaced, corrupted, deleted or made unreadable
//! at any step and counts how often it is read.

use std::cell::{Cell, RefCell};

use crate::error::SourceError;
use crate::source::DocumentSource;

/// The in-memory state of the document.
#[derive(Debug, Clone, PartialEq, Eq)]
enum State {
    Present(Vec<u8>),
    Missing,
    Unreadable,
    Unavailable(String),
}

/// A document in memory. Not `Sync`: tests drive it from one thread, step
/// by step, and change it through a shared reference while a router holds
/// `&MemorySource`.
#[derive(Debug)]
pub struct MemorySource {
    location: String,
    state: RefCell<State>,
    reads: Cell<u64>,
}

/// The location a [`MemorySource`] reports unless told otherwise.
const DEFAULT_LOCATION: &str = "memory:router-instance-directory.v1.json";

impl MemorySource {
    /// A source holding `bytes`.
    pub fn new(bytes: impl Into<Vec<u8>>) -> Self {
        Self::with_state(State::Present(bytes.into()))
    }

    /// A source with no document.
    #[must_use]
    pub fn missing() -> Self {
        Self::with_state(State::Missing)
    }

    fn with_state(state: State) -> Self {
        Self {
            location: DEFAULT_LOCATION.to_owned(),
            state: RefCell::new(state),
            reads: Cell::new(0),
        }
    }

    /// Replaces the document with `bytes`, valid or not.
    pub fn replace(&self, bytes: impl Into<Vec<u8>>) {
        *self.state.borrow_mut() = State::Present(bytes.into());
    }

    /// Deletes the document.
    pub fn delete(&self) {
        *self.state.borrow_mut() = State::Missing;
    }

    /// Keeps the document but refuses permission to read it.
    pub fn deny_reads(&self) {
        *self.state.borrow_mut() = State::Unreadable;
    }

    /// Makes the document unavailable for `reason` (an I/O failure).
    pub fn make_unavailable(&self, reason: impl Into<String>) {
        *self.state.borrow_mut() = State::Unavailable(reason.into());
    }

    /// How many times the document has been read.
    #[must_use]
    pub fn reads(&self) -> u64 {
        self.reads.get()
    }
}

impl DocumentSource for MemorySource {
    fn read_document(&self) -> Result<Vec<u8>, SourceError> {
        self.reads.set(self.reads.get() + 1);
        match &*self.state.borrow() {
            State::Present(bytes) => Ok(bytes.clone()),
            State::Missing => Err(SourceError::NotFound),
            State::Unreadable => Err(SourceError::PermissionDenied),
            State::Unavailable(reason) => Err(SourceError::Unavailable {
                reason: reason.clone(),
            }),
        }
    }

    fn location(&self) -> &str {
        &self.location
    }
}
