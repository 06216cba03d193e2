//! Where a violation broke: the trace line, time, calls, actions and hosts
//! of the evidence, attached to each violation as it is found.
//!
//! Nothing here runs unless a check fails: the event's context is read
//! only for the violations it produced, so a clean run pays for the line
//! counter alone.

use std::collections::{BTreeMap, BTreeSet};

use connreg::ActionId;

use crate::scenario::replica_host;
use crate::trace::{Event, FaultEvent, Violation};
use crate::wire::Response;

fn response_action(resp: &Response) -> Option<&ActionId> {
    match resp {
        Response::Resolve {
            result: Ok(resolved),
        } => Some(&resolved.assignment.identity.action),
        Response::RouteGet {
            result: Ok(Some(route)),
        } => Some(&route.assignment.identity.action),
        _ => None,
    }
}

/// What one event says about where it happened.
#[derive(Default)]
pub(super) struct EventContext {
    pub(super) rpcs: Vec<u64>,
    pub(super) actions: Vec<String>,
    pub(super) hosts: Vec<String>,
}

/// The calls, actions and hosts `event` names; `call_action` is the action
/// of each call sent so far, by call ID.
pub(super) fn of_event(event: &Event, call_action: &BTreeMap<u64, ActionId>) -> EventContext {
    let mut c = EventContext::default();
    let action_of_call = |id: &u64| call_action.get(id).map(|a| a.to_string());
    match event {
        Event::Rpc { id, from, to, req } => {
            c.rpcs.push(*id);
            c.hosts.extend([from.clone(), to.clone()]);
            c.actions.extend(req.action().map(|a| a.to_string()));
        }
        Event::Reply {
            id, from, to, resp, ..
        } => {
            c.rpcs.push(*id);
            c.hosts.extend([from.clone(), to.clone()]);
            c.actions.extend(action_of_call(id));
            c.actions
                .extend(response_action(resp).map(|a| a.to_string()));
        }
        Event::Delivered { id } => {
            c.rpcs.push(*id);
            c.actions.extend(action_of_call(id));
        }
        Event::RpcFailed { id, from, to, .. } => {
            c.rpcs.push(*id);
            c.hosts.extend([from.clone(), to.clone()]);
            c.actions.extend(action_of_call(id));
        }
        Event::Ledger {
            rpc,
            action,
            replica,
            ..
        } => {
            c.rpcs.push(*rpc);
            c.actions.push(action.to_string());
            c.hosts.push(replica_host(replica.as_str()));
        }
        Event::ActionStart {
            dispatcher, action, ..
        }
        | Event::ActionEnd {
            dispatcher, action, ..
        }
        | Event::Reconciled {
            dispatcher, action, ..
        } => {
            c.actions.push(action.to_string());
            c.hosts.push(dispatcher.clone());
        }
        Event::Fault(FaultEvent::Crash { hosts } | FaultEvent::Restart { hosts }) => {
            c.hosts.extend(hosts.iter().cloned());
        }
        _ => {}
    }
    c
}

/// The actions of `known` that `detail` names: checks name the actions
/// they judge in their text, end-of-run checks above all.
pub(super) fn actions_named(detail: &str, known: &BTreeMap<ActionId, u64>) -> Vec<String> {
    let id_char = |c: char| c.is_ascii_alphanumeric() || "._:-".contains(c);
    let mut out = Vec::new();
    for token in detail.split(|c: char| !id_char(c)) {
        for candidate in [token, token.trim_end_matches(['.', ':'])] {
            if candidate.is_empty() {
                continue;
            }
            if let Ok(id) = ActionId::new(candidate)
                && known.contains_key(&id)
            {
                out.push(candidate.to_string());
                break;
            }
        }
    }
    out
}

/// Fills in a violation's context: `line` and `event` are the trace line
/// and the context of the event seen when the check failed (none at the
/// end of a run); `action_lines` holds each action's first line and
/// `route_lines` the line of the first answer that carried its route.
pub(super) fn annotate(
    v: &mut Violation,
    line: Option<u64>,
    event: &EventContext,
    action_lines: &BTreeMap<ActionId, u64>,
    route_lines: &BTreeMap<ActionId, u64>,
) {
    let mut actions: Vec<String> = event.actions.clone();
    actions.extend(actions_named(&v.detail, action_lines));
    let mut seen = BTreeSet::new();
    actions.retain(|a| seen.insert(a.clone()));
    let mut lines: Vec<u64> = line.into_iter().collect();
    for a in &actions {
        if let Ok(id) = ActionId::new(a.as_str()) {
            lines.extend(action_lines.get(&id));
            lines.extend(route_lines.get(&id));
        }
    }
    let mut seen = BTreeSet::new();
    lines.retain(|l| seen.insert(*l));
    let mut hosts = event.hosts.clone();
    let mut seen = BTreeSet::new();
    hosts.retain(|h| seen.insert(h.clone()));
    v.lines = lines;
    v.rpcs = event.rpcs.clone();
    v.actions = actions;
    v.hosts = hosts;
}
