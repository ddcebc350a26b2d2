//! What the doctor knows about well-known helpers and files, so that a finding can say
//! what a process was for and why the files it read matter: the X resource loader that
//! runs the C preprocessor, the GL probes of session managers, fontconfig's tools,
//! systemd's generators, and the large libraries such processes load; and the small files
//! of a Python module tree, the time-zone database and the fonts, which are read one by one
//! for reasons of their own.

use crate::doctor::finding::Audience;

/// A helper the doctor knows, with the change an expert would propose for it.
pub(crate) struct KnownTool {
    /// What it does, in a title's words, after "`starter` runs `tool`, which …".
    pub short: &'static str,
    /// What it is doing at the start, for the evidence.
    pub doing: &'static str,
    /// What to change, for the audience of the finding.
    pub change: &'static str,
}

/// The helper named `tool` (an executable's file name) whose chain ran `chain` (the
/// executables' names), if the doctor knows it.
pub(crate) fn tool(tool: &str, chain: &[&str]) -> Option<KnownTool> {
    let ran = |name: &str| chain.iter().any(|c| *c == name || c.starts_with(&format!("{name}-")));
    if tool == "xrdb" && (ran("cpp") || ran("cc1") || ran("mcpp")) {
        return Some(KnownTool {
            short: "runs the C preprocessor on its X resources at every login",
            doing: "xrdb pipes the X resources through the C preprocessor so that they may use #include and \
                    #define; the preprocessor is the C compiler's (cpp starts cc1), loaded at every login",
            change: "ship the X resources preprocessed (run the preprocessor once, when the package is built or \
                     installed), or load them with `xrdb -nocpp` where they use no #include, #define or #if, so \
                     that no C compiler is loaded at login; the GNOME 2 login study measured 1.5 s for this on a \
                     laptop disk",
        });
    }
    if tool.contains("check-accelerated") {
        return Some(KnownTool {
            short: "loads the GL stack to answer yes or no",
            doing: "it answers one yes-or-no question — is rendering hardware-accelerated? — by loading the GL stack \
                    and creating a context",
            change: "cache the answer (it changes only with the GPU, its driver or the display server) and probe \
                     again only when those change, or probe without loading the shader compiler (ask for the \
                     renderer's name through EGL or GLX without compiling anything)",
        });
    }
    if matches!(tool, "fc-list" | "fc-match" | "fc-cache") {
        return Some(KnownTool {
            short: "lists the fonts",
            doing: "it lists the machine's fonts through fontconfig's command-line tool",
            change: "ask fontconfig in-process (FcFontList) and keep the result between starts; fontconfig's \
                     own cache is built when fonts are installed (`fc-cache` in the font packages' install \
                     triggers), so that no start has to scan the font directories",
        });
    }
    None
}

/// What a systemd generator is for, and when an image does not need it.
pub(crate) fn generator(name: &str) -> Option<&'static str> {
    let table: [(&str, &str); 12] = [
        ("systemd-sysv-generator", "turns /etc/init.d scripts into units: not needed without such scripts"),
        ("systemd-rc-local-generator", "runs /etc/rc.local: not needed without one"),
        (
            "systemd-gpt-auto-generator",
            "mounts partitions found by type: not needed in a container or with an fstab",
        ),
        ("systemd-cryptsetup-generator", "sets up encrypted volumes: not needed without /etc/crypttab"),
        ("systemd-veritysetup-generator", "sets up dm-verity volumes: not needed without them"),
        ("systemd-integritysetup-generator", "sets up dm-integrity volumes: not needed without them"),
        ("systemd-hibernate-resume-generator", "resumes from hibernation: not needed in a container or a VM"),
        ("systemd-debug-generator", "reads debug options of the kernel command line"),
        ("systemd-getty-generator", "starts gettys on consoles: not needed without a console login"),
        ("systemd-fstab-generator", "turns /etc/fstab into mount units: needed with an fstab"),
        ("systemd-run-generator", "runs systemd.run= of the kernel command line"),
        ("systemd-system-update-generator", "starts offline updates: not needed without them"),
    ];
    table.iter().find(|(n, _)| *n == name).map(|(_, what)| *what)
}

/// Whether a file (its path, its name) is one the doctor knows.
type FileTest = fn(&str, &str) -> bool;

