//! The page `explain --html` writes: one self-contained HTML file (inline
//! CSS and JS, no network: its Content-Security-Policy forbids any fetch)
//! that draws hosts as lanes over simulated time, calls as arrows (lost
//! answers and timeouts marked), faults and crashes as spans, the
//! violations as red markers with their actions highlighted, and filters
//! by action and by host.
//!
//! The trace is untrusted input. Its text reaches the page only as JSON
//! inside a `<script type="application/json">` element, with `<`, `>`,
//! `&` and the JavaScript line separators escaped, so no trace text can
//! close the element; the script reads it with `JSON.parse` and puts text
//! into the page with `textContent` only, never as markup.
//!
//! At most [`HTML_EVENTS_MAX`] happenings are drawn: every one of the
//! followed actions, the faults and the violations first, then the rest
//! in trace order; the page says when the limit was hit.

use std::collections::BTreeSet;

use serde::Serialize;

use super::story::{Item, Kind, Story};

/// Most happenings one page draws. A browser draws a few tens of
/// thousands of SVG elements smoothly; a long run has hundreds of
/// thousands of lines.
pub const HTML_EVENTS_MAX: usize = 20_000;

#[derive(Serialize)]
struct Data<'a> {
    title: String,
    trace: &'a str,
    meta: Vec<(String, String)>,
    focus: &'a [String],
    items: Vec<&'a Item>,
    violations: Vec<PageViolation<'a>>,
    violations_total: u64,
    end_ms: u64,
    drawn: usize,
    total: usize,
    max: usize,
}

#[derive(Serialize)]
struct PageViolation<'a> {
    line: u64,
    #[serde(flatten)]
    violation: &'a crate::trace::Violation,
}

/// Escapes JSON text for a `<script>` element: nothing in it can end the
/// element or start markup, and it stays valid JSON and JavaScript.
pub fn script_json(json: &str) -> String {
    let mut out = String::with_capacity(json.len());
    for c in json.chars() {
        match c {
            '<' => out.push_str("\\u003c"),
            '>' => out.push_str("\\u003e"),
            '&' => out.push_str("\\u0026"),
            '\u{2028}' => out.push_str("\\u2028"),
            '\u{2029}' => out.push_str("\\u2029"),
            c => out.push(c),
        }
    }
    out
}

/// The happenings the page draws: the followed actions', faults and
/// violations first, then the others in trace order, at most `max`; in
/// trace order.
fn chosen<'a>(story: &'a Story, focus: &[String], max: usize) -> Vec<&'a Item> {
    let wanted: BTreeSet<&str> = focus.iter().map(String::as_str).collect();
    let first = |i: &Item| {
        matches!(
            i.kind,
            Kind::Fault | Kind::FaultEnd | Kind::Heal | Kind::Violation
        ) || i.action.as_deref().is_some_and(|a| wanted.contains(a))
    };
    let mut keep: Vec<&Item> = story.items.iter().filter(|i| first(i)).take(max).collect();
    let room = max - keep.len();
    keep.extend(story.items.iter().filter(|i| !first(i)).take(room));
    keep.sort_by_key(|i| i.line);
    keep
}

/// The page for `story`, following `focus`; `trace` names the file.
pub fn page(story: &Story, focus: &[String], trace: &str) -> String {
    page_bounded(story, focus, trace, HTML_EVENTS_MAX)
}

