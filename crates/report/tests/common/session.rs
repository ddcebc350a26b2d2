//! A synthetic MATE login of about 300 processes, deterministic: the session bus, the
//! session manager, the window manager, the panel and its applets, the file manager,
//! the settings daemon, D-Bus-activated services, many short helpers (`sh -c`
//! wrappers and what they run, `dbus-send`, `gsettings`, thumbnailers), Xvfb recorded
//! with `--also`, three `until` milestones close together and two marks.

use coldstart_trace::ThreadState::*;
use coldstart_trace::*;

pub const MS: Nanos = 1_000_000;

/// Where a process is and what it does.
pub struct Spec {
    pub pid: i32,
    pub ppid: i32,
    pub comm: &'static str,
    pub start_ms: Nanos,
    /// `None`: still running at the end.
    pub life_ms: Option<Nanos>,
    /// Running time, spread over its life in a few bursts.
    pub cpu_ms: Nanos,
}

struct Builder {
    trace: Trace,
    next_pid: i32,
    seed: u64,
}

impl Builder {
    fn random(&mut self, below: u64) -> u64 {
        // xorshift64: deterministic variety without a dependency.
        self.seed ^= self.seed << 13;
        self.seed ^= self.seed >> 7;
        self.seed ^= self.seed << 17;
        self.seed % below.max(1)
    }

    fn spawn(
        &mut self,
        ppid: i32,
        comm: &'static str,
        start_ms: Nanos,
        life_ms: Option<Nanos>,
        cpu_ms: Nanos,
    ) -> i32 {
        let pid = self.next_pid;
        self.next_pid += 1 + self.random(3) as i32;
        self.add(Spec { pid, ppid, comm, start_ms, life_ms, cpu_ms });
        pid
    }

    fn add(&mut self, s: Spec) {
        let start = s.start_ms * MS;
        let end = s.life_ms.map(|l| start + l * MS);
        let last = end.unwrap_or(self.trace.meta.duration_ns);
        self.trace.processes.push(Process {
            pid: s.pid,
            ppid: Some(s.ppid),
            comm: s.comm.into(),
            exe: Some(format!("/usr/bin/{}", s.comm)),
            argv: vec![s.comm.into()],
            start_ns: (s.start_ms >= 0).then_some(start),
            end_ns: end,
            exit_code: end.map(|_| 0),
            in_scope: true,
        });
        self.trace.threads.push(Thread {
            tid: s.pid,
            pid: s.pid,
            comm: s.comm.into(),
            start_ns: (s.start_ms >= 0).then_some(start),
            end_ns: end,
        });
        // Up to four bursts of running, the first at the start, each after a sleep;
        // the longer ones begin with an I/O wait.
        let begin = start.max(0);
        let bursts = if s.cpu_ms >= 40 { 4 } else { 1 };
        let per = s.cpu_ms * MS / bursts;
        let room = (last - begin) / bursts;
        let mut at = begin;
        for b in 0..bursts {
            let jitter = if room > 0 { self.random(room as u64 / 2) as Nanos } else { 0 };
            let slot_end = if b == bursts - 1 { last } else { begin + (b + 1) * room - jitter };
            let io = if s.cpu_ms >= 40 { (room / 8).min(per) } else { 0 };
            if io > 0 {
                self.trace.sched.push(SchedInterval {
                    tid: s.pid,
                    start_ns: at,
                    end_ns: at + io,
                    state: IoWait,
                });
                at += io;
            }
            let run_end = (at + per).min(slot_end);
            if run_end > at {
                self.trace.sched.push(SchedInterval {
                    tid: s.pid,
                    start_ns: at,
                    end_ns: run_end,
                    state: Running,
                });
            }
            if slot_end > run_end {
                self.trace.sched.push(SchedInterval {
                    tid: s.pid,
                    start_ns: run_end,
                    end_ns: slot_end,
                    state: Sleeping,
                });
            }
            at = slot_end;
        }
    }

