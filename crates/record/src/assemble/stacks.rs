//! The stack tables of a trace (`mapping`, `frame`, `stack`, `stack_sample`) from the
//! perf capture: each process's executable mappings followed through its mmap, exec and
//! fork records; each user stack unwound from its copy with DWARF CFI (framehop, on the
//! files' `.eh_frame`), or taken from the frame-pointer chain the kernel followed when
//! that fails; every frame named from the file's `.symtab` and `.dynsym`, and for a stripped
//! file (no `.symtab`: only its exported names) also from its debug file — under
//! /usr/lib/debug by build id or debug link, else from the debuginfod servers of
//! `DEBUGINFOD_URLS` (`debuginfod.rs`), looked up once per file on its first frame —; kernel
//! frames from /proc/kallsyms. The off-CPU samples' kernel stacks share the same frames and stacks.

use std::collections::{BTreeMap, HashMap, HashSet};
use std::ops::{Deref, Range};
use std::path::Path;
use std::sync::{Arc, OnceLock};

use coldstart_trace::{Frame, Loss, LossSource, Mapping, Nanos, OffCpuSample, Stack, StackSample};
use object::{Object, ObjectSection, ObjectSegment, ObjectSymbol, SymbolKind};

use super::debuginfod::Lookup;
use super::perf::{PerfData, RawMmap, RawSample, SpaceEvent};
use super::system_view::SystemView;
use crate::frame_pointers::Check;

/// Frames no unwinding goes past.
const MAX_FRAMES: usize = 512;

/// What the stack tables hold, and what could not be done.
#[derive(Debug, Default)]
pub struct StackTables {
    pub mappings: Vec<Mapping>,
    pub frames: Vec<Frame>,
    pub stacks: Vec<Stack>,
    pub samples: Vec<StackSample>,
    pub off_cpu_samples: Vec<OffCpuSample>,
    pub losses: Vec<Loss>,
    pub notes: Vec<String>,
    /// Per executable, how its frame-pointer chains compared with the unwound copies.
    pub frame_pointer_checks: BTreeMap<String, Check>,
}

/// Bytes of a file shared by every module and symbol table that reads them.
#[derive(Clone, Default)]
struct Shared(Arc<Vec<u8>>, Range<usize>);

impl Deref for Shared {
    type Target = [u8];
    fn deref(&self) -> &[u8] {
        self.0.get(self.1.clone()).unwrap_or_default()
    }
}

/// A function: `[start, end)` in the file's own addresses (svma).
#[derive(Clone)]
struct Symbol {
    start: u64,
    end: u64,
    name: String,
}

/// What the assembly needs of one ELF file.
struct Elf {
    build_id: Option<Vec<u8>>,
    /// `(file offset, file size, svma)` of each loadable segment.
    segments: Vec<(u64, u64, u64)>,
    /// From its own `.symtab` and `.dynsym`.
    symbols: Vec<Symbol>,
    /// No `.symtab`: only the exported names of `.dynsym`, so its debug file is worth a look.
    stripped: bool,
    /// Its `.gnu_debuglink` file name.
    debuglink: Option<String>,
    /// The symbols of its debug file with its own, once looked up (stripped files only).
    with_debug: OnceLock<Vec<Symbol>>,
    unwind: Option<framehop::ExplicitModuleSectionInfo<Shared>>,
}

/// How the debug files of stripped files were found, for the trace's notes.
#[derive(Default)]
struct DebugLookups {
    local: u64,
    downloaded: u64,
    cached: u64,
    missing: u64,
    /// Debug files whose build id is another file's.
    mismatched: u64,
    failed: u64,
    first_failure: Option<String>,
}

impl DebugLookups {
    /// What the lookups of debug files found, when there were any.
    fn note(&self) -> Option<String> {
        let found = self.local + self.downloaded + self.cached;
        if found + self.missing + self.failed + self.mismatched == 0 {
            return None;
        }
        let mut note = format!(
            "stripped files named from their debug files: {found} ({} under /usr/lib/debug, {} downloaded from \
             debuginfod, {} from its cache)",
            self.local, self.downloaded, self.cached
        );
        if self.missing > 0 {
            note += &format!("; {} not found on the servers of DEBUGINFOD_URLS", self.missing);
        }
        if self.mismatched > 0 {
            note += &format!("; {} debug files of another build left out", self.mismatched);
        }
        if let Some(why) = &self.first_failure {
            note += &format!("; {} lookups failed (first: {why})", self.failed);
        }
        Some(note)
    }
}

