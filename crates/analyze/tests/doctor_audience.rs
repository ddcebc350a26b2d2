//! Every finding speaks to whoever can act, in their terms. Who a process is decides it:
//! systemd's generators and a unit's processes are the image builder's, systemd's own forks
//! and the session's manager and bus are no helpers, a program's own child is told to the
//! program's developers with the files it read and why they matter; names come from the
//! executables, not the kernel's 15-character cut; a helper's time on the critical path is
//! one interval, not forty pieces. Small files the doctor knows are told in their own terms:
//! Python modules (import less, or ship the .pyc that are missing), the time-zone database.

mod common;

use coldstart_analyze::doctor::{Audience, Diagnosis, Finding, FindingKind};
use common::doctor::{check_invariants, diagnose, of_kind, one, render};
use common::{MS, scenarios};

/// The finding whose title starts with `start`, with a helpful message when there is none.
fn titled<'d>(d: &'d Diagnosis, start: &str) -> &'d Finding {
    d.findings
        .iter()
        .find(|f| f.title.starts_with(start))
        .unwrap_or_else(|| panic!("no finding titled {start:?} in:\n{}", render(d)))
}

/// Every word the findings say about processes: titles, summaries, suggestions and the names
/// of the processes in their evidence.
fn words(d: &Diagnosis) -> String {
    d.findings
        .iter()
        .flat_map(|f| {
            let names = f.evidence.processes.iter().map(|p| p.comm.clone());
            [f.title.clone(), f.evidence.summary.clone(), f.suggestion.clone()].into_iter().chain(names)
        })
        .collect::<Vec<_>>()
        .join("\n")
}

#[test]
fn systemds_generators_are_the_image_builders_and_its_executor_is_no_helper() {
    let d = diagnose(&scenarios::boot_generators());
    check_invariants(&d);
    let generators = titled(&d, "systemd's generators (systemd-rc-local-generator)");
    assert_eq!(generators.kind, FindingKind::HeavyHelper);
    assert_eq!(generators.audience, Audience::Distribution);
    // The generator's 18 ms on the path, and the executor's 12 + 1 ms that exist only to run it.
    assert_eq!(generators.gain.ns, 31 * MS);
    assert!(
        generators
            .suggestion
            .contains("ln -s /dev/null /etc/systemd/system-generators/systemd-rc-local-generator"),
        "{}",
        generators.suggestion
    );
    let tmpfiles =
        titled(&d, "systemd-tmpfiles-setup.service's systemd-tmpfiles: 25.0 ms on the critical path");
    assert_eq!(tmpfiles.audience, Audience::Distribution);
    assert!(
        tmpfiles.suggestion.contains("systemctl mask systemd-tmpfiles-setup.service"),
        "{}",
        tmpfiles.suggestion
    );
    for f in of_kind(&d, FindingKind::HeavyHelper) {
        assert!(!f.title.contains("(sd-executor)"), "systemd's fork called a helper: {}", f.title);
        assert!(!f.evidence.processes.iter().any(|p| p.pid == 100 || p.pid == 101), "{}", f.title);
    }
    assert!(!words(&d).to_lowercase().contains("avoid starting"), "{}", words(&d));
}

/// A oneshot unit's main process is gone when the units are read, so the trace does not list
/// it among the unit's processes: a child of the service manager is still the unit's, named by
/// the unit that was starting when it started, and told to the image builder.
#[test]
fn a_child_of_systemd_the_trace_gives_no_unit_is_still_the_units() {
    let mut trace = scenarios::boot_generators();
    for unit in &mut trace.units {
        unit.pid = None;
    }
    let d = diagnose(&trace);
    check_invariants(&d);
    let tmpfiles =
        titled(&d, "systemd-tmpfiles-setup.service's systemd-tmpfiles: 25.0 ms on the critical path");
    assert_eq!(tmpfiles.audience, Audience::Distribution);
    assert!(!d.findings.iter().any(|f| f.title.starts_with("systemd runs")), "{}", render(&d));
}

#[test]
fn names_cut_at_fifteen_characters_are_the_executables() {
    let trace = scenarios::boot_generators();
    let a = common::analyze(&trace);
    assert_eq!(a.comm(111), "systemd-rc-local-generator");
    assert_eq!(a.comm(120), "systemd-tmpfiles");
    assert_eq!(a.comm(110), "(sd-executor)", "a name systemd chose stays");
    let said = words(&diagnose(&trace));
    for cut in ["systemd-rc-loca", "systemd-tmpfile", "systemd-fstab-g"] {
        let cut_word = said.split(|c: char| !(c.is_alphanumeric() || c == '-')).any(|w| w == cut);
        assert!(!cut_word, "{cut} in:\n{said}");
    }
}

