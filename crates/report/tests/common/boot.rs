//! The small synthetic start of `common::fixture` as a boot with systemd units, shared by
//! the tests of the units' reports, the chart's golden files and the visible-text check.

use coldstart_trace::{ReadyReason, Trace, Unit};

use crate::common::{MS, fixture};

fn unit(name: &str, activating: i64, active: i64, pid: Option<i32>, after: &[&str]) -> Unit {
    Unit {
        name: name.into(),
        manager: "container".into(),
        activating_ns: Some(activating * MS),
        active_ns: Some(active * MS),
        deactivating_ns: None,
        pid,
        after: after.iter().map(|a| (*a).to_owned()).collect(),
    }
}

/// The fixture as a boot: `app` (100) is app.service, its child `helper` (200)
/// helper.service, which wakes app after app slept 48 ms; multi-user.target follows both.
pub fn boot() -> Trace {
    let mut trace = fixture();
    trace.units = vec![
        unit("helper.service", 30, 90, Some(200), &["basic.target"]),
        unit("app.service", 2, 100, Some(100), &["basic.target"]),
        unit("basic.target", 1, 1, None, &[]),
        unit("multi-user.target", 105, 105, None, &["app.service", "helper.service"]),
    ];
    if let Some(ready) = &mut trace.meta.ready {
        ready.t_ns = 105 * MS;
        ready.reason = ReadyReason::Unit("multi-user.target".into());
    }
    trace
}