impl Elf {
    fn parse(data: Arc<Vec<u8>>) -> Option<Elf> {
        let file = object::File::parse(&data[..]).ok()?;
        let build_id = file.build_id().ok().flatten().map(<[u8]>::to_vec);
        let segments = file
            .segments()
            .map(|s| {
                let (offset, size) = s.file_range();
                (offset, size, s.address())
            })
            .collect();
        let symbols = symbols_of(&file);
        let stripped = file.section_by_name(".symtab").is_none();
        let debuglink = file
            .gnu_debuglink()
            .ok()
            .flatten()
            .and_then(|(name, _crc)| std::str::from_utf8(name).ok().map(str::to_owned));
        let section = |name: &str| {
            let s = file.section_by_name(name)?;
            let (offset, size) = s.file_range()?;
            let range = usize::try_from(offset).ok()?..usize::try_from(offset + size).ok()?;
            (range.end <= data.len()).then(|| (s.address()..s.address() + size, Shared(data.clone(), range)))
        };
        let eh_frame = section(".eh_frame");
        let eh_frame_hdr = section(".eh_frame_hdr");
        let text = section(".text");
        let unwind = eh_frame.is_some().then(|| framehop::ExplicitModuleSectionInfo {
            base_svma: 0,
            text_svma: text.as_ref().map(|t| t.0.clone()),
            text: text.map(|t| t.1),
            eh_frame_svma: eh_frame.as_ref().map(|t| t.0.clone()),
            eh_frame: eh_frame.map(|t| t.1),
            eh_frame_hdr_svma: eh_frame_hdr.as_ref().map(|t| t.0.clone()),
            eh_frame_hdr: eh_frame_hdr.map(|t| t.1),
            ..Default::default()
        });
        Some(Elf { build_id, segments, symbols, stripped, debuglink, with_debug: OnceLock::new(), unwind })
    }

    /// The symbols that name its frames: its own, and for a stripped file those of its
    /// debug file too (looked up on the first call).
    fn symbols(&self, system: &dyn SystemView, lookups: &mut DebugLookups) -> &[Symbol] {
        if !self.stripped {
            return &self.symbols;
        }
        self.with_debug.get_or_init(|| match debug_symbols(self, system, lookups) {
            Some(mut debug) => {
                debug.extend(self.symbols.iter().cloned());
                sorted(debug)
            }
            None => self.symbols.clone(),
        })
    }

    /// The difference between addresses in a process and in the file (avma − svma) for a
    /// mapping of the file from `pgoff` at `start`.
    fn bias(&self, start: u64, pgoff: u64) -> u64 {
        let svma_minus_offset = self
            .segments
            .iter()
            .find(|(offset, size, _)| (*offset..offset + size.max(&1)).contains(&pgoff))
            .map_or(0, |(offset, _, svma)| svma.wrapping_sub(*offset));
        start.wrapping_sub(pgoff).wrapping_sub(svma_minus_offset)
    }
}

/// The function `svma` lies in.
fn symbol_at(symbols: &[Symbol], svma: u64) -> Option<&str> {
    let i = symbols.partition_point(|s| s.start <= svma).checked_sub(1)?;
    let s = &symbols[i];
    (svma < s.end).then_some(s.name.as_str())
}

fn symbols_of(file: &object::File<'_>) -> Vec<Symbol> {
    let symbols: Vec<Symbol> = file
        .symbols()
        .chain(file.dynamic_symbols())
        .filter(|s| s.kind() == SymbolKind::Text && s.address() != 0)
        .filter_map(|s| Some((s.address(), s.size(), s.name().ok()?.to_owned())))
        .map(|(start, size, name)| Symbol { start, end: start + size, name })
        .collect();
    sorted(symbols)
}

/// Symbols by address, one per address (the largest), each without a size running to the next.
fn sorted(mut symbols: Vec<Symbol>) -> Vec<Symbol> {
    symbols.sort_by_key(|s| (s.start, std::cmp::Reverse(s.end)));
    symbols.dedup_by_key(|s| s.start);
    for i in 0..symbols.len() {
        if symbols[i].end == symbols[i].start {
            symbols[i].end = symbols.get(i + 1).map_or(u64::MAX, |n| n.start);
        }
    }
    symbols
}

/// The symbols of a stripped file's debug file: under /usr/lib/debug by build id, then by
/// `.gnu_debuglink`, then from debuginfod by build id. A debug file of another build is
/// not used.
fn debug_symbols(elf: &Elf, system: &dyn SystemView, lookups: &mut DebugLookups) -> Option<Vec<Symbol>> {
    let hex = elf.build_id.as_deref().filter(|id| id.len() > 1).map(hex);
    let mut local = Vec::new();
    if let Some(hex) = &hex {
        local.push(format!("/usr/lib/debug/.build-id/{}/{}.debug", &hex[..2], &hex[2..]));
    }
    if let Some(name) = &elf.debuglink {
        local.push(format!("/usr/lib/debug/{name}"));
    }
    for path in &local {
        if let Some(data) = system.code_file(Path::new(path))
            && let Some(symbols) = usable_debug_file(elf, &data, lookups)
        {
            lookups.local += 1;
            return Some(symbols);
        }
    }
    let found = match system.debuginfod(hex.as_deref()?)? {
        Lookup::Downloaded(data) => {
            lookups.downloaded += 1;
            data
        }
        Lookup::Cached(data) => {
            lookups.cached += 1;
            data
        }
        Lookup::Missing => {
            lookups.missing += 1;
            return None;
        }
        Lookup::Failed(why) => {
            lookups.failed += 1;
            lookups.first_failure.get_or_insert(why);
            return None;
        }
    };
    usable_debug_file(elf, &found, lookups)
}