#[test]
fn the_session_managers_probe_is_told_to_its_developers_and_the_bus_is_no_helper() {
    let d = diagnose(&scenarios::session_probe());
    check_invariants(&d);
    let probe = titled(&d, "mate-session runs mate-session-check-accelerated, which loads the GL stack");
    assert_eq!(probe.gain.ns, 50 * MS);
    assert_eq!(probe.audience, Audience::Developers);
    assert!(probe.suggestion.contains("cache the answer"), "{}", probe.suggestion);
    assert!(probe.evidence.summary.contains("libLLVM-15.so.1 (8.0 MiB: LLVM"), "{}", probe.evidence.summary);
    assert!(probe.evidence.files[0].name.ends_with("libLLVM-15.so.1"));
    // The session manager, the session bus and the bus's fork (20 ms on the path) are no helpers.
    for f in &d.findings {
        assert!(!f.evidence.processes.iter().any(|p| [101, 105, 110].contains(&p.pid)), "{}", f.title);
    }
    assert_eq!(of_kind(&d, FindingKind::HeavyHelper).len(), 1, "{}", render(&d));
    assert!(!words(&d).to_lowercase().contains("avoid starting"), "{}", words(&d));
}

#[test]
fn a_programs_own_child_is_told_to_the_programs_developers() {
    let d = diagnose(&scenarios::helper());
    let f = titled(&d, "app runs cpp: 30.0 ms on the critical path");
    assert_eq!(f.audience, Audience::Developers);
    assert!(
        f.suggestion.starts_with("app starts cpp itself: app's developers can cache"),
        "{}",
        f.suggestion
    );
}

#[test]
fn a_helpers_time_on_the_critical_path_is_one_interval_not_its_pieces() {
    let d = diagnose(&scenarios::helper_talking_to_x());
    let f = one(&d, FindingKind::HeavyHelper);
    let spans: Vec<(i64, i64)> = f.evidence.intervals.iter().map(|iv| (iv.start_ns, iv.end_ns)).collect();
    assert_eq!(spans, vec![(5 * MS, 45 * MS)], "{:#?}", f.evidence.intervals);
}

#[test]
fn python_modules_with_their_pyc_are_told_to_import_less_not_to_merge_into_a_cache_file() {
    let d = diagnose(&scenarios::small_files_named(|i| {
        format!("/usr/lib/python3/dist-packages/pkg/__pycache__/m{i:02}.cpython-311.pyc")
    }));
    let f = one(&d, FindingKind::ManySmallFiles);
    assert_eq!(f.audience, Audience::Developers);
    assert!(f.suggestion.starts_with("Python imported 40 modules"), "{}", f.suggestion);
    assert!(
        f.suggestion.contains("python3 -X importtime") && !f.suggestion.contains("cache file"),
        "{}",
        f.suggestion
    );
}

#[test]
fn python_sources_without_their_pyc_are_the_distributions_to_compile() {
    let d =
        diagnose(&scenarios::small_files_named(|i| format!("/usr/lib/python3/dist-packages/pkg/m{i:02}.py")));
    let f = one(&d, FindingKind::ManySmallFiles);
    assert_eq!(f.audience, Audience::Distribution);
    assert!(f.suggestion.contains("ship the .pyc files"), "{}", f.suggestion);
}

#[test]
fn the_time_zone_database_read_whole_is_a_listing_to_avoid() {
    let d = diagnose(&scenarios::small_files_named(|i| format!("/usr/share/zoneinfo/Zone/City{i:02}")));
    let f = one(&d, FindingKind::ManySmallFiles);
    assert!(f.suggestion.contains("tzdata.zi") && !f.suggestion.contains("cache file"), "{}", f.suggestion);
}

#[test]
fn systemds_unit_files_are_the_image_builders_to_leave_out_or_read_ahead() {
    let d =
        diagnose(&scenarios::small_files_named(|i| format!("/usr/lib/systemd/system/unit{i:02}.service")));
    let f = one(&d, FindingKind::ManySmallFiles);
    assert_eq!(f.audience, Audience::Distribution);
    assert!(
        f.suggestion.contains("boot enable --prefetch") && !f.suggestion.contains("cache file"),
        "{}",
        f.suggestion
    );
}
