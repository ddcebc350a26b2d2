//! What the boot prefetch service (`coldstart boot enable --prefetch`) does at each boot,
//! decided from the history of earlier boots and what it sees of the machine now, without
//! touching the system: learn (record, then plan); verify (boots with and without the plan
//! in a random but balanced order, timed to their target); keep the plan when the boots
//! with it are faster with the interval of the ratio of medians below 1, otherwise switch it
//! off and say why; verify again every so many boots; learn again when the plan is stale.

use serde::{Deserialize, Serialize};

use crate::stats::{median, median_ratio};

/// What a boot does with the plan.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum Role {
    /// Recorded to make a plan from; no plan replayed.
    Learn,
    /// The plan replayed alongside the boot.
    WithPlan,
    /// The plan left alone: the comparison's other side, or the plan switched off.
    WithoutPlan,
}

impl Role {
    pub fn name(self) -> &'static str {
        match self {
            Role::Learn => "learning",
            Role::WithPlan => "with plan",
            Role::WithoutPlan => "without plan",
        }
    }
}

/// What makes a plan of this machine's boot hold: when one of these changes, the files and
/// blocks the boot reads have probably changed too.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Machine {
    /// `uname -r`.
    pub kernel: String,
    /// The root filesystem's device and source (`major:minor source`).
    pub root_device: String,
    /// Modification time of the package manager's database (dpkg's status, rpm's db), ns
    /// since 1970; 0 when there is none.
    pub packages_stamp: i64,
}

/// The paired comparison of a verification round: median time to target with the plan over
/// median without, with a 95% bootstrap interval.
#[derive(Clone, Copy, Debug, PartialEq, Serialize, Deserialize)]
pub struct Verdict {
    pub ratio: f64,
    pub interval: (f64, f64),
    pub with: usize,
    pub without: usize,
}

impl Verdict {
    /// The plan pays: the whole interval is below 1.
    pub fn keeps(&self) -> bool {
        self.interval.1 < 1.0
    }

    pub fn describe(&self) -> String {
        format!(
            "with the plan {:.2}× [{:.2} … {:.2}] of without ({} + {} boots)",
            self.ratio, self.interval.0, self.interval.1, self.with, self.without
        )
    }
}

/// One boot of the history (a line of history.jsonl).
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct BootRow {
    /// When the boot's row was written, s since 1970.
    pub at_unix_s: i64,
    pub role: Role,
    /// The plan in force (its id), if any.
    pub plan: Option<String>,
    /// From the boot's start to its target, s; `None` when the target was not reached.
    pub target_s: Option<f64>,
    /// The share of the plan's pages the boot itself used (0 to 1), when there was a plan.
    pub plan_used: Option<f64>,
    /// Bytes the boot still read from disk that the plan does not cover.
    pub read_left_bytes: u64,
    pub machine: Machine,
    /// The decision taken for this boot, in one word: learning, verifying, kept, off.
    pub state: String,
    pub reason: String,
    /// The comparison the decision rests on, once there is one.
    #[serde(default)]
    pub verdict: Option<Verdict>,
    /// The boot's trace file name, while it is kept.
    #[serde(default)]
    pub trace: Option<String>,
}

/// The plan the service has, as it is now.
#[derive(Clone, Debug, PartialEq)]
pub struct PlanNow {
    pub id: String,
    /// The machine when the plan was made.
    pub made_on: Machine,
    /// Share of the planned bytes whose files changed or disappeared since (0 to 1).
    pub stale_share: f64,
}

/// The service's settings (`boot enable --prefetch --verify-boots … --reverify-every …`).
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Params {
    /// Timed boots with the plan, and as many without, before a verdict.
    pub verify_boots: usize,
    /// Boots after a verdict before the next verification round.
    pub reverify_every: usize,
    /// Learning boots a plan is made from (the pages more than half of them used).
    pub learn_boots: usize,
    /// Re-learn when more than this share of the planned bytes is stale.
    pub max_stale: f64,
    /// Re-learn when the boots use less than this share of the plan (median of the last 3).
    pub min_used: f64,
}

impl Default for Params {
    fn default() -> Params {
        Params { verify_boots: 3, reverify_every: 20, learn_boots: 2, max_stale: 0.1, min_used: 0.5 }
    }
}

/// Where the plan stands.
#[derive(Clone, Debug, PartialEq)]
pub enum PlanState {
    Learning,
    Verifying,
    Kept(Verdict),
    Off(Verdict),
}