/// The symbols of `data`, a debug file of `elf`, unless it belongs to another build.
fn usable_debug_file(elf: &Elf, data: &[u8], lookups: &mut DebugLookups) -> Option<Vec<Symbol>> {
    let file = object::File::parse(data).ok()?;
    if let (Some(theirs), Some(ours)) = (file.build_id().ok().flatten(), elf.build_id.as_deref())
        && theirs != ours
    {
        lookups.mismatched += 1;
        return None;
    }
    Some(symbols_of(&file)).filter(|s| !s.is_empty())
}

/// A symbol as people read it: Rust's and C++'s mangled names decoded (Rust's without
/// their hash), others as they are.
fn demangle(name: &str) -> String {
    if let Ok(rust) = rustc_demangle::try_demangle(name) {
        return format!("{rust:#}");
    }
    if name.starts_with("_Z")
        && let Ok(symbol) = cpp_demangle::Symbol::new(name)
        && let Ok(text) = symbol.demangle(&cpp_demangle::DemangleOptions::default())
    {
        return text;
    }
    name.to_owned()
}

fn hex(bytes: &[u8]) -> String {
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}

/// The kernel's symbols, sorted by address, from /proc/kallsyms.
fn kernel_symbols(text: &str) -> Vec<(u64, String)> {
    let mut symbols: Vec<(u64, String)> = text
        .lines()
        .filter_map(|line| {
            let mut parts = line.split_whitespace();
            let address = u64::from_str_radix(parts.next()?, 16).ok()?;
            let kind = parts.next()?;
            let name = parts.next()?;
            (address != 0 && matches!(kind, "t" | "T" | "w" | "W")).then(|| (address, name.to_owned()))
        })
        .collect();
    symbols.sort_unstable();
    symbols
}

fn kernel_symbol(symbols: &[(u64, String)], address: u64) -> Option<String> {
    let i = symbols.partition_point(|(a, _)| *a <= address).checked_sub(1)?;
    Some(symbols[i].1.clone())
}

/// One process's executable mappings at a moment, by start address, and its unwinder.
#[derive(Default, Clone)]
struct Space {
    maps: Vec<u32>,
    unwinder: Option<Arc<framehop::x86_64::UnwinderX86_64<Shared>>>,
    /// The executable of a space made by an exec: the first file mapped after it.
    exe: Option<String>,
    after_exec: bool,
}

enum Step {
    Mmap(usize),
    Space(usize),
    Sample(usize),
}

struct Builder<'a> {
    system: &'a dyn SystemView,
    elves: HashMap<String, Option<Arc<Elf>>>,
    /// Each mapping and the file it maps.
    mappings: Vec<(Mapping, Option<Arc<Elf>>)>,
    frames: Vec<Frame>,
    frame_ids: HashMap<(Option<u32>, bool, u64), u32>,
    stacks: Vec<Stack>,
    stack_ids: HashMap<(Option<u32>, u32), u32>,
    kallsyms: Vec<(u64, String)>,
    cache: framehop::x86_64::CacheX86_64,
    unwound: u64,
    fell_back: u64,
    /// Bytes of user stack each sample copied, and the most any unwinding read.
    stack_bytes: usize,
    deepest_read: usize,
    /// Stacks deeper than their copy.
    cut_short: u64,
    /// Mappings whose file's build id is no longer the one the kernel saw mapped.
    replaced_files: u64,
    debug_lookups: DebugLookups,
    /// Per executable: samples whose frame-pointer chain was checked against the copy.
    frame_pointer_checks: BTreeMap<String, Check>,
    /// Per executable: samples taken without a copy, unwound from their chain.
    without_copy: BTreeMap<String, u64>,
}

