//! Data the user does not need: translations and language resources (message
//! catalogs, Qt translations, LibreOffice language packs, dictionaries) for
//! languages other than the user's, read during the start. The language of each
//! file is taken from its path; the user's languages come from the configuration
//! (the environment of whoever runs the doctor, or `--lang`): the trace does not
//! record the program's LANG.

use coldstart_trace::Nanos;
use rustc_hash::FxHashSet;

use crate::doctor::facts::Facts;
use crate::doctor::finding::{
    Audience, Confidence, Evidence, EvidenceProcess, Figure, Finding, FindingKind, Gain,
};
use crate::units::{bytes, count, duration, plural};

/// ISO 639-1 language codes.
const ISO_639_1: &str = "aa ab ae af ak am an ar as av ay az ba be bg bh bi bm bn bo br bs ca ce ch co cr cs cu cv \
    cy da de dv dz ee el en eo es et eu fa ff fi fj fo fr fy ga gd gl gn gu gv ha he hi ho hr ht hu hy hz ia id ie \
    ig ii ik io is it iu ja jv ka kg ki kj kk kl km kn ko kr ks ku kv kw ky la lb lg li ln lo lt lu lv mg mh mi mk \
    ml mn mr ms mt my na nb nd ne ng nl nn no nr nv ny oc oj om or os pa pi pl ps pt qu rm rn ro ru rw sa sc sd se \
    sg si sk sl sm sn so sq sr ss st su sv sw ta te tg th ti tk tl tn to tr ts tt tw ty ug uk ur uz ve vi vo wa wo \
    xh yi yo za zh zu";

/// Directories whose subdirectories are named after languages.
const LANGUAGE_DIRS: [&str; 11] = [
    "locale",
    "locales",
    "locale-langpack",
    "translations",
    "i18n",
    "l10n",
    "lang",
    "langs",
    "languages",
    "resource",
    "help",
];
/// Of those, the ones where a three-letter code is taken as a language too.
const STRONG_LANGUAGE_DIRS: [&str; 3] = ["locale", "locales", "locale-langpack"];
/// Extensions of per-language files named `<name>_<lang>.<ext>` or `<name>-<lang>.<ext>`.
const LANGUAGE_FILE_EXTENSIONS: [&str; 6] = ["qm", "mo", "xcd", "dic", "aff", "pak"];

/// The primary language subtag of a locale name or tag, when it looks like one.
fn primary(tag: &str, allow_three_letters: bool) -> Option<String> {
    let first = tag.split(['_', '-', '.', '@']).next()?;
    let lower = first.to_ascii_lowercase();
    if first != lower {
        return None;
    }
    let known = match lower.len() {
        2 => ISO_639_1.split_ascii_whitespace().any(|c| c == lower),
        3 => allow_three_letters && lower.chars().all(|c| c.is_ascii_lowercase()),
        _ => false,
    };
    let rest_ok = tag[first.len()..]
        .split(['_', '-', '.', '@'])
        .all(|part| part.len() <= 10 && part.chars().all(|c| c.is_ascii_alphanumeric()));
    (known && rest_ok).then_some(lower)
}

