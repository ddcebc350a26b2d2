//! SIGINT/SIGTERM sent to us while a command runs: forwarded to its tree, and the
//! wait returns `exit` (the command exited from it) or `interrupted`. In a test
//! binary of its own, since the signal reaches every wait of the process.

mod common;

use std::time::Duration;

use coldstart_launch::{Ending, PausedChild, Reason, Until, WaitOptions};
use common::{alive, sh};

fn raise_later(signal: i32) -> std::thread::JoinHandle<()> {
    std::thread::spawn(move || {
        std::thread::sleep(Duration::from_millis(200));
        // SAFETY: sending a signal to our own process, which catches it while a command runs.
        unsafe { libc::kill(libc::getpid(), signal) };
    })
}

#[test]
fn forwarded_signals_end_the_wait() {
    let options = WaitOptions {
        timeout: Some(Duration::from_secs(60)),
        interrupt_grace: Duration::from_millis(500),
        ..WaitOptions::default()
    };

    // A command that exits when interrupted: the reason is `exit`, with its status.
    let script = "trap 'exit 5' INT; echo armed; while :; do sleep 0.05; done";
    let mut running = PausedChild::spawn(&sh(script)).unwrap().resume().unwrap();
    assert!(running.wait(&"output:armed".parse().unwrap(), &options).unwrap().met);
    let raiser = raise_later(libc::SIGINT);
    let outcome = running.wait(&Until::Mark("never".into()), &options).unwrap();
    raiser.join().unwrap();
    assert_eq!(outcome.reason, Reason::Exit);
    assert_eq!(outcome.signal, Some(libc::SIGINT));
    assert_eq!(outcome.exit_status, Some(5));
    running.finish(&Ending::default()).unwrap();

    // A command that ignores it: the reason is `interrupted`, and finish still ends it.
    let script = "trap '' TERM; echo armed; while :; do sleep 0.05; done";
    let mut running = PausedChild::spawn(&sh(script)).unwrap().resume().unwrap();
    assert!(running.wait(&"output:armed".parse().unwrap(), &options).unwrap().met);
    let pid = running.pid();
    let raiser = raise_later(libc::SIGTERM);
    let outcome = running.wait(&Until::Exit, &options).unwrap();
    raiser.join().unwrap();
    assert_eq!(outcome.reason, Reason::Interrupted);
    assert_eq!(outcome.signal, Some(libc::SIGTERM));
    assert_eq!(outcome.exit_status, None);
    let finished = running.finish(&Ending::Terminate { grace: Duration::from_millis(100) }).unwrap();
    assert!(finished.killed >= 1);
    assert!(!alive(pid));
}
