//! A trace read as a list of happenings: one [`Item`] per line that says
//! something about hosts or actions, each with its time, host, call,
//! action and a sentence.

use std::collections::BTreeMap;
use std::io::BufRead;

use crate::trace::{Event, FaultEvent, Record, StartInfo, TRACE_FORMATS_READ, Violation};
use crate::wire::{Execution, Request, Response};

/// The lane of events that belong to no host (global faults, the heal,
/// violations of the store as a whole).
pub const WORLD: &str = "world";

/// What kind of happening an item is: how the page draws it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Kind {
    /// A call was sent (`rpc`).
    Call,
    /// A host answered (`reply`).
    Answer,
    /// The caller received the answer (`delivered`).
    Delivered,
    /// The caller gave up (`rpc_failed`).
    Failed,
    /// A provider side effect (`ledger`).
    SideEffect,
    /// An action started, ended, or was reconciled.
    Action,
    /// A fault started.
    Fault,
    /// A fault ended.
    FaultEnd,
    /// The heal.
    Heal,
    /// A violation.
    Violation,
}

/// One happening.
#[derive(Debug, Clone, serde::Serialize)]
pub struct Item {
    /// The trace line (1-based).
    pub line: u64,
    /// Simulated milliseconds.
    pub t: u64,
    /// What kind of happening.
    pub kind: Kind,
    /// The host it happened on ([`WORLD`] for none).
    pub host: String,
    /// The other host of a call or answer; the hosts a fault covers.
    pub peers: Vec<String>,
    /// The call, if any.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub rpc: Option<u64>,
    /// The action, if any.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub action: Option<String>,
    /// What happened, in words.
    pub text: String,
    /// An answer a fault dropped.
    #[serde(skip_serializing_if = "std::ops::Not::not")]
    pub lost: bool,
    /// The fault's kind, for faults.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub fault: Option<String>,
    /// What an answer says changed or names, that other actions' fates
    /// hang on: `catalog` for a publication, `replica:<id>` for a
    /// registration, drain, circuit close, a replica maintenance took
    /// offline, or the replica an action's route names, `action:<id>` for
    /// a reservation maintenance released. Empty for failed answers.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub touches: Vec<String>,
}

/// What a call would change if it succeeds (see [`Item::touches`]).
fn request_touches(req: &Request) -> Vec<String> {
    match req {
        Request::Publish { .. } => vec!["catalog".to_string()],
        Request::Drain { replica } => vec![format!("replica:{replica}")],
        Request::Register { params } => vec![format!("replica:{}", params.spec.id)],
        Request::CircuitClose { params } => vec![format!("replica:{}", params.replica)],
        _ => Vec::new(),
    }
}

/// What a successful answer names (see [`Item::touches`]).
fn response_touches(resp: &Response) -> Vec<String> {
    match resp {
        Response::Resolve { result: Ok(r) } => {
            vec![format!("replica:{}", r.assignment.destination.replica)]
        }
        Response::RouteGet {
            result: Ok(Some(r)),
        } => vec![format!("replica:{}", r.assignment.destination.replica)],
        Response::Maintain { result: Ok(m) } => m
            .expired
            .iter()
            .map(|r| format!("replica:{r}"))
            .chain(m.releases.iter().map(|r| format!("action:{}", r.action)))
            .collect(),
        _ => Vec::new(),
    }
}

/// A violation and the line that records it.
#[derive(Debug, Clone, serde::Serialize)]
pub struct Found {
    /// The `violation` line.
    pub line: u64,
    /// The violation.
    pub violation: Violation,
}

/// A whole trace, read.
#[derive(Debug, Clone)]
pub struct Story {
    /// The `start` line.
    pub start: StartInfo,
    /// Every happening, in trace order.
    pub items: Vec<Item>,
    /// Every `violation` line.
    pub violations: Vec<Found>,
    /// Violations found in all (from `end`), when the trace has one.
    pub violations_total: Option<u64>,
    /// Simulated milliseconds of the last line.
    pub end_ms: u64,
}

/// A trace that cannot be read.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum ReadError {
    /// The file could not be read.
    #[error("{0}")]
    Io(String),
    /// The trace is empty, of another format, or a line is malformed.
    #[error("line {line}: {message}")]
    Malformed {
        /// The 1-based line.
        line: u64,
        /// What is wrong.
        message: String,
    },
}

