//! Fixtures shared by the test files: documents and targets built from
//! options structs with defaults, a recording transport, and a source
//! wrapper that counts reads of any source.

// Each test file uses a different part of this module.
#![allow(dead_code)]

use std::cell::Cell;
use std::fs;
use std::path::Path;
use std::rc::Rc;
use std::time::{Duration, Instant};

use connreg_directory::{
    DocumentSource, FileRouting, NetworkDestination, PortName, ReleaseTarget, ResolvedTarget,
    Router, Routing, SourceError, Transport, TransportError,
};
use serde_json::{Value, json};

/// The release every fixture routes unless told otherwise.
pub(crate) fn billing_release() -> Value {
    json!({
        "agent_id": "billing-agent",
        "card_version": "4",
        "release_id": "billing-agent-2026-08-08.1",
        "card_digest": "sha256:5d41402abc4b2a76b9719d911017c592",
        "capability": "invoice.create",
        "credential_audience": "https://billing-agent.agents.example"
    })
}

/// A second, unrelated release.
pub(crate) fn search_release() -> Value {
    json!({
        "agent_id": "search-agent",
        "card_version": "2",
        "release_id": "search-agent-2026-08-01.3",
        "card_digest": "sha256:7d793037a0760186574b0282f2f435e7",
        "capability": "documents.search",
        "credential_audience": "https://search-agent.agents.example"
    })
}

/// One instance of a directory target.
#[derive(Debug, Clone)]
pub(crate) struct InstanceOptions {
    pub(crate) instance_id: String,
    pub(crate) address: String,
    pub(crate) protocol: String,
    pub(crate) ready: bool,
    pub(crate) ports: Vec<(String, u16)>,
}

impl Default for InstanceOptions {
    fn default() -> Self {
        Self {
            instance_id: "billing-agent-a".into(),
            address: "10.0.4.17".into(),
            protocol: "tcp".into(),
            ready: true,
            ports: vec![("invoke".into(), 8080), ("metrics".into(), 9090)],
        }
    }
}

impl InstanceOptions {
    /// A ready TCP instance with the default ports.
    pub(crate) fn ready(instance_id: &str, address: &str) -> Self {
        Self {
            instance_id: instance_id.into(),
            address: address.into(),
            ..Self::default()
        }
    }

    pub(crate) fn to_json(&self) -> Value {
        let ports: serde_json::Map<String, Value> = self
            .ports
            .iter()
            .map(|(name, port)| (name.clone(), json!(port)))
            .collect();
        json!({
            "instance_id": self.instance_id,
            "address": self.address,
            "protocol": self.protocol,
            "ready": self.ready,
            "ports": ports,
        })
    }
}

/// A directory target: a release and its instances.
pub(crate) fn target_json(release: Value, instances: &[InstanceOptions]) -> Value {
    json!({
        "release": release,
        "instances": instances.iter().map(InstanceOptions::to_json).collect::<Vec<_>>(),
    })
}

/// A whole document from its targets.
pub(crate) fn document_json(targets: Vec<Value>) -> Value {
    json!({
        "version": "router-instance-directory.v1",
        "targets": targets,
    })
}

/// A document listing the billing release with `instances`.
pub(crate) fn billing_document(instances: &[InstanceOptions]) -> Vec<u8> {
    to_bytes(&document_json(vec![target_json(
        billing_release(),
        instances,
    )]))
}

/// A document whose one ready billing instance is `instance_id` at `address`.
pub(crate) fn one_ready(instance_id: &str, address: &str) -> Vec<u8> {
    billing_document(&[InstanceOptions::ready(instance_id, address)])
}

pub(crate) fn to_bytes(value: &Value) -> Vec<u8> {
    serde_json::to_vec_pretty(value).expect("a JSON value serialises")
}

/// Bytes that are no longer a valid document: the first half of one.
pub(crate) fn corrupted() -> Vec<u8> {
    let bytes = one_ready("billing-agent-a", "10.0.4.17");
    bytes[..bytes.len() / 2].to_vec()
}

/// The authorized billing target, canonically at
/// `billing-agent.agents.example:443`.
pub(crate) fn billing_target() -> ReleaseTarget {
    release_target(billing_release())
}

/// The authorized search target.
pub(crate) fn search_target() -> ReleaseTarget {
    release_target(search_release())
}

pub(crate) fn release_target(release: Value) -> ReleaseTarget {
    let value = json!({
        "release": release,
        "canonical_endpoint": { "address": "billing-agent.agents.example", "port": 443 },
    });
    ReleaseTarget::parse(&to_bytes(&value)).expect("the fixture target is valid")
}

pub(crate) fn port_name(name: &str) -> PortName {
    PortName::new(name).expect("the fixture port name is valid")
}

/// File-mode routing over `source` with the `invoke` port.
pub(crate) fn file_routing<S: DocumentSource>(source: S) -> Routing<S> {
    Routing::ConfigCenterFile(FileRouting {
        source,
        port_name: port_name("invoke"),
    })
}

/// A started file-mode router over `source`.
pub(crate) fn file_router<S: DocumentSource>(source: S) -> Router<S> {
    Router::start(file_routing(source)).expect("the fixture document is valid")
}

/// `address:port` of a resolved target.
pub(crate) fn destination_of(resolved: &ResolvedTarget) -> String {
    resolved.destination().to_string()
}

/// Wraps any source and counts its reads.
pub(crate) struct CountingSource<S> {
    inner: S,
    reads: Cell<u64>,
}

