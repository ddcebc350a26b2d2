//! The `header` file: `key = value` lines written by `bootchartd` at the end of the
//! boot (title, uname, release, CPU, kernel command line). A line without `=`
//! continues the previous value, as in pybootchartgui.

/// The header's keys and values, in file order.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Header {
    entries: Vec<(String, String)>,
}

impl Header {
    pub fn parse(text: &str) -> Header {
        let mut entries: Vec<(String, String)> = Vec::new();
        for line in text.lines() {
            match line.split_once('=') {
                Some((key, value)) => entries.push((key.trim().to_owned(), value.trim().to_owned())),
                None => {
                    let value = line.trim();
                    if let (Some((_, last)), false) = (entries.last_mut(), value.is_empty()) {
                        last.push('\n');
                        last.push_str(value);
                    }
                }
            }
        }
        Header { entries }
    }

    pub fn get(&self, key: &str) -> Option<&str> {
        self.entries.iter().find(|(k, _)| k == key).map(|(_, v)| v.as_str())
    }

    /// The host name from `title = Boot chart for HOST (DATE)`.
    pub fn host(&self) -> Option<String> {
        let title = self.get("title")?;
        let rest = title.strip_prefix("Boot chart for ")?;
        let host = match rest.rfind(" (") {
            Some(cut) => &rest[..cut],
            None => rest,
        };
        Some(host.trim().to_owned())
    }

    /// Kernel release and version (`uname -rv`) from `system.uname` (`uname -srvm`).
    pub fn kernel(&self) -> Option<String> {
        let uname = self.get("system.uname")?.trim();
        let (_sysname, rest) = uname.split_once(' ')?;
        let kernel = match rest.rsplit_once(' ') {
            Some((kernel, _machine)) => kernel,
            None => rest,
        };
        Some(kernel.trim().to_owned())
    }

    /// The CPU model from `system.cpu` (`model name : NAME`, possibly repeated per CPU, then `(COUNT)`).
    pub fn cpu_model(&self) -> Option<String> {
        let first = self.get("system.cpu")?.lines().next()?.trim();
        let without_count = match first.rfind(" (") {
            Some(cut) if first.ends_with(')') && first[cut + 2..first.len() - 1].parse::<u32>().is_ok() => {
                &first[..cut]
            }
            _ => first,
        };
        let model = match without_count.split_once(':') {
            Some((key, model)) if key.trim() == "model name" => model,
            _ => without_count,
        };
        Some(model.trim().to_owned())
    }

    /// The CPU count: `system.cpu.num`, or the `(COUNT)` that ends `system.cpu`.
    pub fn cpu_count(&self) -> Option<u32> {
        if let Some(n) = self.get("system.cpu.num").and_then(|n| n.trim().parse().ok()) {
            return Some(n);
        }
        let cpu = self.get("system.cpu")?.trim_end();
        let open = cpu.rfind('(')?;
        cpu.strip_suffix(')')?.get(open + 1..)?.trim().parse().ok()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const EXAMPLE1: &str = "version = 0.8+20051109-ubuntu
title = Boot chart for anders-desktop (Thu Dec 18 14:05:52 CET 2008)
system.uname = Linux 2.6.27-10-generic #1 SMP Fri Nov 21 12:00:22 UTC 2008 i686
system.release = Ubuntu 8.10
system.cpu = model name\t: Intel(R) Core(TM)2 CPU          6600  @ 2.40GHz
model name : Intel(R) Core(TM)2 CPU          6600  @ 2.40GHz (2)
system.kernel.options = root=UUID=a0b77e99 ro quiet splash
";

    #[test]
    fn example1_header() {
        let h = Header::parse(EXAMPLE1);
        assert_eq!(h.host().as_deref(), Some("anders-desktop"));
        assert_eq!(h.kernel().as_deref(), Some("2.6.27-10-generic #1 SMP Fri Nov 21 12:00:22 UTC 2008"));
        assert_eq!(h.cpu_model().as_deref(), Some("Intel(R) Core(TM)2 CPU          6600  @ 2.40GHz"));
        assert_eq!(h.cpu_count(), Some(2));
        assert_eq!(h.get("system.kernel.options"), Some("root=UUID=a0b77e99 ro quiet splash"));
    }

    #[test]
    fn single_cpu_on_one_line() {
        let h = Header::parse("system.cpu = model name\t: Intel(R) Pentium(R) M processor 1500MHz (1)\n");
        assert_eq!(h.cpu_model().as_deref(), Some("Intel(R) Pentium(R) M processor 1500MHz"));
        assert_eq!(h.cpu_count(), Some(1));
    }

    #[test]
    fn missing_or_odd_values_give_none() {
        let h = Header::parse("title = something else\nsystem.uname = Linux\nsystem.cpu = (x)\n");
        assert_eq!(h.host(), None);
        assert_eq!(h.kernel(), None);
        assert_eq!(h.cpu_count(), None);
    }
}