/// Why a file a helper read matters, when the doctor knows it (by its path).
pub(crate) fn file_purpose(path: &str) -> Option<&'static str> {
    let name = path.rsplit('/').next().unwrap_or(path);
    let table: [(FileTest, &str); 10] = [
        (|_, n| n.starts_with("libLLVM"), "LLVM, the compiler Mesa's GL drivers build shaders with"),
        (|_, n| n.starts_with("libz3."), "the Z3 solver, which LLVM is linked with"),
        (|_, n| n.ends_with("_dri.so") || n.starts_with("libgallium"), "Mesa's GL driver"),
        (
            |_, n| {
                ["libGL.", "libGLX", "libEGL", "libglapi", "libgbm", "libOpenGL"]
                    .iter()
                    .any(|p| n.starts_with(p))
            },
            "the GL stack",
        ),
        (|_, n| n == "cc1" || n == "cc1plus", "the C compiler proper, which the C preprocessor runs in"),
        (
            |_, n| n.starts_with("cpp-") || n.ends_with("-cpp") || n.contains("-cpp-"),
            "the C preprocessor's driver",
        ),
        (
            |_, n| ["libisl.", "libmpfr.", "libgmp.", "libmpc."].iter().any(|p| n.starts_with(p)),
            "a library of the C compiler",
        ),
        (|_, n| n.starts_with("libicudata"), "ICU's Unicode and locale tables"),
        (|_, n| n.starts_with("libpython"), "the Python interpreter"),
        (|p, n| p.contains("/fontconfig/") && n.contains(".cache-"), "a fontconfig cache"),
    ];
    table.iter().find(|(matches, _)| matches(path, name)).map(|(_, why)| *why)
}

/// Who can act on many small files read from `dir` (their `paths`), and what they can
/// change, when the doctor knows the kind of files; `None` for the general advice.
pub(crate) fn small_files(dir: &str, paths: &[&str]) -> Option<(Audience, String)> {
    let n = paths.len();
    let compiled = paths.iter().filter(|p| p.ends_with(".pyc")).count();
    let sources = paths.iter().filter(|p| p.ends_with(".py")).count();
    if (compiled + sources) * 2 >= n && sources > compiled {
        return Some((
            Audience::Distribution,
            format!(
                "Python read {sources} module sources here and compiled them at the start, because no \
                 up-to-date .pyc was found next to them: ship the .pyc files (compile at install time: \
                 py3compile, `python3 -m compileall`), or let the interpreter write them."
            ),
        ));
    }
    if (compiled + sources) * 2 >= n {
        return Some((
            Audience::Developers,
            format!(
                "Python imported {n} modules from {dir}, one file at a time ({compiled} of them compiled .pyc, \
                 so compiling is not the cost): import only what the start needs — move imports into the \
                 functions that use them, or load submodules lazily, as SciPy does — and find the costly ones \
                 with `python3 -X importtime -c '…'`; an application can also ship its modules as one zip \
                 file, which Python imports from (zipimport) with one read."
            ),
        ));
    }
    if dir.starts_with("/usr/share/zoneinfo") {
        return Some((
            Audience::Developers,
            format!(
                "The start read {n} files of the time-zone database one by one: something listed every time \
                 zone by opening each file (Python's zoneinfo.available_timezones() does, and Debian's pytz \
                 calls it at import). The developers of that code can list the zones from the database's \
                 index (/usr/share/zoneinfo/tzdata.zi, zone1970.tab) or only when the list is asked for."
            ),
        ));
    }
    if ["/systemd/system", "/systemd/user"].iter().any(|d| dir.ends_with(d) || dir.contains(&format!("{d}/")))
    {
        return Some((
            Audience::Distribution,
            format!(
                "systemd reads every unit file at each boot to build its graph of units, one file at a time \
                 ({n} here): the image builder can leave out the units, and the packages, the image does not \
                 need, and have the rest read ahead early in the boot (`coldstart boot enable --prefetch`)."
            ),
        ));
    }
    let fonts = ["/usr/share/fonts", "/usr/local/share/fonts"];
    if fonts.iter().any(|d| dir.starts_with(d)) {
        return Some((
            Audience::Distribution,
            format!(
                "The start read {n} font files one by one, as fontconfig does when its cache is missing or \
                 stale: build the cache when fonts are installed (`fc-cache` in the font packages' install \
                 triggers), so that starts read the cache instead of the fonts."
            ),
        ));
    }
    None
}

#[cfg(test)]
mod tests {
    use super::{file_purpose, tool};

    #[test]
    fn xrdb_is_known_only_when_it_ran_the_preprocessor() {
        assert!(tool("xrdb", &["xrdb", "sh", "m4"]).is_none());
        assert!(tool("xrdb", &["xrdb", "sh", "cpp", "cc1"]).is_some_and(|t| t.change.contains("-nocpp")));
        assert!(tool("xrdb", &["xrdb"]).is_none());
        assert!(tool("mate-session-check-accelerated", &[]).is_some_and(|t| t.change.contains("cache")));
    }

    #[test]
    fn the_heavy_files_of_a_gl_probe_and_a_preprocessor_say_what_they_are() {
        assert_eq!(file_purpose("/usr/lib/x86_64-linux-gnu/libLLVM-15.so.1").map(|w| &w[..4]), Some("LLVM"));
        assert_eq!(file_purpose("/usr/lib/x86_64-linux-gnu/dri/swrast_dri.so"), Some("Mesa's GL driver"));
        assert!(
            file_purpose("/usr/lib/gcc/x86_64-linux-gnu/12/cc1").is_some_and(|w| w.contains("C compiler"))
        );
        assert_eq!(file_purpose("/usr/lib/x86_64-linux-gnu/libgtk-3.so.0"), None);
    }
}