impl<S> CountingSource<S> {
    pub(crate) fn new(inner: S) -> Self {
        Self {
            inner,
            reads: Cell::new(0),
        }
    }

    pub(crate) fn reads(&self) -> u64 {
        self.reads.get()
    }
}

impl<S: DocumentSource> DocumentSource for CountingSource<S> {
    fn read_document(&self) -> Result<Vec<u8>, SourceError> {
        self.reads.set(self.reads.get() + 1);
        self.inner.read_document()
    }

    fn location(&self) -> &str {
        self.inner.location()
    }
}

/// Replaces the file at `path` the way a deployment should: write a new
/// file beside it, then rename it over the old one.
pub(crate) fn replace_file(path: &Path, bytes: &[u8]) {
    let staging = path.with_extension("staging");
    fs::write(&staging, bytes).expect("write the staging file");
    fs::rename(&staging, path).expect("rename over the document");
}

/// One message a transport carried.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Carried {
    Send {
        destination: NetworkDestination,
        audience: String,
        frame: Vec<u8>,
    },
    Cancel {
        destination: NetworkDestination,
    },
}

/// A clock a test moves by hand: it reads a fixed instant plus whatever
/// time the test (or a transport) has let pass.
#[derive(Debug, Clone)]
pub(crate) struct FakeClock {
    base: Instant,
    elapsed: Rc<Cell<Duration>>,
}

impl Default for FakeClock {
    fn default() -> Self {
        Self {
            base: Instant::now(),
            elapsed: Rc::default(),
        }
    }
}

impl FakeClock {
    pub(crate) fn now(&self) -> Instant {
        self.base + self.elapsed.get()
    }

    pub(crate) fn advance(&self, by: Duration) {
        self.elapsed.set(self.elapsed.get() + by);
    }
}

/// A transport that records what it carries and can fail cancellations.
#[derive(Debug, Default)]
pub(crate) struct RecordingTransport {
    pub(crate) carried: Vec<Carried>,
    /// How many cancellation attempts fail before one succeeds.
    pub(crate) cancel_failures: u32,
    /// The clock each cancellation attempt moves by `cancel_cost`.
    pub(crate) clock: FakeClock,
    /// How long each cancellation attempt takes on `clock`.
    pub(crate) cancel_cost: Duration,
    /// The time left each cancellation attempt was given.
    pub(crate) time_left: Vec<Duration>,
}

impl RecordingTransport {
    /// Every destination the transport was asked to reach.
    pub(crate) fn destinations(&self) -> Vec<String> {
        self.carried
            .iter()
            .map(|carried| match carried {
                Carried::Send { destination, .. } | Carried::Cancel { destination } => {
                    destination.to_string()
                }
            })
            .collect()
    }

    pub(crate) fn cancel_attempts(&self) -> usize {
        self.carried
            .iter()
            .filter(|carried| matches!(carried, Carried::Cancel { .. }))
            .count()
    }
}

impl Transport for RecordingTransport {
    fn send(&mut self, target: &ResolvedTarget, frame: &[u8]) -> Result<(), TransportError> {
        self.carried.push(Carried::Send {
            destination: target.destination().clone(),
            audience: target.target().release.credential_audience.clone(),
            frame: frame.to_vec(),
        });
        Ok(())
    }

    fn cancel(
        &mut self,
        target: &ResolvedTarget,
        time_left: Duration,
    ) -> Result<(), TransportError> {
        self.carried.push(Carried::Cancel {
            destination: target.destination().clone(),
        });
        self.time_left.push(time_left);
        self.clock.advance(self.cancel_cost);
        if self.cancel_failures > 0 {
            self.cancel_failures -= 1;
            return Err(TransportError::new("connection refused"));
        }
        Ok(())
    }
}

/// Makes the document at `path` unreadable to this process and says how.
///
/// An unprivileged process cannot read a file of mode 000. A privileged one
/// (root, as in many containers) ignores mode bits, so then the path is
/// replaced by a symbolic link to a write-only kernel file, which the kernel
/// refuses to open for reading even to root. If neither works the test
/// fails loudly rather than passing without having checked anything.
#[cfg(unix)]
pub(crate) fn make_unreadable(path: &Path) -> &'static str {
    use std::io::ErrorKind;
    use std::os::unix::fs::{PermissionsExt, symlink};

    fs::set_permissions(path, fs::Permissions::from_mode(0o000)).expect("chmod 000");
    if matches!(fs::read(path), Err(error) if error.kind() == ErrorKind::PermissionDenied) {
        return "file mode 000";
    }
    const WRITE_ONLY_KERNEL_FILES: [&str; 3] = [
        "/proc/sys/vm/compact_memory",
        "/proc/sys/vm/drop_caches",
        "/proc/sys/net/ipv4/route/flush",
    ];
    for candidate in WRITE_ONLY_KERNEL_FILES {
        if matches!(fs::read(candidate), Err(error) if error.kind() == ErrorKind::PermissionDenied)
        {
            fs::remove_file(path).expect("remove the document");
            symlink(candidate, path).expect("link the document to a write-only file");
            eprintln!(
                "note: running privileged, mode 000 does not stop reads; \
                 the document is a link to {candidate} instead"
            );
            return "link to a write-only kernel file";
        }
    }
    panic!(
        "cannot make a file unreadable here: this process ignores mode 000 and none of \
         {WRITE_ONLY_KERNEL_FILES:?} refuses reads; run the tests unprivileged"
    );
}