impl PlanState {
    pub fn word(&self) -> &'static str {
        match self {
            PlanState::Learning => "learning",
            PlanState::Verifying => "verifying",
            PlanState::Kept(_) => "kept",
            PlanState::Off(_) => "off",
        }
    }

    pub fn verdict(&self) -> Option<Verdict> {
        match self {
            PlanState::Kept(v) | PlanState::Off(v) => Some(*v),
            _ => None,
        }
    }
}

/// What this boot does, and why.
#[derive(Clone, Debug, PartialEq)]
pub struct Decision {
    pub role: Role,
    pub state: PlanState,
    pub reason: String,
    /// The plan is stale: drop it before learning again.
    pub drop_plan: bool,
}

/// This boot's decision. `coin` is a random bit from the caller: which side a verification
/// boot takes when both sides have as many boots.
pub fn decide(
    history: &[BootRow],
    plan: Option<&PlanNow>,
    now: &Machine,
    params: &Params,
    coin: bool,
) -> Decision {
    let Some(plan) = plan else {
        let learned = learning_traces(history).len();
        return learning(
            format!("no plan yet: learning boot {} of {}", learned + 1, params.learn_boots.max(1)),
            false,
        );
    };
    let rows: Vec<&BootRow> =
        history.iter().filter(|r| r.plan.as_deref() == Some(plan.id.as_str())).collect();
    if let Some(why) = stale(&rows, plan, now, params) {
        return learning(format!("learning again: {why}"), true);
    }
    match verification(&rows, params) {
        Round::Decided { verdict, since } if verdict.keeps() => Decision {
            role: Role::WithPlan,
            state: PlanState::Kept(verdict),
            reason: format!(
                "kept: {}; verified again in {} boots",
                verdict.describe(),
                params.reverify_every.saturating_sub(since)
            ),
            drop_plan: false,
        },
        Round::Decided { verdict, since } => Decision {
            role: Role::WithoutPlan,
            state: PlanState::Off(verdict),
            reason: format!(
                "off: {}, the interval reaches 1; verified again in {} boots",
                verdict.describe(),
                params.reverify_every.saturating_sub(since)
            ),
            drop_plan: false,
        },
        Round::Verifying { with, without } => {
            let role = balanced_side(with, without, params.verify_boots, coin);
            Decision {
                role,
                state: PlanState::Verifying,
                reason: format!(
                    "verifying: {with} of {n} boots with the plan, {without} of {n} without",
                    n = params.verify_boots
                ),
                drop_plan: false,
            }
        }
    }
}

/// The traces of the learning boots since the last plan (oldest first): those that wrote
/// one. A boot that learned without a trace does not count.
fn learning_traces(history: &[BootRow]) -> Vec<&str> {
    let mut traces: Vec<&str> = history
        .iter()
        .rev()
        .take_while(|r| r.role == Role::Learn && r.plan.is_none())
        .filter_map(|r| r.trace.as_deref())
        .collect();
    traces.reverse();
    traces
}

/// The traces a plan is made from once this learning boot (whose trace is `this_trace`) is
/// over: the last `learn_boots` learning boots' traces, this one's last, when there are that
/// many; `None` while the service still learns. The plan keeps the pages more than half of
/// them used, so a page one boot happened to read is left out.
pub fn plan_from(history: &[BootRow], this_trace: Option<&str>, params: &Params) -> Option<Vec<String>> {
    let this_trace = this_trace?;
    let mut traces: Vec<String> = learning_traces(history).into_iter().map(str::to_owned).collect();
    traces.push(this_trace.to_owned());
    let need = params.learn_boots.max(1);
    (traces.len() >= need).then(|| traces.split_off(traces.len() - need))
}

fn learning(reason: String, drop_plan: bool) -> Decision {
    Decision { role: Role::Learn, state: PlanState::Learning, reason, drop_plan }
}

/// Why the plan no longer describes this machine's boot, if it does not.
fn stale(rows: &[&BootRow], plan: &PlanNow, now: &Machine, params: &Params) -> Option<String> {
    let made = &plan.made_on;
    if now.kernel != made.kernel {
        return Some(format!("the kernel changed ({} → {})", made.kernel, now.kernel));
    }
    if now.root_device != made.root_device {
        return Some(format!("the root device changed ({} → {})", made.root_device, now.root_device));
    }
    if now.packages_stamp > made.packages_stamp {
        return Some("a package manager ran since the plan was made".into());
    }
    if plan.stale_share > params.max_stale {
        return Some(format!(
            "{:.0}% of the planned bytes changed or disappeared (limit {:.0}%)",
            plan.stale_share * 100.0,
            params.max_stale * 100.0
        ));
    }
    let used: Vec<f64> = rows.iter().rev().filter_map(|r| r.plan_used).take(3).collect();
    if used.len() == 3 && median(&used) < params.min_used {
        return Some(format!(
            "the last boots used {:.0}% of the plan (less than {:.0}%)",
            median(&used) * 100.0,
            params.min_used * 100.0
        ));
    }
    None
}

