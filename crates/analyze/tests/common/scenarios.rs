//! One synthetic start per finding, each with the cause the finding looks for and
//! known figures (see the test that uses it for the arithmetic), and clean starts.

use coldstart_trace::ThreadState::*;
use coldstart_trace::*;

use super::{Builder, MS};

/// 40 plugin descriptions of 4 KiB under /usr/share/app/plugins, each read with one
/// request and a 5 ms wait, then 50 ms of CPU: ready at 290 ms.
pub fn small_files() -> Trace {
    small_files_named(|i| format!("/usr/share/app/plugins/p{i:02}.desc"))
}

/// [`small_files`] with the 40 files named by `name` (of 0..40).
pub fn small_files_named(name: impl Fn(u32) -> String) -> Trace {
    let mut s = Builder::start();
    for i in 0..40 {
        s = s.placed_file(i + 1, &name(i), 4096);
    }
    let mut t = 0;
    for i in 0..40 {
        (s, t) = s.read_step(t, 100, 100, i + 1, 0, 1, 5 * MS);
    }
    s.run(100, t, t + 50 * MS).ready_at_exit(t + 50 * MS).build()
}

/// An 8 MiB library faulted in as 16 pieces of 64 KiB, 4 ms of wait each, then 20 ms of
/// CPU: ready at 100 ms.
pub fn library_in_pieces() -> Trace {
    let mut s = Builder::start().placed_file(1, "/usr/lib/libbig.so.1", 8 << 20);
    let mut t = 0;
    for i in 0..16u64 {
        s = s
            .run(100, t, t + MS)
            .fill(t + MS, 100, 100, 1, i * 128, 16)
            .fill_origin(PageOrigin::Fault)
            .request(t + MS, t + 5 * MS, 1, i * 128, 64 * 1024, 100, "app")
            .sched(100, t + MS, t + 5 * MS, IoWait);
        t += 5 * MS;
    }
    s.run(100, t, t + 20 * MS).ready_at_exit(t + 20 * MS).build()
}

/// `app` starts `cpp` at 5 ms and sleeps until it is woken by it at 35 ms; `cpp` runs
/// 5–35 ms and exits; `app` runs to ready at 100 ms.
pub fn helper() -> Trace {
    Builder::start()
        .program(200, 100, "cpp", 5 * MS, Some(35 * MS))
        .run(100, 0, 5 * MS)
        .sleep(100, 5 * MS, 35 * MS, Some(200))
        .run(200, 5 * MS, 35 * MS)
        .run(100, 35 * MS, 100 * MS)
        .ready_at_exit(100 * MS)
        .build()
}

/// A start script: `app` runs `dirname`, `sed` and `dirname` one after the other (8 ms each),
/// waiting for each; then 76 ms of its own CPU: ready at 100 ms.
pub fn shell_helpers() -> Trace {
    let mut s = Builder::start().run(100, 0, MS);
    let mut t = MS;
    for (pid, comm) in [(201, "dirname"), (202, "sed"), (203, "dirname")] {
        s = s.program(pid, 100, comm, t, Some(t + 8 * MS)).sleep(100, t, t + 8 * MS, Some(pid)).run(
            pid,
            t,
            t + 8 * MS,
        );
        t += 8 * MS;
    }
    s.run(100, t, 100 * MS).ready_at_exit(100 * MS).build()
}

/// `app` maps two files (20 ms of wait each); `indexer` (in scope, not on the path; its
/// second read from its thread 301) and `updatedb` (pid 999, outside the trace) read from
/// the disk meanwhile: 16 ms and 12 ms of disk time, none overlapping another request.
/// Ready at 100 ms.
pub fn work_that_can_wait() -> Trace {
    Builder::start()
        .program(300, 100, "indexer", MS, None)
        .thread(301, 300, "indexer-io")
        .placed_file(1, "/usr/lib/app/data1", 40960)
        .placed_file(2, "/usr/lib/app/data2", 40960)
        .placed_file(3, "/var/lib/indexer/db", 1 << 20)
        .run(100, 0, 10 * MS)
        .fill(10 * MS, 100, 100, 1, 0, 10)
        .fill_origin(PageOrigin::Fault)
        .request(10 * MS, 30 * MS, 1, 0, 40960, 100, "app")
        .sched(100, 10 * MS, 30 * MS, IoWait)
        .run(100, 30 * MS, 40 * MS)
        .fill(40 * MS, 100, 100, 2, 0, 10)
        .fill_origin(PageOrigin::Fault)
        .request(40 * MS, 60 * MS, 2, 0, 40960, 100, "app")
        .sched(100, 40 * MS, 60 * MS, IoWait)
        .run(100, 60 * MS, 100 * MS)
        .fill(2 * MS, 300, 300, 3, 0, 16)
        .fill_origin(PageOrigin::Read)
        .request(MS, 9 * MS, 3, 0, 65536, 300, "indexer")
        .fill(62 * MS, 300, 301, 3, 16, 16)
        .fill_origin(PageOrigin::Read)
        .request(61 * MS, 69 * MS, 3, 16, 65536, 301, "indexer-io")
        .raw_request(super::DISK, 70 * MS, 82 * MS, 90_000_000, 131_072, 999, "updatedb")
        .ready_at_exit(100 * MS)
        .build()
}