    /// `n` short helpers of `ppid` from `from_ms` on: `sh -c` wrappers running one
    /// command each, and lone commands.
    fn helpers(&mut self, ppid: i32, from_ms: Nanos, n: usize, names: &[&'static str]) {
        let mut at = from_ms;
        for k in 0..n {
            let name = names[k % names.len()];
            let life = 3 + self.random(40) as Nanos;
            if k % 3 == 0 {
                let sh = self.spawn(ppid, "sh", at, Some(life + 4), 1);
                let cpu = 1 + self.random(3) as Nanos;
                self.spawn(sh, name, at + 1, Some(life), cpu);
            } else {
                let cpu = 1 + self.random(4) as Nanos;
                self.spawn(ppid, name, at, Some(life), cpu);
            }
            at += 10 + self.random(150) as Nanos;
        }
    }
}

/// The login: 8 s recorded, ready when caja's desktop window appeared.
pub fn session() -> Trace {
    let mut b = Builder {
        trace: Trace {
            meta: Meta {
                tool: "coldstart 0.1.0".into(),
                source: Source::Record,
                command: vec!["setsid".into(), "dbus-run-session".into(), "mate-session".into()],
                root_pid: Some(1000),
                host: "vm".into(),
                kernel: "6.18.0 #1 SMP".into(),
                cpu_model: "Test CPU".into(),
                cpu_count: 2,
                mem_total_bytes: 8 << 30,
                page_size: 4096,
                clock: "boot".into(),
                duration_ns: 8_000 * MS,
                cache: CacheState::Cold,
                eviction: Some("drop_caches".into()),
                ..Meta::default()
            },
            ..Trace::default()
        },
        next_pid: 1000,
        seed: 0x9e37_79b9_7f4a_7c15,
    };
    // Xvfb, recorded with --also, was there before.
    b.add(Spec { pid: 812, ppid: 1, comm: "Xvfb", start_ms: -1, life_ms: None, cpu_ms: 900 });
    let root = b.spawn(1, "dbus-run-session", 0, None, 4);
    let bus = b.spawn(root, "dbus-daemon", 3, None, 120);
    let session = b.spawn(root, "mate-session", 8, None, 260);
    b.helpers(session, 40, 9, &["xdg-user-dirs-update", "dbus-update-activation-environment", "gsettings"]);
    let settings = b.spawn(session, "mate-settings-daemon", 300, None, 420);
    b.helpers(settings, 340, 14, &["xrdb", "xmodmap", "setxkbmap", "xkbcomp", "xsettings-helper"]);
    let marco = b.spawn(session, "marco", 650, None, 380);
    b.helpers(marco, 700, 4, &["gsettings", "dbus-send"]);
    let panel = b.spawn(session, "mate-panel", 900, None, 700);
    for applet in [
        "clock-applet",
        "wnck-applet",
        "notification-area-applet",
        "mate-brightness-applet",
        "mate-volume-control-status-icon",
        "mate-indicator-applet",
        "mate-menu",
        "mate-weather-applet",
    ] {
        let at = 1_200 + b.random(1500) as Nanos;
        let cpu = 60 + b.random(200) as Nanos;
        let a = b.spawn(panel, applet, at, None, cpu);
        let n = 2 + b.random(4) as usize;
        b.helpers(a, at + 50, n, &["gsettings", "dbus-send", "pactl"]);
    }
    b.helpers(panel, 1_000, 12, &["dbus-send", "xdg-open", "gtk-query-immodules-3.0"]);
    let caja = b.spawn(session, "caja", 1_100, None, 650);
    b.helpers(caja, 3_600, 40, &["gdk-pixbuf-thumbnailer", "totem-video-thumbnailer", "evince-thumbnailer"]);
    for name in [
        "nm-applet",
        "mate-power-manager",
        "mate-screensaver",
        "polkit-mate-authentication-agent-1",
        "blueman-applet",
        "update-notifier",
        "mate-maximus",
        "system-config-printer-applet",
        "print-applet",
        "zeitgeist-datahub",
        "tracker-miner-fs",
        "orca",
        "onboard",
        "xscreensaver-sync",
    ] {
        let at = 1_300 + b.random(2500) as Nanos;
        let cpu = 30 + b.random(300) as Nanos;
        let app = b.spawn(session, name, at, None, cpu);
        let n = b.random(6) as usize;
        b.helpers(app, at + 100, n, &["dbus-send", "sh-helper", "lsb_release"]);
        // Mid-lived children that worked: neither short nor quiet.
        for _ in 0..b.random(5) {
            let t = at + 200 + b.random(2500) as Nanos;
            let life = (400 + b.random(2500) as Nanos).min(7_900 - t);
            let cpu = 50 + b.random(400) as Nanos;
            b.spawn(app, "python3", t, Some(life), cpu);
        }
    }
    // D-Bus activated services.
    for name in [
        "at-spi-bus-launcher",
        "dconf-service",
        "gvfsd",
        "gvfsd-fuse",
        "gvfs-udisks2-volume-monitor",
        "mate-notification-daemon",
        "gvfsd-trash",
        "gvfsd-metadata",
        "xdg-desktop-portal",
        "xdg-document-portal",
        "xdg-permission-store",
        "pulseaudio",
        "mate-system-monitor",
        "evolution-source-registry",
        "evolution-calendar-factory",
        "goa-daemon",
        "gnome-keyring-daemon",
    ] {
        let at = 100 + b.random(4000) as Nanos;
        let cpu = 20 + b.random(250) as Nanos;
        let service = b.spawn(bus, name, at, None, cpu);
        let n = b.random(5) as usize;
        b.helpers(service, at + 30, n, &["dbus-send", "gsettings"]);
    }
    b.helpers(bus, 60, 20, &["dbus-send", "systemd-detect-virt", "pkexec-check"]);
    let t = &mut b.trace;
    let pid_of = |t: &Trace, comm: &str| t.processes.iter().find(|p| p.comm == comm).unwrap().pid;
    let until = |t: &Trace, ms: Nanos, comm: &str| {
        let pid = pid_of(t, comm);
        Mark {
            t_ns: ms * MS,
            pid: Some(pid),
            name: format!("window:{comm}"),
            source: MarkSource::Until,
            tid: Some(pid),
        }
    };
    let marks = vec![
        Mark {
            t_ns: 20 * MS,
            pid: Some(session),
            name: "session-start".into(),
            source: MarkSource::MarksFile,
            tid: None,
        },
        until(t, 2_140, "marco"),
        until(t, 3_410, "mate-panel"),
        until(t, 3_460, "caja"),
        Mark {
            t_ns: 3_430 * MS,
            pid: None,
            name: "autostart-done".into(),
            source: MarkSource::MarksFile,
            tid: None,
        },
    ];
    t.marks = marks;
    let caja_pid = pid_of(t, "caja");
    t.meta.ready = Some(Ready {
        t_ns: 3_460 * MS,
        reason: ReadyReason::WindowClass("caja".into()),
        pid: Some(caja_pid),
        tid: Some(caja_pid),
    });
    for k in 1..=80 {
        let busy = if k < 40 { 0.7 } else { 0.15 };
        t.cpu_samples.push(CpuSample {
            t_ns: k * 100 * MS,
            dt_ns: 100 * MS,
            user: busy * 0.7,
            system: busy * 0.3,
            iowait: if k < 40 { 0.2 } else { 0.0 },
            idle: 1.0 - busy,
            running: 1,
            blocked: 0,
        });
    }
    let _ = (caja, marco, panel, settings);
    b.trace
}