/// The language a file is for, from its path.
pub fn language_of(path: &str) -> Option<String> {
    let parts: Vec<&str> = path.split('/').filter(|p| !p.is_empty()).collect();
    let name = parts.last()?;
    for (i, dir) in parts.iter().enumerate().take(parts.len().saturating_sub(1)) {
        if !LANGUAGE_DIRS.contains(dir) {
            continue;
        }
        let next = parts[i + 1];
        let messages = parts.get(i + 2) == Some(&"LC_MESSAGES");
        let strong = STRONG_LANGUAGE_DIRS.contains(dir) || messages;
        let candidate = if i + 1 == parts.len() - 1 {
            // A file directly in the directory: `locales/de.pak`.
            next.rsplit_once('.').map_or(next, |(stem, _)| stem)
        } else {
            next
        };
        if let Some(lang) = primary(candidate, strong) {
            return Some(lang);
        }
    }
    let (stem, ext) = name.rsplit_once('.')?;
    let by_name = LANGUAGE_FILE_EXTENSIONS.contains(&ext) || (ext == "dat" && stem.starts_with("acor_"));
    if !by_name {
        return None;
    }
    let in_dictionaries = parts.iter().any(|p| matches!(*p, "hunspell" | "myspell" | "hyphen" | "mythes"));
    if in_dictionaries
        && matches!(ext, "dic" | "aff")
        && let Some(lang) = primary(stem.trim_start_matches("hyph_").trim_start_matches("th_"), false)
    {
        return Some(lang);
    }
    // `qtbase_de.qm`, `registry_pt-BR.xcd`, `Langpack-en-US.xcd`, `acor_fr-FR.dat`: the tag is the
    // last one or two parts after `_` or `-`.
    let pieces: Vec<&str> = stem.split(['_', '-']).collect();
    if pieces.len() < 2 {
        return None;
    }
    let last = pieces[pieces.len() - 1];
    let region = last.len() == 2 && last.chars().all(|c| c.is_ascii_uppercase());
    let lang = if region && pieces.len() >= 3 { pieces[pieces.len() - 2] } else { last };
    primary(lang, false)
}

/// The primary subtags the user reads, always with English, the usual fallback.
fn user_languages(f: &Facts) -> FxHashSet<String> {
    let mut set: FxHashSet<String> = f
        .config
        .languages
        .tags
        .iter()
        .filter_map(|t| t.split(['_', '-', '.', '@']).next())
        .map(str::to_ascii_lowercase)
        .collect();
    set.insert("en".to_owned());
    set
}

pub(crate) fn other_languages(f: &Facts) -> Vec<Finding> {
    let wanted = user_languages(f);
    let mut files: Vec<(u32, String)> = f
        .files
        .keys()
        .filter(|&&id| f.is_regular(id))
        .filter_map(|&id| Some((id, language_of(f.path_of(id)?)?)))
        .filter(|(_, lang)| !wanted.contains(lang))
        .collect();
    files.sort_unstable();
    if files.is_empty() {
        return Vec::new();
    }
    let wait: Nanos = files.iter().map(|(id, _)| f.wait_of(*id)).fold(0, Nanos::saturating_add);
    if wait < f.min_gain {
        return Vec::new();
    }
    let read: u64 = files.iter().map(|(id, _)| f.read_bytes(*id)).fold(0, u64::saturating_add);
    let mut langs: Vec<&str> = files.iter().map(|(_, l)| l.as_str()).collect();
    langs.sort_unstable();
    langs.dedup();
    let ids: Vec<u32> = files.iter().map(|(id, _)| *id).collect();
    let mut pids: Vec<i32> =
        ids.iter().flat_map(|id| f.files.get(id).map(|s| s.pids.clone()).unwrap_or_default()).collect();
    pids.sort_unstable();
    pids.dedup();
    let mut user: Vec<&str> = f.config.languages.tags.iter().map(String::as_str).collect();
    user.dedup();
    let shown: Vec<&str> = langs.iter().take(12).copied().collect();
    let more = if langs.len() > 12 { format!(" and {} more", langs.len() - 12) } else { String::new() };
    vec![Finding {
        kind: FindingKind::OtherLanguages,
        title: format!(
            "{} of translations or resources for {} read",
            plural(files.len() as u64, "file"),
            plural(langs.len() as u64, "other language")
        ),
        evidence: Evidence {
            summary: format!(
                "{} files ({} read) for {}{more}, while the user's languages are {} (from {}; English is always \
                 counted as needed); {} of I/O wait {}",
                count(files.len() as u64),
                bytes(read),
                shown.join(", "),
                user.join(", "),
                f.config.languages.source,
                duration(wait),
                f.wait_scope()
            ),
            files: f.evidence_files(&ids),
            files_total: ids.len() as u64,
            processes: pids
                .iter()
                .map(|&pid| EvidenceProcess {
                    pid,
                    comm: f.a.comm(pid).to_owned(),
                    ns: f.a.file_uses.iter().filter(|u| u.pid == pid && ids.binary_search(&u.file).is_ok()).map(|u| u.io_wait_ns).fold(0, Nanos::saturating_add),
                    read_bytes: f.a.file_uses.iter().filter(|u| u.pid == pid && ids.binary_search(&u.file).is_ok()).map(|u| u.pages.saturating_mul(f.page_size)).fold(0, u64::saturating_add),
                    in_scope: f.a.process(pid).is_none_or(|p| p.in_scope),
                })
                .collect(),
            figures: vec![
                Figure::count("files", files.len() as u64),
                Figure::count("languages", langs.len() as u64),
                Figure::bytes("read_bytes", read),
                Figure::ns("wait_now_ns", wait),
            ],
            intervals: Vec::new(),
        },
        gain: Gain {
            ns: wait,
            formula: "wait_now_ns".to_owned(),
            text: format!("{} of I/O wait for these files {}, all of it saved when they are not read", duration(wait), f.wait_scope()),
            inputs: vec![Figure::ns("wait_now_ns", wait)],
            ahead_ns: None,
        },
        audience: Audience::Distribution,
        suggestion: "Read only the user's language: make the program look up the current locale's files instead of \
                     every installed language, or remove the language packs nobody on this machine uses (localepurge, \
                     `apt remove` of the unneeded *-l10n-* / language-pack packages)."
            .to_owned(),
        verify: format!("{}  # before and after removing them", f.bench_command()),
        confidence: Confidence::Medium,
        caveat: Some(format!(
            "the trace does not record the program's LANG: the user's languages were taken from {}",
            f.config.languages.source
        )),
    }]
}

