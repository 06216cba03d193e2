//! The report directory (`--out DIR`): `report.json` (the report, format
//! [`REPORT_FORMAT`](super::report::REPORT_FORMAT), documented field by
//! field in `benches/README.md`), `report.md` (the same for people, linking
//! the plots) and the plots of `super::plot`.

use std::fmt::Write as _;
use std::path::{Path, PathBuf};

use super::plot;
use super::report::{Bound, Report};

/// Writes every file of the report directory `dir` (created if missing);
/// returns their paths.
pub fn write_dir(dir: &Path, report: &Report) -> Result<Vec<PathBuf>, String> {
    std::fs::create_dir_all(dir).map_err(|e| format!("cannot create {}: {e}", dir.display()))?;
    let mut written = Vec::new();
    let mut write = |name: &str, text: &str| -> Result<(), String> {
        let path = dir.join(name);
        std::fs::write(&path, text).map_err(|e| format!("cannot write {}: {e}", path.display()))?;
        written.push(path);
        Ok(())
    };
    let json = serde_json::to_string_pretty(report).map_err(|e| e.to_string())?;
    write("report.json", &format!("{json}\n"))?;
    let mut plots = Vec::new();
    for p in plot::plots(report) {
        write(p.file, &plot::svg(&p)?)?;
        plots.push((p.file, p.title));
    }
    write("report.md", &markdown(report, &plots))?;
    Ok(written)
}

fn n(v: f64) -> String {
    if v == 0.0 || v.abs() >= 100.0 {
        format!("{v:.0}")
    } else if v.abs() >= 1.0 {
        format!("{v:.2}")
    } else {
        format!("{v:.4}")
    }
}