impl<'a> Builder<'a> {
    fn new(system: &'a dyn SystemView, stack_bytes: usize, kallsyms: Vec<(u64, String)>) -> Builder<'a> {
        Builder {
            system,
            elves: HashMap::new(),
            mappings: Vec::new(),
            frames: Vec::new(),
            frame_ids: HashMap::new(),
            stacks: Vec::new(),
            stack_ids: HashMap::new(),
            kallsyms,
            cache: framehop::x86_64::CacheX86_64::new(),
            unwound: 0,
            fell_back: 0,
            stack_bytes,
            deepest_read: 0,
            cut_short: 0,
            replaced_files: 0,
            debug_lookups: DebugLookups::default(),
            frame_pointer_checks: BTreeMap::new(),
            without_copy: BTreeMap::new(),
        }
    }

    fn elf(&mut self, path: &str) -> Option<Arc<Elf>> {
        if !path.starts_with('/') {
            return None;
        }
        if let Some(e) = self.elves.get(path) {
            return e.clone();
        }
        let elf =
            self.system.code_file(Path::new(path)).and_then(|data| Elf::parse(Arc::new(data))).map(Arc::new);
        self.elves.insert(path.to_owned(), elf.clone());
        elf
    }

    fn add_mapping(&mut self, m: &RawMmap, t_ns: Nanos) -> u32 {
        let mut elf = self.elf(&m.path);
        // The file at that path now is not the one mapped (replaced, or upgraded, since): its
        // symbols and unwind tables would be another program's.
        if let (Some(mapped), Some(now)) = (&m.build_id, elf.as_ref().and_then(|e| e.build_id.as_ref()))
            && mapped != now
        {
            elf = None;
            self.replaced_files += 1;
        }
        let build_id = m.build_id.clone().or_else(|| elf.as_ref().and_then(|e| e.build_id.clone()));
        let id = self.mappings.len() as u32 + 1;
        let mapping = Mapping {
            id,
            pid: m.pid,
            t_ns,
            start: m.start,
            end: m.start.saturating_add(m.len),
            file_offset: m.pgoff,
            path: m.path.clone(),
            build_id: build_id.as_deref().map(hex),
        };
        self.mappings.push((mapping, elf));
        id
    }

    fn unwinder(&self, space: &Space) -> framehop::x86_64::UnwinderX86_64<Shared> {
        use framehop::Unwinder;
        let mut unwinder = framehop::x86_64::UnwinderX86_64::new();
        for &id in &space.maps {
            let Some((m, Some(elf))) = self.mappings.get(id as usize - 1) else { continue };
            let Some(info) = elf.unwind.clone() else { continue };
            let bias = elf.bias(m.start, m.file_offset);
            unwinder.add_module(framehop::Module::new(m.path.clone(), m.start..m.end, bias, info));
        }
        unwinder
    }

    fn mapping_at(&self, space: &Space, address: u64) -> Option<u32> {
        space.maps.iter().rev().copied().find(|&id| {
            self.mappings.get(id as usize - 1).is_some_and(|(m, _)| (m.start..m.end).contains(&address))
        })
    }

    fn frame(&mut self, space: &Space, kernel: bool, address: u64) -> u32 {
        let mapping_id = if kernel { None } else { self.mapping_at(space, address) };
        let key = (mapping_id, kernel, address);
        if let Some(&id) = self.frame_ids.get(&key) {
            return id;
        }
        let symbol = if kernel {
            kernel_symbol(&self.kallsyms, address)
        } else {
            mapping_id.and_then(|id| {
                let (m, elf) = self.mappings.get(id as usize - 1)?;
                let elf = elf.as_ref()?;
                let svma = address.wrapping_sub(elf.bias(m.start, m.file_offset));
                symbol_at(elf.symbols(self.system, &mut self.debug_lookups), svma).map(demangle)
            })
        };
        let id = self.frames.len() as u32 + 1;
        self.frames.push(Frame { id, mapping_id, kernel, address, symbol });
        self.frame_ids.insert(key, id);
        id
    }

    /// The user frames of a sample, innermost first, as lookup addresses (return addresses − 1).
    fn user_frames(&mut self, space: &mut Space, s: &RawSample, stack: &[u8]) -> Vec<u64> {
        let fp_chain: Vec<u64> =
            s.user.iter().enumerate().map(|(i, &a)| if i == 0 { a } else { a.wrapping_sub(1) }).collect();
        let [bp, sp, ip] = s.regs[..] else { return fp_chain };
        if stack.is_empty() {
            return fp_chain;
        }
        use framehop::Unwinder;
        let unwinder = match &space.unwinder {
            Some(u) => u.clone(),
            None => {
                let u = Arc::new(self.unwinder(space));
                space.unwinder = Some(u.clone());
                u
            }
        };
        let (mut deepest, mut past_copy) = (0, false);
        let mut read_stack = |addr: u64| -> Result<u64, ()> {
            let at = usize::try_from(addr.checked_sub(sp).ok_or(())?).map_err(|_| ())?;
            let Some(word) = stack.get(at..at + 8) else {
                past_copy = true;
                return Err(());
            };
            deepest = deepest.max(at + 8);
            Ok(u64::from_le_bytes(word.try_into().map_err(|_| ())?))
        };
        let regs = framehop::x86_64::UnwindRegsX86_64::new(ip, sp, bp);
        let mut frames = unwinder.iter_frames(ip, regs, &mut self.cache, &mut read_stack);
        let mut unwound = Vec::new();
        let complete = loop {
            match frames.next() {
                Ok(Some(f)) => {
                    unwound.push(f.address_for_lookup());
                    if unwound.len() >= MAX_FRAMES {
                        break true;
                    }
                }
                Ok(None) => break true,
                Err(_) => break false,
            }
        };
        self.deepest_read = self.deepest_read.max(deepest);
        // A copy shorter than asked for ends at the top of the stack; a full one may cut it.
        if !complete && past_copy && stack.len() >= self.stack_bytes {
            self.cut_short += 1;
        }
        let chosen = if complete || unwound.len() >= fp_chain.len() {
            self.unwound += 1;
            unwound
        } else {
            self.fell_back += 1;
            fp_chain.clone()
        };
        if let Some(exe) = &space.exe {
            let check = self.frame_pointer_checks.entry(exe.clone()).or_default();
            check.compared += 1;
            check.agreed += u64::from(chosen == fp_chain);
        }
        chosen
    }

    fn stack(&mut self, frames: impl Iterator<Item = u32>) -> Option<u32> {
        let mut parent = None;
        for frame_id in frames {
            let key = (parent, frame_id);
            let id = match self.stack_ids.get(&key) {
                Some(&id) => id,
                None => {
                    let id = self.stacks.len() as u32 + 1;
                    self.stacks.push(Stack { id, parent_id: parent, frame_id });
                    self.stack_ids.insert(key, id);
                    id
                }
            };
            parent = Some(id);
        }
        parent
    }
}

/// Kernel frames of a callchain as lookup addresses, innermost first: the sampled
/// instruction, then the callers' return addresses − 1 (inside their call instruction).
fn kernel_lookup_addresses(chain: &[u64]) -> impl Iterator<Item = u64> + '_ {
    chain.iter().enumerate().map(|(i, &a)| if i == 0 { a } else { a.wrapping_sub(1) })
}