/// [`page`] with another bound (tests).
pub fn page_bounded(story: &Story, focus: &[String], trace: &str, max: usize) -> String {
    let s = &story.start;
    let items = chosen(story, focus, max);
    let meta = vec![
        ("scenario".to_string(), s.scenario.clone()),
        (
            "scenario file".into(),
            s.scenario_file.clone().unwrap_or_else(|| "built in".into()),
        ),
        (
            "scenario sha256".into(),
            s.scenario_sha256.clone().unwrap_or_default(),
        ),
        ("seed".into(), s.seed.to_string()),
        ("backend".into(), s.backend.clone()),
        (
            "plant".into(),
            s.plant.clone().unwrap_or_else(|| "none".into()),
        ),
        ("swarm".into(), s.swarm.to_string()),
        ("version".into(), s.version.clone()),
        ("revision".into(), s.revision.clone()),
    ];
    let data = Data {
        title: format!("{} seed {}", s.scenario, s.seed),
        trace,
        meta,
        focus,
        drawn: items.len(),
        total: story.items.len(),
        max,
        items,
        violations: story
            .violations
            .iter()
            .map(|f| PageViolation {
                line: f.line,
                violation: &f.violation,
            })
            .collect(),
        violations_total: story
            .violations_total
            .unwrap_or(story.violations.len() as u64),
        end_ms: story.end_ms,
    };
    let json = serde_json::to_string(&data).unwrap_or_else(|_| "{}".into());
    let mut out = String::with_capacity(json.len() + TEMPLATE_HEAD.len() + SCRIPT.len() + 256);
    out.push_str(TEMPLATE_HEAD);
    out.push_str("<script type=\"application/json\" id=\"trace-data\">");
    out.push_str(&script_json(&json));
    out.push_str("</script>\n<script>");
    out.push_str(SCRIPT);
    out.push_str("</script>\n</body>\n</html>\n");
    out
}

