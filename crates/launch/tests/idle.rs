//! `idle:MS` readiness: it fires only after the command's burst of work is over and
//! the machine stayed quiet for MS. In a test binary of its own so that no other
//! test of ours keeps the CPUs busy meanwhile.

mod common;

use std::time::Duration;

use coldstart_launch::{Ending, PausedChild, Reason, WaitOptions};
use common::sh;

#[test]
fn idle_fires_after_the_burst_and_the_quiet_period() {
    let script = r#"end=$(($(cut -d. -f1 /proc/uptime) + 1));
        while [ "$(cut -d. -f1 /proc/uptime)" -le "$end" ]; do :; done;
        echo "$(cut -d' ' -f1 /proc/uptime) busy-done" >> "$COLDSTART_MARKS"; exec sleep 300"#;
    let mut running = PausedChild::spawn(&sh(script)).unwrap().resume().unwrap();
    let options = WaitOptions { timeout: Some(Duration::from_secs(30)), ..WaitOptions::default() };
    let outcome = running.wait(&"idle:300".parse().unwrap(), &options).unwrap();
    let finished = running.finish(&Ending::default()).unwrap();
    if outcome.reason == Reason::Timeout && std::env::var("CI").as_deref() != Ok("true") {
        eprintln!("skipped: the machine never stayed quiet for 300 ms within 30 s (other load)");
        return;
    }
    assert_eq!(outcome.reason, Reason::Idle(300));
    let busy_done =
        finished.marks.marks.iter().find(|m| m.name == "busy-done").expect("the busy loop ended").boottime_ns;
    assert!(
        outcome.ready_ns + 100_000_000 >= busy_done,
        "quiet began no earlier than one sample before the loop ended"
    );
    assert!(
        outcome.detected_ns - outcome.ready_ns >= 300_000_000,
        "and lasted 300 ms before it was declared"
    );
}