/// `app` reads /etc/app/config.xml (256 KiB) with read(), waiting 20 ms, then runs 60 ms
/// before reading anything else; ready at 100 ms.
pub fn read_then_parse() -> Trace {
    Builder::start()
        .placed_file(1, "/etc/app/config.xml", 256 * 1024)
        .placed_file(2, "/usr/share/app/data.bin", 8192)
        .run(100, 0, MS)
        .fill(MS, 100, 100, 1, 0, 64)
        .fill_origin(PageOrigin::Read)
        .request(MS, 21 * MS, 1, 0, 256 * 1024, 100, "app")
        .sched(100, MS, 21 * MS, IoWait)
        .run(100, 21 * MS, 81 * MS)
        .fill(81 * MS, 100, 100, 2, 0, 2)
        .fill_origin(PageOrigin::Read)
        .request(82 * MS, 85 * MS, 2, 0, 8192, 100, "app")
        .sched(100, 81 * MS, 82 * MS, Running)
        .sched(100, 82 * MS, 85 * MS, IoWait)
        .run(100, 85 * MS, 100 * MS)
        .ready_at_exit(100 * MS)
        .build()
}

/// Message catalogs for fr, ja, de and en_GB and a Qt translation for it, each read with a
/// 6 ms wait; the user reads German (see `config`). Ready at 50 ms.
pub fn other_languages() -> Trace {
    let paths = [
        "/usr/share/locale/fr/LC_MESSAGES/app.mo",
        "/usr/share/locale/ja/LC_MESSAGES/app.mo",
        "/usr/share/locale/de/LC_MESSAGES/app.mo",
        "/usr/share/locale/en_GB/LC_MESSAGES/app.mo",
        "/usr/share/qt5/translations/qtbase_it.qm",
    ];
    let mut s = Builder::start();
    for (i, p) in paths.iter().enumerate() {
        s = s.placed_file(i as u32 + 1, p, 4096);
    }
    let mut t = 0;
    for i in 0..paths.len() as u32 {
        (s, t) = s.read_step(t, 100, 100, i + 1, 0, 1, 6 * MS);
    }
    s.run(100, t, 50 * MS).ready_at_exit(50 * MS).build()
}

/// `app` waits twice without reading a page: 10–25 ms while a sync write, a journal commit
/// and a cache flush complete, and 60–70 ms until a flush completes. A sync write while
/// `app` runs (80–82 ms) is not waited for. Ready at 100 ms.
pub fn durable_writes() -> Trace {
    Builder::start()
        .run(100, 0, 10 * MS)
        .sched(100, 10 * MS, 25 * MS, IoWait)
        .write(Some(10 * MS + 100_000), 14 * MS, Some(5000), 8192, "WS", 100, "app")
        .write(Some(15 * MS), 24 * MS + 800_000, Some(9000), 16384, "FWFS", 77, "jbd2/vda1-8")
        .write(None, 24 * MS + 900_000, None, 0, "FN", 0, "")
        .run(100, 25 * MS, 60 * MS)
        .sched(100, 60 * MS, 70 * MS, IoWait)
        .write(None, 69 * MS + 500_000, None, 0, "FN", 0, "")
        .run(100, 70 * MS, 100 * MS)
        .write(Some(80 * MS), 82 * MS, Some(7000), 4096, "WS", 100, "app")
        .ready_at_exit(100 * MS)
        .build()
}

/// `app` sleeps 10–60 ms on a timer, waits 70–90 ms for thread 555 (outside the trace),
/// and sleeps 1 ms (too short to count) at 95 ms. Ready at 100 ms.
pub fn idle_waits() -> Trace {
    Builder::start()
        .run(100, 0, 10 * MS)
        .sleep(100, 10 * MS, 60 * MS, None)
        .run(100, 60 * MS, 70 * MS)
        .sleep(100, 70 * MS, 90 * MS, Some(555))
        .run(100, 90 * MS, 95 * MS)
        .sleep(100, 95 * MS, 96 * MS, None)
        .run(100, 96 * MS, 100 * MS)
        .ready_at_exit(100 * MS)
        .build()
}