/// Which processes' samples are kept, which of them ran before the recording (their
/// mappings come from /proc), and how boot-clock times become trace times.
struct SampleScope<'a> {
    in_scope: &'a dyn Fn(i32) -> bool,
    existed_before: &'a dyn Fn(i32) -> bool,
    to_trace_time: &'a dyn Fn(u64) -> Nanos,
}

/// The processes' address spaces as perf's records replay them in time order.
struct Spaces {
    by_pid: HashMap<i32, Space>,
    /// Processes whose mappings are known: from an mmap record, their parent's, or /proc.
    mapped: HashSet<i32>,
}

impl Spaces {
    fn add_mapping(&mut self, pid: i32, mapping_id: u32, path: &str) {
        let space = self.by_pid.entry(pid).or_default();
        if space.after_exec && space.exe.is_none() && path.starts_with('/') {
            space.exe = Some(path.to_owned());
        }
        space.maps.push(mapping_id);
        space.unwinder = None;
    }

    /// An exec starts an empty space; a fork copies its parent's.
    fn follow(&mut self, event: &SpaceEvent) {
        match *event {
            SpaceEvent::Exec { pid, .. } => {
                self.by_pid.insert(pid, Space { after_exec: true, ..Space::default() });
            }
            SpaceEvent::Fork { pid, parent, .. } => {
                let copy = self.by_pid.get(&parent).cloned().unwrap_or_default();
                self.by_pid.insert(pid, copy);
                if self.mapped.contains(&parent) {
                    self.mapped.insert(pid);
                }
            }
        }
    }

    /// Its mappings from /proc, while it runs (a pid of a process started during the
    /// recording may name another process by now).
    fn read_proc_maps(&mut self, b: &mut Builder<'_>, pid: i32) {
        self.mapped.insert(pid);
        let maps = b.system.proc_maps(pid).map(|t| parse_maps(&t, pid)).unwrap_or_default();
        let space = self.by_pid.entry(pid).or_default();
        for m in &maps {
            let id = b.add_mapping(m, 0);
            space.maps.push(id);
        }
        space.unwinder = None;
    }

    /// A CPU sample's stack: its user frames unwound in its process's space, then its
    /// kernel frames (or only the sampled instruction when it has neither).
    fn sample_stack(&mut self, b: &mut Builder<'_>, s: &RawSample, stack: &[u8]) -> Option<u32> {
        let mut space = self.by_pid.remove(&s.pid).unwrap_or_default();
        let user = if s.regs.is_empty() && s.user.is_empty() {
            Vec::new()
        } else if s.without_copy {
            let exe = space.exe.clone().unwrap_or_else(|| "(an executable not seen mapped)".to_owned());
            *b.without_copy.entry(exe).or_default() += 1;
            s.user.iter().enumerate().map(|(i, &a)| if i == 0 { a } else { a.wrapping_sub(1) }).collect()
        } else {
            b.user_frames(&mut space, s, stack)
        };
        let mut kernel: Vec<u64> = kernel_lookup_addresses(&s.kernel).collect();
        if kernel.is_empty() && user.is_empty() && s.ip != 0 {
            kernel.push(s.ip);
        }
        let mut frames: Vec<u32> = user.iter().rev().map(|&a| b.frame(&space, false, a)).collect();
        frames.extend(kernel.iter().rev().map(|&a| b.frame(&space, true, a)));
        self.by_pid.insert(s.pid, space);
        b.stack(frames.into_iter())
    }
}

/// Builds the stack tables from `perf` (the bytes of its streams in `streams`) and the
/// off-CPU kernel stacks `off_cpu`, keeping the samples of processes `in_scope`; the
/// mappings of those that `existed_before` the recording (no mmap record names them) come
/// from /proc; `to_trace_time` converts the boot-clock times.
#[allow(clippy::too_many_arguments)]
pub fn stack_tables(
    perf: &PerfData,
    off_cpu: Option<&PerfData>,
    stack_bytes: usize,
    streams: &[Vec<u8>],
    in_scope: impl Fn(i32) -> bool,
    existed_before: impl Fn(i32) -> bool,
    to_trace_time: impl Fn(u64) -> Nanos,
    system: &dyn SystemView,
) -> StackTables {
    let mut out = StackTables::default();
    let kallsyms = system.kallsyms().map(|t| kernel_symbols(&t)).unwrap_or_default();
    let mut b = Builder::new(system, stack_bytes, kallsyms);
    let scope =
        SampleScope { in_scope: &in_scope, existed_before: &existed_before, to_trace_time: &to_trace_time };
    let out_of_scope = add_cpu_samples(&mut b, &mut out, perf, streams, &scope);
    let off_cpu_out_of_scope = off_cpu.map_or(0, |off| add_off_cpu_samples(&mut b, &mut out, off, &scope));
    out.losses.extend(cpu_losses(perf));
    out.notes.extend(naming_notes(&b));
    out.notes.extend(frame_pointer_notes(&b));
    out.frame_pointer_checks = std::mem::take(&mut b.frame_pointer_checks);
    out.notes.extend(scope_notes(out_of_scope, off_cpu_out_of_scope));
    out.mappings = b.mappings.into_iter().map(|(m, _)| m).collect();
    out.frames = b.frames;
    out.stacks = b.stacks;
    out
}