enum Round {
    Verifying { with: usize, without: usize },
    Decided { verdict: Verdict, since: usize },
}

/// Walks the plan's boots through its verification rounds: a round ends when it holds
/// `verify_boots` timed boots each way; the next starts `reverify_every` boots later.
fn verification(rows: &[&BootRow], params: &Params) -> Round {
    let need = params.verify_boots.max(1);
    let mut start = 0;
    loop {
        let (mut with, mut without) = (Vec::new(), Vec::new());
        let mut end = None;
        for (i, row) in rows.iter().enumerate().skip(start) {
            match (row.role, row.target_s) {
                (Role::WithPlan, Some(t)) => with.push(t),
                (Role::WithoutPlan, Some(t)) => without.push(t),
                _ => {}
            }
            if with.len() >= need && without.len() >= need {
                end = Some(i + 1);
                break;
            }
        }
        let Some(end) = end else {
            return Round::Verifying { with: with.len(), without: without.len() };
        };
        let verdict = compare(&with, &without);
        let since = rows.len() - end;
        if since < params.reverify_every.max(1) {
            return Round::Decided { verdict, since };
        }
        start = end + params.reverify_every.max(1);
    }
}

/// The ratio of medians with its bootstrap interval; an unusable comparison (a time of 0)
/// counts as not paying.
fn compare(with: &[f64], without: &[f64]) -> Verdict {
    let (ratio, interval) = median_ratio(with, without).unwrap_or((f64::NAN, (f64::NAN, f64::INFINITY)));
    Verdict { ratio, interval, with: with.len(), without: without.len() }
}