/// 18 files of 8 KiB in two clusters far apart on a rotational disk, read alternately
/// (A0 B0 A1 B1 …): each file's first page is a far request (10 ms), its second page
/// follows it (1 ms). Ready at 18 × 12 + 10 = 226 ms.
pub fn scattered_layout() -> Trace {
    let mut s = Builder::start().rotational(true);
    let mut order = Vec::new();
    for i in 0..9u32 {
        let (a, b) = (i + 1, i + 10);
        s = s.placed_file(a, &format!("/data/a/f{i}"), 8192).placed_file(b, &format!("/data/b/f{i}"), 8192);
        order.push(a);
        order.push(b);
    }
    for e in s.trace.extents.iter_mut() {
        let (base, k) =
            if e.file_id <= 9 { (1_000_000u64, e.file_id - 1) } else { (50_000_000, e.file_id - 10) };
        e.physical = (base + u64::from(k) * 16) * 512;
    }
    let mut t = 0;
    for file in order {
        s = s
            .run(100, t, t + MS)
            .fill(t + MS, 100, 100, file, 0, 2)
            .fill_origin(PageOrigin::Read)
            .request(t + MS, t + 11 * MS, file, 0, 4096, 100, "app")
            .request(t + 11 * MS, t + 12 * MS, file, 1, 4096, 100, "app")
            .sched(100, t + MS, t + 12 * MS, IoWait);
        t += 12 * MS;
    }
    s.run(100, t, t + 10 * MS).ready_at_exit(t + 10 * MS).build()
}

/// 400 ms of CPU, one 10 ms read, 90 ms of CPU: ready at 500 ms.
pub fn cpu_bound() -> Trace {
    let s = Builder::start().placed_file(1, "/usr/lib/app/tables.dat", 4096).run(100, 0, 399 * MS);
    let (s, t) = s.read_step(399 * MS, 100, 100, 1, 0, 1, 10 * MS);
    s.run(100, t, 500 * MS).ready_at_exit(500 * MS).build()
}

/// An I/O-bound start with nothing to fix: three 200 KiB libraries mapped in one read each
/// (30 ms of wait), 15 ms of CPU after each. Ready at 140 ms.
pub fn clean_start() -> Trace {
    let mut s = Builder::start();
    let mut t = 0;
    for i in 0..3u32 {
        s = s
            .placed_file(i + 1, &format!("/usr/lib/x86_64-linux-gnu/libpart{i}.so.1"), 200 * 1024)
            .run(100, t, t + 15 * MS)
            .fill(t + 15 * MS, 100, 100, i + 1, 0, 50)
            .fill_origin(PageOrigin::Fault)
            .request(t + 15 * MS, t + 45 * MS, i + 1, 0, 200 * 1024, 100, "app")
            .sched(100, t + 15 * MS, t + 45 * MS, IoWait);
        t += 45 * MS;
    }
    s.run(100, t, 140 * MS).ready_at_exit(140 * MS).build()
}

/// A container boot: `systemd-nspawn` (100) forks the container's systemd (101), which forks
/// `(sd-executor)` (110, a fork that never execs) to run two generators, named by the kernel
/// `systemd-rc-loca` and `systemd-fstab-g`; the executor forks them at 22 ms and waits for
/// the last, the rc-local generator (111, running 22–40 ms); then systemd runs
/// systemd-tmpfiles-setup.service's `systemd-tmpfiles` (120, 45–70 ms) and waits for it.
/// multi-user.target is reached at 100 ms.
pub fn boot_generators() -> Trace {
    let generators = "/usr/lib/systemd/system-generators";
    Builder::start()
        .command(&["systemd-nspawn", "-b", "-D", "/srv/rootfs"])
        .runs(
            100,
            "systemd-nspawn",
            "/usr/bin/systemd-nspawn",
            &["systemd-nspawn", "-b", "-D", "/srv/rootfs"],
        )
        .program(101, 100, "systemd", 5 * MS, None)
        .runs(101, "systemd", "/srv/rootfs/usr/lib/systemd/systemd", &["/usr/lib/systemd/systemd"])
        .program(110, 101, "(sd-executor)", 10 * MS, Some(41 * MS))
        .runs(110, "(sd-executor)", "", &[])
        .program(111, 110, "systemd-rc-loca", 22 * MS, Some(40 * MS))
        .runs(
            111,
            "systemd-rc-loca",
            &format!("{generators}/systemd-rc-local-generator"),
            &[&format!("{generators}/systemd-rc-local-generator"), "/run/systemd/generator"],
        )
        .program(112, 110, "systemd-fstab-g", 22 * MS, Some(30 * MS))
        .runs(112, "systemd-fstab-g", &format!("{generators}/systemd-fstab-generator"), &[])
        .program(120, 101, "systemd-tmpfile", 45 * MS, Some(70 * MS))
        .runs(
            120,
            "systemd-tmpfile",
            "/usr/bin/systemd-tmpfiles",
            &["systemd-tmpfiles", "--create", "--boot"],
        )
        .unit("systemd-tmpfiles-setup.service", 45 * MS, 70 * MS, Some(120))
        .run(100, 0, 5 * MS)
        .sleep(100, 5 * MS, 200 * MS, None)
        .run(101, 5 * MS, 10 * MS)
        .sleep(101, 10 * MS, 41 * MS, Some(110))
        .run(110, 10 * MS, 22 * MS)
        .sleep(110, 22 * MS, 40 * MS, Some(111))
        .run(110, 40 * MS, 41 * MS)
        .run(111, 22 * MS, 40 * MS)
        .run(112, 22 * MS, 30 * MS)
        .run(101, 41 * MS, 45 * MS)
        .sleep(101, 45 * MS, 70 * MS, Some(120))
        .run(120, 45 * MS, 70 * MS)
        .run(101, 70 * MS, 100 * MS)
        .ready_by(100 * MS, "unit:multi-user.target", 101, Some(101))
        .build()
}

