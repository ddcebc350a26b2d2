//! `coldstart generate`: the man pages and completions cover every subcommand.

mod support;

use support::{coldstart, private_dir};

/// The subcommands `coldstart --help` lists (clap's own `help` left out).
fn subcommands() -> Vec<String> {
    let out = coldstart().arg("--help").output().unwrap();
    let help = String::from_utf8(out.stdout).unwrap();
    let listed: Vec<String> = help
        .lines()
        .skip_while(|l| !l.starts_with("Commands:"))
        .skip(1)
        .take_while(|l| l.starts_with("  "))
        .filter(|l| !l.starts_with("   "))
        .filter_map(|l| l.split_whitespace().next().map(str::to_owned))
        .filter(|name| name != "help")
        .collect();
    assert!(listed.len() >= 15, "too few subcommands in --help: {listed:?}");
    assert!(listed.iter().any(|n| n == "record") && listed.iter().any(|n| n == "generate"));
    listed
}

#[test]
fn man_pages_cover_every_subcommand() {
    let dir = private_dir();
    coldstart().args(["generate", "man", "-o"]).arg(dir.path()).assert().success();
    let main_page = std::fs::read_to_string(dir.path().join("coldstart.1")).unwrap();
    assert!(main_page.starts_with(".ie") || main_page.contains(".TH coldstart 1"), "{main_page:.200}");
    for sub in subcommands() {
        assert!(main_page.contains(&format!("coldstart\\-{sub}(1)")), "coldstart.1 does not name {sub}");
        let page = std::fs::read_to_string(dir.path().join(format!("coldstart-{sub}.1")))
            .unwrap_or_else(|e| panic!("coldstart-{sub}.1: {e}"));
        assert!(page.contains(".SH NAME"), "coldstart-{sub}.1 has no NAME section");
    }
    assert!(!dir.path().join("coldstart-help.1").exists());
    let record = std::fs::read_to_string(dir.path().join("coldstart-record.1")).unwrap();
    assert!(record.contains("\\-\\-until"), "the record page lists no --until");
    let one = coldstart().args(["generate", "man"]).output().unwrap();
    assert!(one.status.success());
    assert_eq!(String::from_utf8(one.stdout).unwrap(), main_page);
}

#[test]
fn completions_cover_every_subcommand() {
    let subs = subcommands();
    for shell in ["bash", "zsh", "fish", "elvish", "powershell"] {
        let out = coldstart().args(["generate", "completions", shell]).output().unwrap();
        assert!(out.status.success(), "{shell}: {}", String::from_utf8_lossy(&out.stderr));
        let script = String::from_utf8(out.stdout).unwrap();
        for sub in &subs {
            assert!(script.contains(sub.as_str()), "{shell} completions do not name {sub}");
        }
    }
    let bad = coldstart().args(["generate", "completions", "tcsh"]).output().unwrap();
    assert_eq!(bad.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&bad.stderr).contains("invalid value 'tcsh'"));
}