#[cfg(test)]
mod tests {
    use super::language_of;

    #[test]
    fn the_language_of_a_path() {
        let cases = [
            ("/usr/share/locale/de/LC_MESSAGES/gtk30.mo", Some("de")),
            ("/usr/share/locale/pt_BR/LC_MESSAGES/glib20.mo", Some("pt")),
            ("/usr/share/locale/ast/LC_MESSAGES/x.mo", Some("ast")),
            ("/usr/share/locale/sr@latin/LC_MESSAGES/x.mo", Some("sr")),
            ("/usr/lib/libreoffice/program/resource/fr/LC_MESSAGES/sw.mo", Some("fr")),
            ("/usr/share/qt5/translations/qtbase_de.qm", Some("de")),
            ("/opt/app/locales/ja.pak", Some("ja")),
            ("/usr/lib/libreoffice/share/registry/res/registry_pt-BR.xcd", Some("pt")),
            ("/usr/lib/libreoffice/share/registry/Langpack-en-US.xcd", Some("en")),
            ("/usr/share/libreoffice/share/autocorr/acor_fr-FR.dat", Some("fr")),
            ("/usr/share/hunspell/de_DE.dic", Some("de")),
            ("/usr/share/hyphen/hyph_it_IT.dic", Some("it")),
            ("/usr/share/libreoffice/help/es/text/shared.xhp", Some("es")),
            ("/usr/share/X11/locale/en_US.UTF-8/Compose", Some("en")),
            // Not language data.
            ("/usr/lib/locale/C.utf8/LC_CTYPE", None),
            ("/usr/lib/locale/locale-archive", None),
            ("/usr/share/locale/locale.alias", None),
            ("/usr/lib/python3/dist-packages/pandas/core/frame.py", None),
            ("/usr/share/i18n/charmaps/UTF-8.gz", None),
            ("/usr/lib/libreoffice/program/resource/common/fonts.xcd", None),
            ("/usr/lib/x86_64-linux-gnu/libicudata.so.72.1", None),
            ("/usr/share/icons/hicolor/index.theme", None),
            ("/usr/lib/libreoffice/share/registry/main.xcd", None),
        ];
        for (path, expected) in cases {
            assert_eq!(language_of(path).as_deref(), expected, "{path}");
        }
    }
}