/// A MATE login started by a script (`startmate`, 100): the session manager `mate-session`
/// (110) runs its GL probe (120, named by the kernel `mate-session-ch`), which faults in
/// 8 MiB of libLLVM with a 20 ms wait and runs 30 ms, and waits for it; then it starts the
/// panel (130), whose call to the session bus (`dbus-daemon`, 101) is answered by a fork of
/// the bus (105, 80–100 ms); the panel's window is mapped at 150 ms.
pub fn session_probe() -> Trace {
    let probe = "/usr/lib/mate-session-check-accelerated";
    Builder::start()
        .command(&["startmate"])
        .runs(100, "startmate", "/usr/bin/dash", &["sh", "/usr/bin/startmate"])
        .program(101, 100, "dbus-daemon", MS, None)
        .program(110, 100, "mate-session", 2 * MS, None)
        .program(120, 110, "mate-session-ch", 10 * MS, Some(60 * MS))
        .runs(120, "mate-session-ch", probe, &[probe])
        .program(130, 110, "mate-panel", 70 * MS, None)
        .program(105, 101, "dbus-daemon", 80 * MS, Some(100 * MS))
        .runs(105, "dbus-daemon", "", &[])
        .placed_file(1, "/usr/lib/x86_64-linux-gnu/libLLVM-15.so.1", 40 << 20)
        .run(100, 0, 2 * MS)
        .sleep(100, 2 * MS, 200 * MS, None)
        .sleep(101, MS, 80 * MS, Some(130))
        .run(110, 2 * MS, 10 * MS)
        .sleep(110, 10 * MS, 60 * MS, Some(120))
        .run(120, 10 * MS, 20 * MS)
        .fill(20 * MS, 120, 120, 1, 0, 2048)
        .fill_origin(PageOrigin::Fault)
        .request(20 * MS, 40 * MS, 1, 0, 512 * 1024, 120, "mate-session-ch")
        .sched(120, 20 * MS, 40 * MS, IoWait)
        .run(120, 40 * MS, 60 * MS)
        .run(110, 60 * MS, 70 * MS)
        .sleep(110, 70 * MS, 200 * MS, None)
        .run(130, 70 * MS, 80 * MS)
        .sleep(130, 80 * MS, 100 * MS, Some(105))
        .run(105, 80 * MS, 100 * MS)
        .run(130, 100 * MS, 150 * MS)
        .ready_by(150 * MS, "window:mate-panel", 130, Some(130))
        .build()
}

/// `app` runs `app-helper` (200) at 5 ms and waits for it; the helper talks to the X
/// server (`Xvfb`, 300, recorded with `--also`) 30 times, each answer taking 50 µs of its
/// 1 ms, then runs until 45 ms: on the critical path the helper's time comes in 31 pieces
/// with the server's between them. `app` then runs until ready at 100 ms.
pub fn helper_talking_to_x() -> Trace {
    let mut s = Builder::start()
        .process(300, 1, "Xvfb", None)
        .runs(300, "Xvfb", "/usr/bin/Xvfb", &["Xvfb", ":99"])
        .program(200, 100, "app-helper", 5 * MS, Some(45 * MS))
        .run(100, 0, 5 * MS)
        .sleep(100, 5 * MS, 45 * MS, Some(200));
    let mut t = 5 * MS;
    for _ in 0..30 {
        s = s
            .run(200, t, t + 950_000)
            .sleep(200, t + 950_000, t + MS, Some(300))
            .sleep(300, t, t + 950_000, Some(200))
            .run(300, t + 950_000, t + MS);
        t += MS;
    }
    s.sleep(300, t, 200 * MS, None)
        .run(200, t, 45 * MS)
        .run(100, 45 * MS, 100 * MS)
        .ready_at_exit(100 * MS)
        .build()
}