/// The report for people, linking `plots` (file, title).
pub fn markdown(r: &Report, plots: &[(&str, String)]) -> String {
    let mut s = String::new();
    let _ = writeln!(
        s,
        "# connreg-qualify: {} on {} — {}\n",
        r.environment.name,
        r.backend.kind,
        r.verdict.as_str()
    );
    if !r.run.complete {
        let _ = writeln!(
            s,
            "> **INCOMPLETE**: {}\n",
            r.run
                .incomplete_reason
                .as_deref()
                .unwrap_or("the run did not finish")
        );
    }
    if let Some(server) = &r.backend.server {
        let _ = writeln!(s, "> **Server:** {}\n", server.banner());
    }
    let _ = writeln!(s, "{}\n", r.environment.description);
    let p = &r.provenance;
    let m = &r.machine;
    let _ = writeln!(s, "## Provenance\n\n| | |\n|---|---|");
    for (k, v) in [
        ("started (UTC)", p.started_utc.clone()),
        ("ended (UTC)", p.ended_utc.clone()),
        (
            "build",
            format!(
                "connreg-benches {} at git {}{}, {} profile",
                p.crate_version,
                p.git_revision,
                if p.git_dirty == "true" {
                    " (dirty)"
                } else {
                    ""
                },
                m.build
            ),
        ),
        (
            "contract",
            format!("`{}`, sha256 `{}`", r.environment.file, p.contract_sha256),
        ),
        ("seed", p.seed.to_string()),
        ("run prefix", format!("`{}`", p.run_prefix)),
        ("host", m.host.clone()),
        ("CPU", format!("{} × {}", m.cores, m.cpu_model)),
        (
            "memory",
            m.memory_bytes.map_or("unknown".into(), |b| {
                format!("{:.1} GiB", b as f64 / (1u64 << 30) as f64)
            }),
        ),
        ("kernel", format!("{} {} {}", m.os, m.kernel, m.arch)),
        ("command", format!("`{}`", p.command_line)),
    ] {
        let _ = writeln!(s, "| {k} | {v} |");
    }
    if let Some(server) = &r.backend.server {
        let _ = writeln!(s, "\n## Server\n\n| | |\n|---|---|");
        let _ = writeln!(s, "| kind | {} ({}) |", server.kind, server.source);
        let _ = writeln!(s, "| address | {} |", server.address);
        let _ = writeln!(s, "| PostgreSQL | {} |", server.version);
        for (k, v) in &server.settings {
            let _ = writeln!(s, "| `{k}` | {v} |");
        }
        let _ = writeln!(
            s,
            "| roles | control `{}` ({} connections), data `{}` ({} connections) |",
            server.control_role,
            server.control_connections,
            server.data_role,
            server.data_connections
        );
        let _ = writeln!(
            s,
            "| schema | version {}{} |",
            server.schema_version,
            if server.migrated {
                ", installed or migrated by this run"
            } else {
                ""
            }
        );
        let _ = writeln!(
            s,
            "| synchronous standbys | {}{} |",
            server.synchronous_standbys(),
            server
                .replication_gap()
                .map_or(String::new(), |gap| format!(": {gap}"))
        );
        if !server.standbys.is_empty() {
            let _ = writeln!(
                s,
                "\n### Standbys\n\n| standby | state | sync state | replay lag |\n|---|---|---|---|"
            );
            for sb in &server.standbys {
                let _ = writeln!(
                    s,
                    "| {} | {} | {} | {} |",
                    sb.name,
                    sb.state,
                    sb.sync_state,
                    sb.replay_lag_us.map_or("none".to_string(), |us| format!(
                        "{:.3} ms",
                        us as f64 / 1000.0
                    ))
                );
            }
        }
    }
    let f = &r.fleet;
    let l = &r.load;
    let _ = writeln!(
        s,
        "\n## Fleet and load\n\n{} tenants, {} capabilities, {} bindings, {} instances, {} replicas, {} scopes, set up in {} ms. {} clients, {}, warm-up {} ms before each of {} trial(s), new-action budget {}.",
        f.tenants,
        f.capabilities,
        f.bindings,
        f.instances,
        f.replicas,
        f.scopes,
        f.setup_ms,
        l.clients,
        match (l.duration_ms, l.operations) {
            (Some(ms), _) => format!("{ms} ms per trial"),
            (None, Some(ops)) => format!("{ops} operations per trial"),
            _ => String::new(),
        },
        l.warmup_ms,
        l.trials,
        l.actions_max
    );
    let _ = writeln!(
        s,
        "\n## Thresholds\n\nEach threshold holds only if it holds in every trial; `measured` is the worst trial.\n\n| | threshold | measured | limit | per trial |\n|---|---|---:|---:|---|"
    );
    for t in &r.thresholds {
        let _ = writeln!(
            s,
            "| {} | `{}` | {} | {} {} | {} |",
            t.verdict.as_str(),
            t.name,
            n(t.measured),
            match t.bound {
                Bound::AtLeast => "≥",
                Bound::AtMost => "≤",
            },
            n(t.limit),
            t.per_trial
                .iter()
                .map(|v| n(*v))
                .collect::<Vec<_>>()
                .join(", ")
        );
    }
    let _ = writeln!(
        s,
        "\n## Figures over trials\n\n| figure | min | median | max |\n|---|---:|---:|---:|"
    );
    for (k, v) in &r.spread {
        let _ = writeln!(
            s,
            "| `{k}` | {} | {} | {} |",
            n(v.min),
            n(v.median),
            n(v.max)
        );
    }
    let me = &r.measured;
    let _ = writeln!(
        s,
        "\n## All trials pooled\n\n{} operations in {:.2} s measured (stopped by {}), {} ops/s; {} resolves ok = {}/s.\n\n| operation | calls | ok | p50 ms | p99 ms | max ms |\n|---|---:|---:|---:|---:|---:|",
        me.operations,
        me.elapsed_ms / 1000.0,
        me.stopped_by.as_str(),
        n(me.operations_per_s),
        me.resolves_ok,
        n(me.resolves_per_s)
    );
    for (op, fig) in &me.by_operation {
        let _ = writeln!(
            s,
            "| {op} | {} | {} | {} | {} | {} |",
            fig.count,
            fig.ok,
            n(fig.latency.p50_ms),
            n(fig.latency.p99_ms),
            n(fig.latency.max_ms)
        );
    }
    if me.errors.is_empty() {
        let _ = writeln!(s, "\nNo errors.");
    } else {
        let _ = writeln!(
            s,
            "\n| operation | error | expected | count |\n|---|---|---|---:|"
        );
        for e in &me.errors {
            let _ = writeln!(
                s,
                "| {} | {} | {} | {} |",
                e.operation, e.kind, e.expected, e.count
            );
        }
    }
    if let Some(p) = &r.pgbench {
        let _ = writeln!(s, "\n## pgbench on the same server\n");
        match (&p.skipped, p.tpcb_tps, p.select_only_tps) {
            (None, Some(tpcb), Some(select_only)) => {
                let _ = writeln!(
                    s,
                    "| script | tps | registry resolves/s ÷ tps |\n|---|---:|---:|\n| TPC-B, scale {} | {} | {:.3} |\n| select-only | {} | {:.3} |\n\n{} clients, {} s each; registry median {} resolves/s.",
                    p.scale,
                    n(tpcb),
                    p.tpcb_ratio.unwrap_or(0.0),
                    n(select_only),
                    p.select_only_ratio.unwrap_or(0.0),
                    p.clients,
                    p.secs,
                    n(p.resolves_per_s)
                );
            }
            (reason, _, _) => {
                let _ = writeln!(s, "Skipped: {}.", reason.as_deref().unwrap_or("no figures"));
            }
        }
    }
    if let Some(e) = &r.expiry {
        let _ = writeln!(
            s,
            "\n## Lease expiry\n\n| trial | replicas | offline | left online | others offline | released | calls | largest call ms | replicas/s | released/s | offline after ms | within {} ms |\n|---|---|---|---|---|---|---|---|---|---|---|---|",
            e.offline_within_ms_max
        );
        for (n, t) in r
            .trials
            .iter()
            .filter_map(|t| t.expiry.as_ref().map(|e| (t.trial.to_string(), e)))
            .chain(std::iter::once(("all".to_string(), e)))
        {
            let _ = writeln!(
                s,
                "| {n} | {} | {} | {} | {} | {} | {} | {:.1} | {:.0} | {:.0} | {:.0} | {} |",
                t.replicas,
                t.offline,
                t.left_online,
                t.others_offline,
                t.released,
                t.calls,
                t.largest_call_ms,
                t.replicas_per_s,
                t.released_per_s,
                t.offline_ms,
                if t.all_offline_within_bound {
                    "yes"
                } else {
                    "**no**"
                },
            );
        }
    }
    if let Some(p) = &r.publications {
        let _ = writeln!(
            s,
            "\n## Publications\n\n| trial | publications | ok | failed | changes | p50 ms | p99 ms | max ms |\n|---|---|---|---|---|---|---|---|"
        );
        for (n, t) in r
            .trials
            .iter()
            .filter_map(|t| t.publications.as_ref().map(|p| (t.trial.to_string(), p)))
            .chain(std::iter::once(("all".to_string(), p)))
        {
            let _ = writeln!(
                s,
                "| {n} | {} | {} | {} | {} | {:.2} | {:.2} | {:.2} |",
                t.publications,
                t.ok,
                t.failures,
                t.changes,
                t.latency.p50_ms,
                t.latency.p99_ms,
                t.latency.max_ms,
            );
        }
    }
    if let Some(f) = &r.failover {
        let _ = writeln!(
            s,
            "\n## Failover\n\n| replication | happened | at ms | without a primary ms | connections cut | calls answered unavailable | answered routes lost |\n|---|---|---|---|---|---|---|\n| {} | {} | {:.0} | {:.0} | {} | {} | {} |",
            f.replication,
            if f.happened { "yes" } else { "**no**" },
            f.at_ms,
            f.without_primary_ms,
            f.connections_cut,
            f.unavailable_calls,
            if f.lost_routes == 0 {
                "0".to_string()
            } else {
                format!("**{}**", f.lost_routes)
            },
        );
        if let Some(reason) = &f.error {
            let _ = writeln!(s, "\nThe failover failed: {reason}.");
        }
    }
    let i = &r.invariants;
    let _ = writeln!(
        s,
        "\n## Invariants\n\n{} replicas, {} scopes, {} routes ({} of other runs or fleets), {} live reservations checked: **{} violations**.",
        i.checked.replicas,
        i.checked.scopes,
        i.checked.routes,
        i.checked.foreign_routes,
        i.checked.live_reservations,
        i.violations
    );
    if let Some(d) = &i.database {
        let _ = writeln!(
            s,
            "\nWhole database, counted by the server through the control role: {} assignments, {} replicas, {} admission counters; {} actions with two assignments, {} reused fences, {} replicas and {} counters off their reservations, {} assignments without their snapshot.\n",
            d.assignments,
            d.replicas,
            d.counters,
            d.duplicate_actions,
            d.reused_fences,
            d.replicas_mismatched,
            d.counters_mismatched,
            d.routes_without_snapshot
        );
    }
    for d in &i.details {
        let _ = writeln!(s, "- {d}");
    }
    if let Some(c) = &r.cleanup {
        let _ = writeln!(
            s,
            "\n## Cleanup\n\n{} rows with prefix `{}` removed, {} left{}.",
            c.rows_removed,
            c.prefix,
            c.rows_left,
            c.error
                .as_ref()
                .map_or(String::new(), |e| format!(" (failed: {e})"))
        );
    }
    let _ = writeln!(s, "\n## Plots\n");
    let points = plot::time_series_points(r);
    if points < plot::TIME_SERIES_POINTS_MIN {
        let _ = writeln!(
            s,
            "No time series: the measured run holds {points} timeline points, fewer than {} (`plot::TIME_SERIES_POINTS_MIN`).\n",
            plot::TIME_SERIES_POINTS_MIN
        );
    }
    for (file, title) in plots {
        let _ = writeln!(s, "### {title}\n\n![{title}]({file})\n");
    }
    let _ = writeln!(s, "## Verdict: {}", r.verdict.as_str());
    s
}