/// perf's records in the order they happened; at one time an exec or fork comes before
/// an mmap, and an mmap before a sample.
fn replay_order(perf: &PerfData) -> Vec<Step> {
    let time_of_space = |e: &SpaceEvent| match e {
        SpaceEvent::Exec { time, .. } | SpaceEvent::Fork { time, .. } => *time,
    };
    let mut steps: Vec<(u64, u8, usize, Step)> = Vec::new();
    steps.extend(perf.mmaps.iter().enumerate().map(|(i, m)| (m.time, 1, i, Step::Mmap(i))));
    steps.extend(perf.spaces.iter().enumerate().map(|(i, e)| (time_of_space(e), 0, i, Step::Space(i))));
    steps.extend(perf.samples.iter().enumerate().map(|(i, s)| (s.time, 2, i, Step::Sample(i))));
    steps.sort_by_key(|(t, order, i, _)| (*t, *order, *i));
    steps.into_iter().map(|(_, _, _, step)| step).collect()
}

/// Adds the CPU samples of processes in scope, each with its stack, following the
/// processes' mappings; returns how many samples were out of scope.
fn add_cpu_samples(
    b: &mut Builder<'_>,
    out: &mut StackTables,
    perf: &PerfData,
    streams: &[Vec<u8>],
    scope: &SampleScope<'_>,
) -> u64 {
    let mut spaces = Spaces { by_pid: HashMap::new(), mapped: perf.mmaps.iter().map(|m| m.pid).collect() };
    let mut out_of_scope = 0u64;
    for step in replay_order(perf) {
        match step {
            Step::Mmap(i) => {
                let m = &perf.mmaps[i];
                let id = b.add_mapping(m, (scope.to_trace_time)(m.time));
                spaces.add_mapping(m.pid, id, &m.path);
            }
            Step::Space(i) => spaces.follow(&perf.spaces[i]),
            Step::Sample(i) => {
                let s = &perf.samples[i];
                if !(scope.in_scope)(s.pid) {
                    out_of_scope += 1;
                    continue;
                }
                if !spaces.mapped.contains(&s.pid) && (scope.existed_before)(s.pid) {
                    spaces.read_proc_maps(b, s.pid);
                }
                let stack = streams.get(s.stream).and_then(|bytes| bytes.get(s.stack.clone())).unwrap_or(&[]);
                let stack_id = spaces.sample_stack(b, s, stack);
                out.samples.push(StackSample {
                    t_ns: (scope.to_trace_time)(s.time),
                    pid: s.pid,
                    tid: s.tid,
                    cpu: s.cpu,
                    stack_id,
                });
            }
        }
    }
    out_of_scope
}

/// Adds the off-CPU samples of processes in scope, each with its kernel stack, and their
/// losses; returns how many samples were out of scope.
fn add_off_cpu_samples(
    b: &mut Builder<'_>,
    out: &mut StackTables,
    off: &PerfData,
    scope: &SampleScope<'_>,
) -> u64 {
    let mut out_of_scope = 0u64;
    let no_space = Space::default();
    for s in &off.samples {
        if !(scope.in_scope)(s.pid) {
            out_of_scope += 1;
            continue;
        }
        let kernel: Vec<u64> = kernel_lookup_addresses(&s.kernel).collect();
        let frames: Vec<u32> = kernel.iter().rev().map(|&a| b.frame(&no_space, true, a)).collect();
        let stack_id = b.stack(frames.into_iter());
        out.off_cpu_samples.push(OffCpuSample {
            t_ns: (scope.to_trace_time)(s.time),
            pid: s.pid,
            tid: s.tid,
            stack_id,
        });
    }
    out.off_cpu_samples.sort_by_key(|s| (s.t_ns, s.tid));
    out.losses.push(Loss {
        source: LossSource::Perf,
        what: "off-CPU stacks lost".into(),
        count: off.lost_samples.saturating_add(off.lost_records),
    });
    if off.torn_streams > 0 {
        out.losses.push(Loss {
            source: LossSource::Perf,
            what: "off-CPU streams cut short".into(),
            count: off.torn_streams as u64,
        });
    }
    out_of_scope
}

/// What the CPU sampling lost.
fn cpu_losses(perf: &PerfData) -> Vec<Loss> {
    let mut losses = vec![
        Loss { source: LossSource::Perf, what: "samples lost".into(), count: perf.lost_samples },
        Loss {
            source: LossSource::Perf,
            what: "records lost (ring buffer full)".into(),
            count: perf.lost_records,
        },
    ];
    if perf.torn_streams > 0 {
        losses.push(Loss {
            source: LossSource::Perf,
            what: "CPU streams cut short".into(),
            count: perf.torn_streams as u64,
        });
    }
    losses
}