/// The side of a verification boot: the one short of boots, or, when both have as many,
/// the coin's.
fn balanced_side(with: usize, without: usize, need: usize, coin: bool) -> Role {
    let side = |with_plan: bool| if with_plan { Role::WithPlan } else { Role::WithoutPlan };
    if with >= need {
        Role::WithoutPlan
    } else if without >= need || with != without {
        side(with < without)
    } else {
        side(coin)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn machine() -> Machine {
        Machine {
            kernel: "6.1.0-13-amd64".into(),
            root_device: "254:1 /dev/vda1".into(),
            packages_stamp: 1000,
        }
    }

    fn plan() -> PlanNow {
        PlanNow { id: "plan-1".into(), made_on: machine(), stale_share: 0.0 }
    }

    fn row(role: Role, target_s: f64) -> BootRow {
        BootRow {
            at_unix_s: 0,
            role,
            plan: (role != Role::Learn).then(|| "plan-1".into()),
            target_s: Some(target_s),
            plan_used: Some(0.9),
            read_left_bytes: 0,
            machine: machine(),
            state: String::new(),
            reason: String::new(),
            verdict: None,
            trace: None,
        }
    }

    /// Boots with the plan at `with` seconds and without at `without`, alternating.
    fn verified(with: &[f64], without: &[f64]) -> Vec<BootRow> {
        let mut rows = vec![row(Role::Learn, 10.0)];
        for (w, o) in with.iter().zip(without) {
            rows.push(row(Role::WithPlan, *w));
            rows.push(row(Role::WithoutPlan, *o));
        }
        rows
    }

    fn check(history: &[BootRow], plan: Option<&PlanNow>, now: &Machine, params: &Params) -> Decision {
        decide(history, plan, now, params, true)
    }

    fn learned(trace: Option<&str>) -> BootRow {
        BootRow { trace: trace.map(str::to_owned), plan_used: None, ..row(Role::Learn, 9.0) }
    }

    #[test]
    fn without_a_plan_the_boot_learns() {
        let d = check(&[], None, &machine(), &Params::default());
        assert_eq!((d.role, d.state.word(), d.drop_plan), (Role::Learn, "learning", false));
        let params = Params { learn_boots: 3, ..Params::default() };
        let d = check(&[learned(Some("boot-1.coldstart"))], None, &machine(), &params);
        assert!(d.reason.contains("learning boot 2 of 3"), "{}", d.reason);
    }

    #[test]
    fn the_plan_is_made_from_the_last_learning_boots_that_wrote_a_trace() {
        let params = Params { learn_boots: 2, ..Params::default() };
        assert_eq!(plan_from(&[], Some("b1"), &params), None, "one learning boot of two");
        let history = [learned(Some("b1"))];
        assert_eq!(plan_from(&history, Some("b2"), &params), Some(vec!["b1".into(), "b2".into()]));
        assert_eq!(plan_from(&history, None, &params), None, "this boot wrote no trace");
        let d = check(&[learned(Some("b1")), learned(None)], None, &machine(), &params);
        assert!(
            d.reason.contains("learning boot 2 of 2"),
            "a boot without a trace does not count: {}",
            d.reason
        );
        // Three learning boots, two wanted: the last two.
        let history = [learned(Some("b1")), learned(Some("b2"))];
        assert_eq!(plan_from(&history, Some("b3"), &params), Some(vec!["b2".into(), "b3".into()]));
        // Boots that learned an earlier plan do not count for the next one.
        let mut history = verified(&[4.0; 3], &[8.0; 3]);
        history[0].trace = Some("b0".into());
        assert_eq!(plan_from(&history, Some("b9"), &params), None, "{history:?}");
        let one = Params { learn_boots: 1, ..params };
        assert_eq!(plan_from(&history, Some("b9"), &one), Some(vec!["b9".into()]));
    }

    #[test]
    fn verification_alternates_until_each_side_has_its_boots() {
        let params = Params::default();
        let mut history = vec![row(Role::Learn, 10.0)];
        let mut roles = Vec::new();
        for coin in [true, false, true, false, true, false] {
            let d = decide(&history, Some(&plan()), &machine(), &params, coin);
            assert_eq!(d.state, PlanState::Verifying, "{}", d.reason);
            roles.push(d.role);
            history.push(row(d.role, 5.0));
        }
        let with = roles.iter().filter(|r| **r == Role::WithPlan).count();
        assert_eq!(with, 3, "{roles:?}");
        // The coin decides only between even counts: never two ahead.
        let mut lead = 0i32;
        for r in &roles {
            lead += if *r == Role::WithPlan { 1 } else { -1 };
            assert!(lead.abs() <= 1, "{roles:?}");
        }
        let mut history = verified(&[4.0, 4.0], &[8.0, 8.0]);
        history.push(row(Role::WithPlan, 4.0));
        let d = check(&history, Some(&plan()), &machine(), &params);
        assert_eq!(d.role, Role::WithoutPlan, "the side short of boots: {}", d.reason);
    }

    #[test]
    fn a_plan_whose_interval_is_below_1_is_kept() {
        let history = verified(&[4.0, 4.2, 3.9], &[8.0, 8.5, 7.9]);
        let d = check(&history, Some(&plan()), &machine(), &Params::default());
        let PlanState::Kept(v) = d.state else { panic!("{d:?}") };
        assert_eq!(d.role, Role::WithPlan);
        assert!((v.ratio - 4.0 / 8.0).abs() < 1e-9 && v.interval.1 < 1.0, "{v:?}");
        assert!(d.reason.starts_with("kept: with the plan 0.50×"), "{}", d.reason);
    }

    #[test]
    fn a_plan_whose_interval_reaches_1_is_switched_off_with_the_reason() {
        let history = verified(&[4.0, 9.0, 5.0], &[8.0, 5.0, 6.0]);
        let d = check(&history, Some(&plan()), &machine(), &Params::default());
        let PlanState::Off(v) = d.state else { panic!("{d:?}") };
        assert_eq!(d.role, Role::WithoutPlan);
        assert!(v.interval.1 >= 1.0, "{v:?}");
        assert!(d.reason.contains("the interval reaches 1"), "{}", d.reason);
    }

    #[test]
    fn a_verdict_is_verified_again_after_the_period() {
        let params = Params { reverify_every: 4, ..Params::default() };
        let mut history = verified(&[4.0, 4.0, 4.0], &[8.0, 8.0, 8.0]);
        for _ in 0..3 {
            history.push(row(Role::WithPlan, 4.0));
        }
        let d = check(&history, Some(&plan()), &machine(), &params);
        assert!(matches!(d.state, PlanState::Kept(_)), "3 boots after: still kept: {d:?}");
        history.push(row(Role::WithPlan, 4.0));
        let d = check(&history, Some(&plan()), &machine(), &params);
        assert_eq!(d.state, PlanState::Verifying, "4 boots after: {d:?}");
        // The new round ends in its own verdict: the plan stopped paying.
        for _ in 0..3 {
            history.push(row(Role::WithPlan, 8.0));
            history.push(row(Role::WithoutPlan, 8.0));
        }
        let d = check(&history, Some(&plan()), &machine(), &params);
        assert!(matches!(d.state, PlanState::Off(_)), "{d:?}");
    }

    #[test]
    fn boots_that_missed_their_target_do_not_count_in_the_comparison() {
        let mut history = verified(&[4.0, 4.0], &[8.0, 8.0]);
        let mut missed = row(Role::WithPlan, 0.0);
        missed.target_s = None;
        history.push(missed);
        history.push(row(Role::WithoutPlan, 8.0));
        let d = check(&history, Some(&plan()), &machine(), &Params::default());
        assert_eq!((d.state.clone(), d.role), (PlanState::Verifying, Role::WithPlan), "{d:?}");
    }

    fn relearns(now: &Machine, plan: &PlanNow, history: &[BootRow], why: &str) {
        let d = check(history, Some(plan), now, &Params::default());
        assert_eq!((d.role, d.drop_plan), (Role::Learn, true), "{d:?}");
        assert!(d.reason.contains(why), "{}", d.reason);
        // The same history on the plan's own machine keeps going.
        let fresh = PlanNow { stale_share: 0.0, ..plan.clone() };
        let kept = check(&fresh_history(history), Some(&fresh), &machine(), &Params::default());
        assert!(!kept.drop_plan, "{kept:?}");
    }

    fn fresh_history(history: &[BootRow]) -> Vec<BootRow> {
        history.iter().cloned().map(|r| BootRow { plan_used: Some(0.9), ..r }).collect()
    }

    #[test]
    fn a_new_kernel_makes_the_boot_learn_again() {
        let history = verified(&[4.0; 3], &[8.0; 3]);
        let now = Machine { kernel: "6.1.0-18-amd64".into(), ..machine() };
        relearns(&now, &plan(), &history, "the kernel changed (6.1.0-13-amd64 → 6.1.0-18-amd64)");
    }

    #[test]
    fn another_root_device_makes_the_boot_learn_again() {
        let now = Machine { root_device: "259:2 /dev/nvme0n1p2".into(), ..machine() };
        relearns(&now, &plan(), &verified(&[4.0; 3], &[8.0; 3]), "the root device changed");
    }

    #[test]
    fn a_package_manager_run_makes_the_boot_learn_again() {
        let now = Machine { packages_stamp: 2000, ..machine() };
        relearns(&now, &plan(), &verified(&[4.0; 3], &[8.0; 3]), "a package manager ran");
    }

    #[test]
    fn planned_files_changed_beyond_the_limit_make_the_boot_learn_again() {
        let stale = PlanNow { stale_share: 0.25, ..plan() };
        relearns(&machine(), &stale, &verified(&[4.0; 3], &[8.0; 3]), "25% of the planned bytes");
        let within = PlanNow { stale_share: 0.05, ..plan() };
        let d = check(&verified(&[4.0; 3], &[8.0; 3]), Some(&within), &machine(), &Params::default());
        assert!(!d.drop_plan, "{d:?}");
    }

    #[test]
    fn a_falling_share_of_the_plan_used_makes_the_boot_learn_again() {
        let mut history = verified(&[4.0; 3], &[8.0; 3]);
        for used in [0.3, 0.2, 0.4] {
            history.push(BootRow { plan_used: Some(used), ..row(Role::WithPlan, 4.0) });
        }
        relearns(&machine(), &plan(), &history, "the last boots used 30% of the plan");
        // One poor boot is not a trend.
        history.truncate(history.len() - 2);
        let d = check(&history, Some(&plan()), &machine(), &Params::default());
        assert!(!d.drop_plan, "{d:?}");
    }

    #[test]
    fn boots_of_an_earlier_plan_do_not_count_for_a_new_one() {
        let mut history = verified(&[4.0; 3], &[8.0; 3]);
        let new_plan = PlanNow { id: "plan-2".into(), ..plan() };
        history.push(row(Role::Learn, 9.0));
        let d = check(&history, Some(&new_plan), &machine(), &Params::default());
        assert_eq!(d.state, PlanState::Verifying, "{d:?}");
    }
}