struct Call {
    from: String,
    to: String,
    op: &'static str,
    action: Option<String>,
    touches: Vec<String>,
}

fn short(text: &str, max: usize) -> String {
    if text.chars().count() <= max {
        text.to_string()
    } else {
        let cut: String = text.chars().take(max).collect();
        format!("{cut}…")
    }
}

fn request_text(req: &Request) -> String {
    match req {
        Request::Resolve { request } => format!("resolve {}", request.action),
        Request::RouteGet { action, .. } => format!("route_get {action}"),
        Request::Settle { params } => format!(
            "settle {} fence {} as {:?}",
            params.assignment.identity.action,
            params.assignment.reservation.fence.0,
            params.outcome
        ),
        Request::Execute { assignment } => format!(
            "execute {} fence {} on replica {}",
            assignment.identity.action,
            assignment.reservation.fence.0,
            assignment.destination.replica
        ),
        Request::Cancel { action, fence } => format!("cancel {action} fence {}", fence.0),
        Request::Drain { replica } => format!("drain {replica}"),
        other => other.op().to_string(),
    }
}

fn response_text(resp: &Response) -> String {
    if let Some(kind) = resp.error_kind() {
        return format!("error {kind}");
    }
    match resp {
        Response::Resolve { result: Ok(r) } => format!(
            "{:?} route: instance {}, replica {}, fence {}",
            r.kind,
            r.assignment.destination.instance,
            r.assignment.destination.replica,
            r.assignment.reservation.fence.0
        )
        .to_lowercase(),
        Response::RouteGet { result: Ok(None) } => "no route".into(),
        Response::RouteGet {
            result: Ok(Some(r)),
        } => format!(
            "route on replica {}, fence {}, reserved {}",
            r.assignment.destination.replica, r.assignment.reservation.fence.0, r.reserved
        ),
        Response::Settle { result: Ok(s) } => format!("settled, released {}", s.released),
        Response::Execute { execution } => match execution {
            Execution::Completed => "completed".into(),
            Execution::Unknown => "outcome unknown".into(),
            Execution::Cancelled => "cancelled".into(),
            Execution::Misdirected => "refused: misdirected".into(),
        },
        Response::Cancel { running } => format!("cancel: was running {running}"),
        Response::Refused { reason } => format!("refused: {}", short(reason, 80)),
        Response::Maintain { result: Ok(m) } => short(
            &format!(
                "maintained: {}",
                serde_json::to_string(m).unwrap_or_default()
            ),
            160,
        ),
        _ => "ok".into(),
    }
}

fn fault_item(f: &FaultEvent) -> (Kind, Vec<String>, String, String) {
    let name = serde_json::to_value(f)
        .ok()
        .and_then(|v| v["fault"].as_str().map(str::to_string))
        .unwrap_or_default();
    let both = |a: &[String], b: &[String]| [a, b].concat();
    let (kind, hosts, text) = match f {
        FaultEvent::Crash { hosts } => (Kind::Fault, hosts.clone(), "crash".to_string()),
        FaultEvent::Restart { hosts } => (Kind::FaultEnd, hosts.clone(), "restart".into()),
        FaultEvent::Partition { a, b, oneway } => (
            Kind::Fault,
            both(a, b),
            format!(
                "partition {} {} {}",
                a.join(","),
                if *oneway { "->" } else { "<->" },
                b.join(",")
            ),
        ),
        FaultEvent::Repair { a, b, .. } => (
            Kind::FaultEnd,
            both(a, b),
            format!("repair {} / {}", a.join(","), b.join(",")),
        ),
        FaultEvent::Hold { a, b } => (
            Kind::Fault,
            both(a, b),
            format!("hold {} / {}", a.join(","), b.join(",")),
        ),
        FaultEvent::Release { a, b } => (
            Kind::FaultEnd,
            both(a, b),
            format!("release {} / {}", a.join(","), b.join(",")),
        ),
        FaultEvent::Latency { a, b, max_ms } => (
            Kind::Fault,
            both(a, b),
            format!(
                "latency up to {max_ms} ms {} / {}",
                a.join(","),
                b.join(",")
            ),
        ),
        FaultEvent::LatencyRestore { a, b } => {
            (Kind::FaultEnd, both(a, b), "latency restored".into())
        }
        FaultEvent::Loss { rate } => (Kind::Fault, vec![], format!("message loss {rate}")),
        FaultEvent::LossEnd => (Kind::FaultEnd, vec![], "message loss ends".into()),
        FaultEvent::LoseAnswers { ops, count } => (
            Kind::Fault,
            vec![],
            format!("lose answers to {} ({count})", ops.join(",")),
        ),
        FaultEvent::LoseAnswersEnd => (Kind::FaultEnd, vec![], "lose answers ends".into()),
        FaultEvent::ClockJump { by_ms, .. } => {
            (Kind::Fault, vec![], format!("clock jumps {by_ms} ms"))
        }
        FaultEvent::DbFaultEnd { kind } => (Kind::FaultEnd, vec![], format!("{kind} ends")),
        // The database faults: their name says it all.
        _ => (Kind::Fault, vec![], name.replace('_', " ")),
    };
    (kind, hosts, text, name)
}