/// Notes on how the frames were named and the user stacks unwound: what could not be.
fn naming_notes(b: &Builder<'_>) -> Vec<String> {
    let mut notes = Vec::new();
    if b.kallsyms.is_empty() && b.frames.iter().any(|f| f.kernel) {
        notes.push(
            "kernel frames are not named: /proc/kallsyms showed no addresses (kernel.kptr_restrict, or not root)"
                .into(),
        );
    }
    if b.unwound + b.fell_back > 0 {
        notes.push(format!(
            "user stacks: {} unwound from the copied stack ({} KiB each), which needed at most {:.1} KiB; {} were \
             deeper than the copy and miss their outermost callers",
            b.unwound + b.fell_back,
            b.stack_bytes / 1024,
            b.deepest_read as f64 / 1024.0,
            b.cut_short
        ));
    }
    if b.fell_back > 0 {
        notes.push(format!(
            "{} of {} user stacks could not be unwound from their unwind tables and use the frame-pointer chain",
            b.fell_back,
            b.fell_back + b.unwound
        ));
    }
    let mut unread: Vec<&str> =
        b.elves.iter().filter(|(_, e)| e.is_none()).map(|(p, _)| p.as_str()).collect();
    unread.sort_unstable();
    if let Some(first) = unread.first() {
        notes.push(format!(
            "{} mapped files could not be read for symbols and unwinding (e.g. {first})",
            unread.len()
        ));
    }
    notes.extend(b.debug_lookups.note());
    if b.replaced_files > 0 {
        notes.push(format!(
            "{} mappings name a file replaced since it was mapped (another build id): their frames have no names",
            b.replaced_files
        ));
    }
    notes
}

/// Notes on the samples taken without a stack copy, and on the executables whose chains
/// were found trustworthy (the next recording takes no copy for them).
fn frame_pointer_notes(b: &Builder<'_>) -> Vec<String> {
    let mut notes = Vec::new();
    if !b.without_copy.is_empty() {
        let each: Vec<String> = b
            .without_copy
            .iter()
            .map(|(exe, n)| {
                let copied = b.frame_pointer_checks.get(exe).map_or(0, |c| c.compared);
                format!("{n} of {exe} ({copied} with a copy, taken before its exec was seen)")
            })
            .collect();
        notes.push(format!(
            "CPU samples without a user stack copy, unwound from their frame-pointer chains (earlier recordings \
             found them the same as DWARF unwinding): {}",
            each.join(", ")
        ));
    }
    let trusted: Vec<&str> =
        b.frame_pointer_checks.iter().filter(|(_, c)| c.trusted()).map(|(exe, _)| exe.as_str()).collect();
    if !trusted.is_empty() {
        notes.push(format!(
            "frame-pointer chains the same as DWARF unwinding in at least {} % of the samples of {}: later \
             recordings take no user stack copy for them",
            crate::frame_pointers::MIN_AGREEMENT_PERCENT,
            trusted.join(", ")
        ));
    }
    notes
}

/// Notes on the samples of processes outside the recorded scope, left out.
fn scope_notes(out_of_scope: u64, off_cpu_out_of_scope: u64) -> Vec<String> {
    let mut notes = Vec::new();
    if out_of_scope > 0 {
        notes.push(format!(
            "{out_of_scope} CPU samples of processes outside the recorded scope were left out (the sampling \
             watched whole CPUs)"
        ));
    }
    if off_cpu_out_of_scope > 0 {
        notes.push(format!(
            "{off_cpu_out_of_scope} off-CPU stacks of processes outside the recorded scope were left out (the \
             tracepoint watched whole CPUs)"
        ));
    }
    notes
}

