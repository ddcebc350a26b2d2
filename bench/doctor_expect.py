"""Checks the doctor's findings on one trace against a case's written expectations.

    python3 bench/doctor_expect.py CASE.expect DOCTOR.json DOCTOR.txt

DOCTOR.json is `coldstart doctor TRACE --format json`, DOCTOR.txt the text of `coldstart doctor
TRACE`. Prints one line per expectation (`met` or `NOT MET`, the expectation, and when not met
what the doctor said instead), then a last line `MET TOTAL`. Exits 2 on a malformed file.

The expectations file: one expectation a line; a line that starts with `#` is a comment. REGEX is a Python regular
expression, matched case-insensitively against a finding flattened to `key: value` lines (its
`kind`, `title`, `audience`, `suggestion`, `confidence`, `evidence.summary`, `gain.text`,
`evidence.processes.comm`, `evidence.files.name`, …); several REGEXes joined by ` && ` must all
match the same finding. KIND is a finding kind (`heavy_helper`, `slow_filesystem`, …) or `any`.

    top N KIND [REGEX]       a finding of KIND (matching REGEX) is among the first N
    present KIND [REGEX]     a finding of KIND (matching REGEX) is there
    absent KIND [REGEX]      no finding of KIND matches REGEX
    text-present REGEX       the doctor's text output matches REGEX
    text-absent REGEX        the doctor's text output does not match REGEX
    gain KIND REGEX MIN MAX  the first finding of KIND matching REGEX has a gain between MIN and
                             MAX seconds (inclusive)
"""

import json
import re
import sys


def flatten(value, prefix=""):
    """`key: value` lines of every string and number in a finding."""
    if isinstance(value, dict):
        return [line for key, v in value.items() for line in flatten(v, f"{prefix}.{key}" if prefix else key)]
    if isinstance(value, list):
        return [line for v in value for line in flatten(v, prefix)]
    if value is None:
        return []
    return [f"{prefix}: {value}"]


def matches(finding, kind, patterns):
    if kind != "any" and finding["kind"] != kind:
        return False
    text = "\n".join(flatten(finding))
    return all(re.search(p, text, re.I | re.M) for p in patterns)


def describe(findings, n=3):
    said = [f"{i + 1}. {f['kind']} ({f.get('audience', '?')}): {f['title']}" for i, f in enumerate(findings[:n])]
    return "; ".join(said) if said else "no findings"


def check(words, findings, text):
    verb = words[0]
    if verb in ("top", "present", "absent"):
        if verb == "top":
            n, kind, rest = int(words[1]), words[2], words[3:]
            pool = findings[:n]
        else:
            kind, rest = words[1], words[2:]
            pool = findings
        patterns = [p.strip() for p in " ".join(rest).split(" && ") if p.strip()]
        hit = [f for f in pool if matches(f, kind, patterns)]
        if verb == "absent":
            return not hit, "found: " + "; ".join(f["title"] for f in hit[:3])
        return bool(hit), "the doctor said: " + describe(findings, max(3, n if verb == "top" else 3))
    if verb in ("text-present", "text-absent"):
        pattern = " ".join(words[1:])
        found = re.search(pattern, text, re.I | re.M)
        if verb == "text-absent":
            return found is None, f"found: {found.group(0)!r}" if found else ""
        return found is not None, "not in the doctor's text"
    if verb == "gain":
        kind, pattern, low, high = words[1], " ".join(words[2:-2]), float(words[-2]), float(words[-1])
        hit = [f for f in findings if matches(f, kind, [pattern] if pattern else [])]
        if not hit:
            return False, "no such finding: " + describe(findings)
        gain = hit[0]["gain"]["ns"] / 1e9
        return low <= gain <= high, f"gain {gain:.3f} s"
    raise ValueError(f"unknown expectation {verb!r}")


def main():
    if len(sys.argv) != 4:
        print("usage: doctor_expect.py CASE.expect DOCTOR.json DOCTOR.txt", file=sys.stderr)
        return 2
    expect_path, json_path, text_path = sys.argv[1:]
    try:
        doc = json.load(open(json_path))
        findings = doc["doctor"]["findings"] if "doctor" in doc else doc["findings"]
        text = open(text_path).read()
        lines = [l.strip() for l in open(expect_path)]
    except (OSError, ValueError, KeyError) as e:
        print(f"doctor_expect.py: {e}", file=sys.stderr)
        return 2
    met = total = 0
    for line in lines:
        if not line or line.startswith("#"):
            continue
        try:
            ok, why = check(line.split(), findings, text)
        except (ValueError, IndexError, re.error) as e:
            print(f"doctor_expect.py: {expect_path}: {line!r}: {e}", file=sys.stderr)
            return 2
        total += 1
        met += ok
        print(f"   {'met    ' if ok else 'NOT MET'} {line}" + ("" if ok else f"\n           ({why})"))
    print(met, total)
    return 0


if __name__ == "__main__":
    sys.exit(main())