/// Reads a trace. Fails on an empty trace, a format other than
/// [`TRACE_FORMATS_READ`] and a malformed line.
pub fn read(reader: impl BufRead) -> Result<Story, ReadError> {
    let mut start: Option<StartInfo> = None;
    let mut items = Vec::new();
    let mut violations = Vec::new();
    let mut calls: BTreeMap<u64, Call> = BTreeMap::new();
    let mut violations_total = None;
    let mut end_ms = 0;
    for (i, line) in reader.lines().enumerate() {
        let n = i as u64 + 1;
        let line = line.map_err(|e| ReadError::Io(format!("line {n}: {e}")))?;
        if line.trim().is_empty() {
            continue;
        }
        let bad = |message: String| ReadError::Malformed { line: n, message };
        if start.is_none() {
            let v: serde_json::Value =
                serde_json::from_str(&line).map_err(|e| bad(format!("not a trace line: {e}")))?;
            if v["ev"] != "start" {
                return Err(bad("a trace starts with its `start` line".into()));
            }
            let format = v["format"].as_u64();
            if !format.is_some_and(|f| TRACE_FORMATS_READ.iter().any(|r| u64::from(*r) == f)) {
                return Err(bad(format!(
                    "the trace is of format {}; explain reads formats {:?}",
                    v["format"], TRACE_FORMATS_READ
                )));
            }
        }
        let record: Record = serde_json::from_str(&line).map_err(|e| bad(e.to_string()))?;
        end_ms = end_ms.max(record.t);
        let t = record.t;
        let item = |kind, host: &str, peers: Vec<String>, rpc, action, text: String| Item {
            line: n,
            t,
            kind,
            host: host.to_string(),
            peers,
            rpc,
            action,
            text,
            lost: false,
            fault: None,
            touches: Vec::new(),
        };
        match record.event {
            Event::Start(info) => start = Some(*info),
            Event::Rpc { id, from, to, req } => {
                let action = req.action().map(|a| a.to_string());
                let text = format!("calls {to}: {} (call {id})", request_text(&req));
                items.push(item(
                    Kind::Call,
                    &from,
                    vec![to.clone()],
                    Some(id),
                    action.clone(),
                    text,
                ));
                calls.insert(
                    id,
                    Call {
                        from,
                        to,
                        op: req.op(),
                        action,
                        touches: request_touches(&req),
                    },
                );
            }
            Event::Reply {
                id,
                from,
                to,
                resp,
                lost,
                ..
            } => {
                let call = calls.get(&id);
                let action = call.and_then(|c| c.action.clone());
                let op = call.map_or("?", |c| c.op);
                let mut text =
                    format!("answers {to} to {op} (call {id}): {}", response_text(&resp));
                if lost {
                    text.push_str(" — the answer is LOST");
                }
                let mut it = item(Kind::Answer, &from, vec![to], Some(id), action, text);
                it.lost = lost;
                if resp.error_kind().is_none() && !matches!(resp, Response::Refused { .. }) {
                    it.touches = call.map(|c| c.touches.clone()).unwrap_or_default();
                    it.touches.extend(response_touches(&resp));
                }
                items.push(it);
            }
            Event::Delivered { id } => {
                let call = calls.get(&id);
                let host = call.map_or(WORLD.to_string(), |c| c.from.clone());
                let peer = call.map(|c| c.to.clone()).into_iter().collect();
                let op = call.map_or("?", |c| c.op);
                let action = call.and_then(|c| c.action.clone());
                let text = format!("receives the answer to {op} (call {id})");
                items.push(item(Kind::Delivered, &host, peer, Some(id), action, text));
            }
            Event::RpcFailed {
                id,
                from,
                to,
                error,
            } => {
                let call = calls.get(&id);
                let op = call.map_or("?", |c| c.op);
                let action = call.and_then(|c| c.action.clone());
                let text = format!("gives up on {op} to {to} (call {id}): {error}");
                items.push(item(Kind::Failed, &from, vec![to], Some(id), action, text));
            }
            Event::Ledger {
                rpc,
                action,
                instance,
                replica,
                account,
                fence,
                ..
            } => {
                let host = crate::scenario::replica_host(replica.as_str());
                let text = format!(
                    "side effect of {action} (fence {}) on instance {instance}, account {account} (call {rpc})",
                    fence.0
                );
                items.push(item(
                    Kind::SideEffect,
                    &host,
                    vec![],
                    Some(rpc),
                    Some(action.to_string()),
                    text,
                ));
            }
            Event::ActionStart {
                dispatcher,
                n,
                action,
                tenant,
                capability,
            } => {
                let text = format!("starts action {action} (#{n}, tenant {tenant}, {capability})");
                items.push(item(
                    Kind::Action,
                    &dispatcher,
                    vec![],
                    None,
                    Some(action.to_string()),
                    text,
                ));
            }
            Event::ActionEnd {
                dispatcher,
                action,
                result,
                ..
            } => {
                let text = format!("ends action {action}: {result}");
                items.push(item(
                    Kind::Action,
                    &dispatcher,
                    vec![],
                    None,
                    Some(action.to_string()),
                    text,
                ));
            }
            Event::Reconciled {
                dispatcher,
                action,
                result,
                ..
            } => {
                let text = format!("reconciles action {action}: {result}");
                items.push(item(
                    Kind::Action,
                    &dispatcher,
                    vec![],
                    None,
                    Some(action.to_string()),
                    text,
                ));
            }
            Event::Fault(f) => {
                let (kind, hosts, text, name) = fault_item(&f);
                let host = if hosts.len() == 1 {
                    hosts[0].clone()
                } else {
                    WORLD.to_string()
                };
                let mut it = item(kind, &host, hosts, None, None, format!("fault: {text}"));
                it.fault = Some(name);
                items.push(it);
            }
            Event::Heal { deadline_ms } => {
                let text = format!("every fault healed; actions must end by {deadline_ms} ms");
                items.push(item(Kind::Heal, WORLD, vec![], None, None, text));
            }
            Event::Drain { until_ms } => {
                let text = format!(
                    "every dispatcher is done with reservations still held; each must end by {until_ms} ms"
                );
                items.push(item(Kind::Heal, WORLD, vec![], None, None, text));
            }
            Event::Violation(v) => {
                let text = format!("VIOLATION {} [{}]: {}", v.invariant, v.rules, v.detail);
                let host = if v.hosts.len() == 1 {
                    v.hosts[0].clone()
                } else {
                    WORLD.to_string()
                };
                let mut it = item(
                    Kind::Violation,
                    &host,
                    v.hosts.clone(),
                    v.rpcs.first().copied(),
                    v.actions.first().cloned(),
                    text,
                );
                it.t = if v.at_ms > 0 { v.at_ms } else { t };
                items.push(it);
                violations.push(Found {
                    line: n,
                    violation: v,
                });
            }
            Event::End(end) => violations_total = Some(end.violations),
            Event::Setup { .. } | Event::Snapshot(_) | Event::Check { .. } => {}
        }
    }
    let start = start.ok_or(ReadError::Malformed {
        line: 0,
        message: "the trace is empty: it has no start line".into(),
    })?;
    Ok(Story {
        start,
        items,
        violations,
        violations_total,
        end_ms,
    })
}