const TEMPLATE_HEAD: &str = r##"<!DOCTYPE html>
<html lang="en">
<head>
<meta charset="utf-8">
<meta http-equiv="Content-Security-Policy" content="default-src 'none'; style-src 'unsafe-inline'; script-src 'unsafe-inline'; img-src data:">
<meta name="viewport" content="width=device-width, initial-scale=1">
<title>connreg-sim explain</title>
<style>
body { font: 13px/1.4 system-ui, sans-serif; margin: 0; color: #222; background: #fafafa; }
header { padding: 8px 14px; background: #fff; border-bottom: 1px solid #ddd; }
h1 { font-size: 16px; margin: 0 0 4px; }
.meta span { margin-right: 14px; color: #555; }
.meta b { color: #222; font-weight: 600; }
#note { color: #8a5a00; background: #fff4d6; padding: 4px 8px; margin: 6px 0; display: none; }
#violations { margin: 6px 0; padding-left: 28px; max-height: 16vh; overflow: auto; }
#violations li { color: #b00020; cursor: pointer; margin: 2px 0; }
#violations li:hover { text-decoration: underline; }
#controls { padding: 6px 14px; background: #f0f0f0; border-bottom: 1px solid #ddd; }
#controls label { margin-right: 10px; }
#hosts label { display: inline-block; margin-right: 8px; }
#chart { display: flex; max-height: 62vh; overflow-y: auto; background: #fff; border-bottom: 1px solid #ddd; }
#labels { flex: none; border-right: 1px solid #ddd; }
#scroller { flex: auto; overflow-x: auto; }
svg text { font: 11px system-ui, sans-serif; }
.lane { stroke: #e4e4e4; }
.lanelabel { fill: #333; }
.call { stroke: #4a7bd0; stroke-width: 1.2; }
.answer { stroke: #2e9d55; stroke-width: 1.2; }
.lost { stroke: #d03030; stroke-dasharray: 4 3; }
.focus { stroke-width: 2.6; }
.dim { opacity: 0.25; }
.fault { fill: #f4b400; opacity: 0.25; }
.crash { fill: #d03030; opacity: 0.22; }
.vline { stroke: #b00020; stroke-width: 2; }
.vlabel { fill: #b00020; font-weight: 600; }
.mark { fill: #b00020; }
table { border-collapse: collapse; margin: 8px 14px; }
td, th { padding: 1px 8px; text-align: left; vertical-align: top; }
td { white-space: nowrap; }
td:last-child { white-space: normal; }
tr.violation td { color: #b00020; font-weight: 600; }
tr.pointed td { background: #ffe9ec; }
td.num { text-align: right; color: #777; }
</style>
</head>
<body>
<header>
<h1 id="title">connreg-sim explain</h1>
<div class="meta" id="meta"></div>
<div id="note"></div>
<div id="vhead"></div>
<ol id="violations"></ol>
</header>
<div id="controls">
<label>action <select id="action"></select></label>
<label>zoom <select id="zoom"></select></label>
<span id="hosts"></span>
</div>
<div id="chart"><div id="labels"></div><div id="scroller"></div></div>
<table id="events"><thead><tr><th></th><th>line</th><th>time</th><th>host</th><th>what happened</th></tr></thead><tbody></tbody></table>
<noscript>This page draws the trace with JavaScript.</noscript>
"##;

const SCRIPT: &str = r##"
"use strict";
(function () {
  var data = JSON.parse(document.getElementById("trace-data").textContent);
  var NS = "http://www.w3.org/2000/svg";
  function el(tag, attrs, text) {
    var e = document.createElement(tag);
    for (var k in attrs) { e.setAttribute(k, attrs[k]); }
    if (text !== undefined) { e.textContent = String(text); }
    return e;
  }
  function sv(tag, attrs, title) {
    var e = document.createElementNS(NS, tag);
    for (var k in attrs) { e.setAttribute(k, String(attrs[k])); }
    if (title !== undefined) {
      var t = document.createElementNS(NS, "title");
      t.textContent = String(title);
      e.appendChild(t);
    }
    return e;
  }
  function svText(attrs, text, title) {
    var e = sv("text", attrs);
    e.textContent = String(text);
    if (title !== undefined) {
      var t = document.createElementNS(NS, "title");
      t.textContent = String(title);
      e.appendChild(t);
    }
    return e;
  }
  document.title = "explain: " + data.title;
  document.getElementById("title").textContent = "connreg-sim explain: " + data.title + " (" + data.trace + ")";
  var meta = document.getElementById("meta");
  data.meta.forEach(function (kv) {
    var s = el("span");
    s.appendChild(document.createTextNode(kv[0] + " "));
    s.appendChild(el("b", {}, kv[1]));
    meta.appendChild(s);
  });
  var note = document.getElementById("note");
  if (data.drawn < data.total) {
    note.style.display = "block";
    note.textContent = "Drawn: " + data.drawn + " of " + data.total + " events (the page draws at most " +
      data.max + "; every event of the followed actions, every fault and violation is drawn first). " +
      "Use explain --action ID to follow other actions.";
  }
  document.getElementById("vhead").textContent = data.violations_total + " violation(s) found, " +
    data.violations.length + " in the trace" + (data.violations.length ? "; click one to follow its actions:" : ".");
  var focusSet = {};
  data.focus.forEach(function (a) { focusSet[a] = true; });
  var pointed = {};
  data.violations.forEach(function (v) { (v.lines || []).forEach(function (l) { pointed[l] = true; }); });

  // Hosts: in order of first appearance, the world lane first.
  var hosts = ["world"], seenHost = { world: true };
  function addHost(h) { if (h && !seenHost[h]) { seenHost[h] = true; hosts.push(h); } }
  data.items.forEach(function (i) {
    addHost(i.host);
    if (i.kind === "call" || i.kind === "answer" || i.kind === "delivered" || i.kind === "failed") {
      (i.peers || []).forEach(addHost);
    }
  });
  hosts = ["world"].concat(hosts.slice(1).sort());
  var hostShown = {};
  hosts.forEach(function (h) { hostShown[h] = true; });

  // Calls: request, answer, delivery or failure, by call id.
  var calls = {};
  data.items.forEach(function (i) {
    if (i.rpc === undefined || i.kind === "violation" || i.kind === "side_effect") { return; }
    var c = calls[i.rpc] || (calls[i.rpc] = { id: i.rpc });
    if (i.kind === "call") { c.call = i; }
    if (i.kind === "answer") { c.answer = i; }
    if (i.kind === "delivered") { c.delivered = i; }
    if (i.kind === "failed") { c.failed = i; }
    if (i.action !== undefined) { c.action = i.action; }
  });

  var actions = {};
  data.items.forEach(function (i) { if (i.action !== undefined) { actions[i.action] = true; } });
  var actionSel = document.getElementById("action");
  actionSel.appendChild(el("option", { value: "" }, "all actions"));
  if (data.focus.length) {
    actionSel.appendChild(el("option", { value: "@focus" }, "the violation's: " + data.focus.join(", ")));
  }
  Object.keys(actions).sort().forEach(function (a) { actionSel.appendChild(el("option", { value: a }, a)); });
  actionSel.value = data.focus.length ? "@focus" : "";

  var first = Infinity, last = 0;
  data.items.forEach(function (i) {
    if (data.focus.length === 0 || focusSet[i.action] || i.kind === "violation") {
      first = Math.min(first, i.t); last = Math.max(last, i.t);
    }
  });
  if (!isFinite(first)) { first = 0; last = data.end_ms; }
  var span = Math.max(50, last - first);
  var autoScale = Math.min(40, Math.max(0.02, 1400 / span));
  var zoomSel = document.getElementById("zoom");
  zoomSel.appendChild(el("option", { value: "auto" }, "fit the followed actions"));
  [0.05, 0.2, 0.5, 1, 2, 5, 10, 20].forEach(function (z) {
    zoomSel.appendChild(el("option", { value: String(z) }, z + " px/ms"));
  });

  var hostBox = document.getElementById("hosts");
  hosts.forEach(function (h) {
    var l = el("label");
    var cb = el("input", { type: "checkbox" });
    cb.checked = true;
    cb.addEventListener("change", function () { hostShown[h] = cb.checked; draw(); });
    l.appendChild(cb);
    l.appendChild(document.createTextNode(" " + h));
    hostBox.appendChild(l);
  });

  function actionFilter() {
    var v = actionSel.value;
    if (v === "") { return null; }
    if (v === "@focus") { return focusSet; }
    var o = {}; o[v] = true; return o;
  }
  function itemShown(i, af) {
    if (!hostShown[i.host]) { return false; }
    if (!af) { return true; }
    if (i.kind === "fault" || i.kind === "fault_end" || i.kind === "heal") { return true; }
    if (i.kind === "violation") { return true; }
    return i.action !== undefined && af[i.action] === true;
  }

  var vlist = document.getElementById("violations");
  data.violations.forEach(function (v, n) {
    var li = el("li", { "data-rendered": "violation", "id": "violation-" + n });
    var where = "at " + v.at_ms + " ms, trace line " + v.line;
    if (v.lines && v.lines.length) { where += ", evidence lines " + v.lines.join(" "); }
    if (v.rpcs && v.rpcs.length) { where += ", calls " + v.rpcs.join(" "); }
    if (v.actions && v.actions.length) { where += ", actions " + v.actions.join(" "); }
    li.textContent = "VIOLATION " + v.invariant + " [" + v.rules + "] (" + where + "): " + v.detail;
    li.addEventListener("click", function () {
      focusSet = {};
      (v.actions || []).forEach(function (a) { focusSet[a] = true; });
      actionSel.value = (v.actions || []).length ? "@focus" : "";
      draw();
    });
    vlist.appendChild(li);
  });

  var LEFT = 10, LANE = 34, TOP = 44, LABELS = 150;
  function draw() {
    var af = actionFilter();
    var scale = zoomSel.value === "auto" ? autoScale : Number(zoomSel.value);
    var lanes = hosts.filter(function (h) { return hostShown[h]; });
    var y = {};
    lanes.forEach(function (h, n) { y[h] = TOP + n * LANE + LANE / 2; });
    function laneY(h) {
      if (y[h] !== undefined) { return y[h]; }
      if (h && h.charAt(h.length - 1) === "*") {
        var p = h.slice(0, -1);
        for (var k in y) { if (k.indexOf(p) === 0) { return y[k]; } }
      }
      return undefined;
    }
    function X(t) { return LEFT + t * scale; }
    var width = X(data.end_ms) + 60, height = TOP + lanes.length * LANE + 10;
    var svg = sv("svg", { width: width, height: height, "data-rendered": "chart" });
    var defs = sv("defs");
    [["arrow", "#4a7bd0"], ["arrowok", "#2e9d55"], ["arrowlost", "#d03030"]].forEach(function (m) {
      var mk = sv("marker", { id: m[0], viewBox: "0 0 10 10", refX: 9, refY: 5, markerWidth: 6, markerHeight: 6, orient: "auto-start-reverse" });
      mk.appendChild(sv("path", { d: "M0,0 L10,5 L0,10 z", fill: m[1] }));
      defs.appendChild(mk);
    });
    svg.appendChild(defs);
    for (var t = 0; t <= data.end_ms; t += Math.max(1, Math.pow(10, Math.ceil(Math.log10(80 / scale))))) {
      svg.appendChild(sv("line", { x1: X(t), x2: X(t), y1: TOP - 4, y2: height, stroke: "#f3f3f3" }));
      svg.appendChild(svText({ x: X(t) + 2, y: 12, fill: "#999" }, t + " ms"));
    }
    var labels = sv("svg", { width: LABELS, height: height });
    lanes.forEach(function (h) {
      svg.appendChild(sv("line", { x1: LEFT, x2: width, y1: y[h], y2: y[h], "class": "lane" }));
      labels.appendChild(svText({ x: 6, y: y[h] + 4, "class": "lanelabel" }, h));
    });
    // Faults as spans: from the fault to its end on the same hosts.
    var open = {};
    data.items.forEach(function (i) {
      if (i.kind !== "fault" && i.kind !== "fault_end") { return; }
      var key = (i.fault || "").replace(/_end$|^restart$|^repair$|^release$|^latency_restore$/, function (m) {
        return { restart: "crash", repair: "partition", release: "hold", latency_restore: "latency" }[m] || "";
      }) + "|" + (i.peers || []).join(",");
      if (i.kind === "fault") { open[key] = i; return; }
      var s = open[key];
      if (s) { delete open[key]; spanOf(s, i.t); }
    });
    Object.keys(open).forEach(function (k) { spanOf(open[k], data.end_ms); });
    function spanOf(s, end) {
      var hs = (s.peers && s.peers.length) ? s.peers : ["world"];
      var w = Math.max(2, X(end) - X(s.t));
      hs.forEach(function (h) {
        var ly = laneY(h);
        if (ly === undefined) { return; }
        svg.appendChild(sv("rect", { x: X(s.t), y: ly - LANE / 2 + 2, width: w, height: LANE - 4,
          "class": s.fault === "crash" ? "crash" : "fault" }, s.text + " (" + s.t + "-" + end + " ms, line " + s.line + ")"));
      });
    }
    // Calls as arrows.
    Object.keys(calls).forEach(function (id) {
      var c = calls[id];
      if (!c.call) { return; }
      var shown = itemShown(c.call, af) || (c.answer && itemShown(c.answer, af));
      if (!shown) { return; }
      var from = laneY(c.call.host), to = laneY((c.call.peers || [])[0]);
      if (from === undefined || to === undefined) { return; }
      var foc = c.action !== undefined && focusSet[c.action];
      var cls = foc ? " focus" : "";
      var end = c.answer ? c.answer.t : (c.failed ? c.failed.t : c.call.t);
      svg.appendChild(sv("line", { x1: X(c.call.t), y1: from, x2: X(end), y2: to, "class": "call" + cls, "marker-end": "url(#arrow)" },
        "line " + c.call.line + " @" + c.call.t + " ms: " + c.call.host + " " + c.call.text));
      if (c.answer) {
        var back = c.delivered ? c.delivered.t : (c.failed ? c.failed.t : c.answer.t + 2);
        var lost = c.answer.lost || !c.delivered;
        svg.appendChild(sv("line", { x1: X(c.answer.t), y1: to, x2: X(back), y2: from,
          "class": "answer" + cls + (lost ? " lost" : ""), "marker-end": lost ? "url(#arrowlost)" : "url(#arrowok)" },
          "line " + c.answer.line + " @" + c.answer.t + " ms: " + c.answer.host + " " + c.answer.text));
        if (lost) {
          var mx = (X(c.answer.t) + X(back)) / 2, my = (to + from) / 2;
          svg.appendChild(svText({ x: mx - 4, y: my + 4, "class": "mark" }, "\u00d7", "answer lost"));
        }
      }
      if (c.failed) {
        svg.appendChild(svText({ x: X(c.failed.t) - 4, y: from - 6, "class": "mark" }, "timeout",
          "line " + c.failed.line + ": " + c.failed.text));
      }
    });
    // Points: side effects and action starts and ends.
    data.items.forEach(function (i) {
      if ((i.kind !== "side_effect" && i.kind !== "action") || !itemShown(i, af)) { return; }
      var ly = laneY(i.host);
      if (ly === undefined) { return; }
      var foc = i.action !== undefined && focusSet[i.action];
      svg.appendChild(sv(i.kind === "action" ? "circle" : "rect", i.kind === "action"
        ? { cx: X(i.t), cy: ly, r: foc ? 5 : 3, fill: foc ? "#6a1b9a" : "#888" }
        : { x: X(i.t) - 4, y: ly - 4, width: 8, height: 8, fill: foc ? "#e65100" : "#aaa", transform: "rotate(45 " + X(i.t) + " " + ly + ")" },
        "line " + i.line + " @" + i.t + " ms: " + i.host + " " + i.text));
    });
    // Violations: a red rule at their time; with an action filter, only
    // the violations of the filtered actions.
    // Violations at one instant share one rule and one label that counts
    // them and names their invariants; labels closer than LABEL_GAP
    // pixels to the previous one take the next of three rows.
    var LABEL_GAP = 150;
    var atTime = [];
    data.violations.forEach(function (v) {
      var mine = !af || (v.actions || []).some(function (a) { return af[a] === true; });
      if (!mine) { return; }
      var last = atTime[atTime.length - 1];
      if (last && last.t === v.at_ms) { last.vs.push(v); } else { atTime.push({ t: v.at_ms, vs: [v] }); }
    });
    var row = 0, lastX = -Infinity;
    atTime.forEach(function (g) {
      var x = X(g.t);
      var details = g.vs.map(function (v) { return "line " + v.line + ": " + v.invariant + ": " + v.detail; }).join("\n");
      svg.appendChild(sv("line", { x1: x, x2: x, y1: TOP - 8, y2: height, "class": "vline" }, details));
      var names = [];
      g.vs.forEach(function (v) { if (names.indexOf(v.invariant) < 0) { names.push(v.invariant); } });
      var label = g.vs.length === 1 ? "\u26a0 " + names[0]
        : "\u26a0 " + g.vs.length + " at " + g.t + " ms: " + names.slice(0, 2).join(", ") + (names.length > 2 ? ", \u2026" : "");
      row = x - lastX < LABEL_GAP ? (row + 1) % 3 : 0;
      lastX = x;
      svg.appendChild(svText({ x: x + 3, y: 36 - row * 11, "class": "vlabel", "data-rendered": "violation-marker" },
        label, details));
    });
    var labelBox = document.getElementById("labels");
    labelBox.textContent = "";
    labelBox.appendChild(labels);
    var scroller = document.getElementById("scroller");
    scroller.textContent = "";
    scroller.appendChild(svg);
    scroller.scrollLeft = Math.max(0, X(first) - 60);
    // The table of what is drawn.
    var body = document.querySelector("#events tbody");
    body.textContent = "";
    var rows = 0;
    data.items.forEach(function (i) {
      if (!itemShown(i, af)) { return; }
      if (!af && rows >= 3000) { return; }
      rows += 1;
      var cls = i.kind === "violation" ? "violation" : (pointed[i.line] ? "pointed" : "");
      var tr = el("tr", cls ? { "class": cls } : {});
      tr.appendChild(el("td", {}, i.kind === "violation" ? "!!" : (pointed[i.line] ? "<-" : "")));
      tr.appendChild(el("td", { "class": "num" }, i.line));
      tr.appendChild(el("td", { "class": "num" }, i.t + " ms"));
      tr.appendChild(el("td", {}, i.host));
      tr.appendChild(el("td", {}, i.text));
      body.appendChild(tr);
    });
  }
  actionSel.addEventListener("change", draw);
  zoomSel.addEventListener("change", draw);
  draw();
  document.body.setAttribute("data-rendered", "done");
})();
"##;

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn script_json_cannot_close_its_element() {
        let hostile = serde_json::to_string("</script><script>alert(1)</script>&\u{2028}").unwrap();
        let safe = script_json(&hostile);
        assert!(!safe.contains('<') && !safe.contains('>') && !safe.contains('&'));
        let back: String = serde_json::from_str(&safe).unwrap();
        assert_eq!(back, "</script><script>alert(1)</script>&\u{2028}");
    }
}