/// The executable file mappings of a /proc/PID/maps text.
fn parse_maps(text: &str, pid: i32) -> Vec<RawMmap> {
    text.lines()
        .filter_map(|line| {
            let mut parts = line.split_whitespace();
            let (range, perms, offset) = (parts.next()?, parts.next()?, parts.next()?);
            let path = parts.nth(2).unwrap_or("").to_owned();
            if !perms.contains('x') {
                return None;
            }
            let (start, end) = range.split_once('-')?;
            let start = u64::from_str_radix(start, 16).ok()?;
            let end = u64::from_str_radix(end, 16).ok()?;
            // `[vsyscall]` lies in the kernel's half: no sample's user frame is there, and the
            // trace's offsets stop at 63 bits.
            if end > i64::MAX as u64 {
                return None;
            }
            Some(RawMmap {
                time: 0,
                pid,
                start,
                len: end.checked_sub(start)?,
                pgoff: u64::from_str_radix(offset, 16).ok()?,
                path,
                build_id: None,
            })
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn proc_maps_give_the_executable_file_mappings_below_the_kernel() {
        let maps = "\
55d4a5c00000-55d4a5c04000 r--p 00000000 fe:01 1234 /usr/bin/dash
55d4a5c04000-55d4a5c19000 r-xp 00004000 fe:01 1234 /usr/bin/dash
7ffd1c5f4000-7ffd1c5f6000 r-xp 00000000 00:00 0 [vdso]
ffffffffff600000-ffffffffff601000 --xp 00000000 00:00 0 [vsyscall]
";
        let found: Vec<(u64, u64, u64, String)> =
            parse_maps(maps, 7).into_iter().map(|m| (m.start, m.len, m.pgoff, m.path)).collect();
        assert_eq!(
            found,
            [
                (0x55d4_a5c0_4000, 0x15000, 0x4000, "/usr/bin/dash".to_owned()),
                (0x7ffd_1c5f_4000, 0x2000, 0, "[vdso]".to_owned()),
            ]
        );
    }

    #[test]
    fn a_file_replaced_since_it_was_mapped_names_no_frame() {
        let elf = Elf {
            build_id: Some(vec![1, 2]),
            segments: vec![(0, 0x10000, 0)],
            symbols: vec![Symbol { start: 0, end: 0x10000, name: "parse".into() }],
            stripped: false,
            debuglink: None,
            with_debug: OnceLock::new(),
            unwind: None,
        };
        let mut b = Builder::new(&crate::assemble::LiveSystem, 16384, Vec::new());
        b.elves.insert("/usr/bin/app".into(), Some(Arc::new(elf)));
        let mapped = |start, build_id: &[u8]| RawMmap {
            pid: 1,
            start,
            len: 0x1000,
            path: "/usr/bin/app".into(),
            build_id: Some(build_id.to_vec()),
            ..Default::default()
        };
        let same = b.add_mapping(&mapped(0x1000, &[1, 2]), 0);
        let replaced = b.add_mapping(&mapped(0x8000, &[3, 4]), 0);
        let space = Space { maps: vec![same, replaced], ..Space::default() };
        let named = |b: &mut Builder, address| {
            let id = b.frame(&space, false, address);
            b.frames[id as usize - 1].symbol.clone()
        };
        assert_eq!(named(&mut b, 0x1100).as_deref(), Some("parse"));
        assert_eq!(named(&mut b, 0x8100), None);
        assert_eq!(b.replaced_files, 1);
        assert_eq!(b.mappings[1].0.build_id.as_deref(), Some("0304"));
    }

    #[test]
    fn rust_and_cpp_symbols_are_demangled() {
        assert_eq!(demangle("_ZN4core3fmt5write17h0123456789abcdefE"), "core::fmt::write");
        assert_eq!(
            demangle("_ZNSt6vectorIiSaIiEE9push_backERKi"),
            "std::vector<int, std::allocator<int> >::push_back(int const&)"
        );
        assert_eq!(demangle("hot_spin"), "hot_spin");
    }

    #[test]
    fn kallsyms_name_the_function_an_address_falls_in() {
        let symbols = kernel_symbols(
            "ffffffff81000000 T _stext\nffffffff81001000 t clear_page_erms\nffffffff81002000 D some_data\n\
             0000000000000000 T hidden",
        );
        assert_eq!(kernel_symbol(&symbols, 0xffff_ffff_8100_1234).as_deref(), Some("clear_page_erms"));
        assert_eq!(kernel_symbol(&symbols, 0xffff_ffff_8000_0000), None);
    }

    #[test]
    fn a_stripped_file_is_named_from_its_own_debug_file_and_never_from_another_builds() {
        let test = "a_stripped_file_is_named_from_its_own_debug_file";
        let source = "__attribute__((noinline)) int hidden(int x) { return x * 3 + 1; }\n\
                      int main(int c, char **v) { (void)v; return hidden(c) == 4 ? 0 : 1; }\n";
        let dir = tempfile::tempdir().unwrap();
        let (ours, theirs) =
            ("c01d57a27000000000000000000000000000aa01", "c01d57a27000000000000000000000000000bb02");
        let Some((program, debug)) =
            coldstart_testkit::stripped_program(test, dir.path(), "a", source, &["-O1"], ours)
        else {
            return;
        };
        let Some((other, _)) =
            coldstart_testkit::stripped_program(test, dir.path(), "b", source, &["-O1"], theirs)
        else {
            return;
        };
        let parse = |path: &Path| Elf::parse(Arc::new(std::fs::read(path).unwrap())).unwrap();
        let (elf, other_elf) = (parse(&program), parse(&other));
        assert!(
            elf.stripped && !elf.symbols.iter().any(|s| s.name == "hidden"),
            "stripped, hidden has no name"
        );
        let debug = std::fs::read(debug).unwrap();
        let mut lookups = DebugLookups::default();

        let named = usable_debug_file(&elf, &debug, &mut lookups).expect("its own debug file");
        assert!(named.iter().any(|s| s.name == "hidden"));
        assert!(usable_debug_file(&other_elf, &debug, &mut lookups).is_none(), "another build's debug file");
        assert_eq!(lookups.mismatched, 1);
        lookups.local = 1;
        assert_eq!(
            lookups.note().unwrap(),
            "stripped files named from their debug files: 1 (1 under /usr/lib/debug, 0 downloaded from debuginfod, \
             0 from its cache); 1 debug files of another build left out"
        );
    }
}
