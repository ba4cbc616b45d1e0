//! Every tracefs setting the tracer writes, remembered and put back.

use cpushield_kernel::Kernel;
use std::io;
use std::path::{Path, PathBuf};
use std::sync::Arc;

/// The value to write back so a tracefs file reads as it did.
///
/// - `trace_clock` lists every clock with the current one in brackets
///   (`[local] global mono ...`): the bracketed name is written back.
/// - `buffer_size_kb` may read `7 (expanded: 1408)` before the ring buffer was
///   ever used: the kernel expands it to 1408 on first use, so 1408 is written
///   back (writing 7 would pin a 7 KB buffer that never expands). A per-CPU
///   `per_cpu/cpuN/buffer_size_kb` reads a bare `7` then: see
///   [`SettingsGuard::set`], which reads the meaning from the top-level file.
/// - `current_tracer`, `tracing_on`, `tracing_cpumask` and event `enable`
///   files read as they are written.
pub fn restore_value(path: &Path, text: &str) -> String {
    let text = text.trim();
    let name = path.file_name().and_then(|n| n.to_str()).unwrap_or("");
    match name {
        "trace_clock" => text
            .split_whitespace()
            .find(|w| w.starts_with('[') && w.ends_with(']'))
            .map(|w| w.trim_matches(|c| c == '[' || c == ']').to_string())
            .unwrap_or_else(|| text.to_string()),
        "buffer_size_kb" => {
            if let Some((_, rest)) = text.split_once("(expanded:") {
                rest.trim().trim_end_matches(')').trim().to_string()
            } else {
                text.split_whitespace().next().unwrap_or("").to_string()
            }
        }
        // An event filter reads "none" when unset; writing "0" clears one.
        "filter" if text == "none" => "0".to_string(),
        _ => text.to_string(),
    }
}

/// Remembers the original value of each tracefs file before its first write,
/// and writes them back (last changed first) on [`SettingsGuard::restore`].
pub struct SettingsGuard {
    kernel: Arc<dyn Kernel>,
    saved: Vec<(PathBuf, String)>,
}

impl SettingsGuard {
    /// A guard with nothing saved yet.
    pub fn new(kernel: Arc<dyn Kernel>) -> Self {
        Self {
            kernel,
            saved: Vec::new(),
        }
    }

    /// Writes `value` to `path`, remembering the value from before. A file
    /// already holding `value` is left alone.
    pub fn set(&mut self, path: &Path, value: &str) -> io::Result<()> {
        let before = self
            .kernel
            .read(path)
            .map_err(|e| cpushield_kernel::with_path(e, path))?;
        let mut original = restore_value(path, &before);
        if let Some(expanded) = unexpanded_per_cpu_size(self.kernel.as_ref(), path, &original) {
            original = expanded;
        }
        if original == value.trim() {
            return Ok(());
        }
        self.kernel
            .write(path, value)
            .map_err(|e| cpushield_kernel::with_path(e, path))?;
        if !self.saved.iter().any(|(p, _)| p == path) {
            self.saved.push((path.to_path_buf(), original));
        }
        Ok(())
    }

    /// Remembers what `path` means now without writing it, so that
    /// [`SettingsGuard::restore`] puts that meaning back if something the
    /// session did changes it as a side effect. The top-level
    /// `buffer_size_kb` needs this: on a kernel that never traced it reads
    /// `7 (expanded: 1408)`, and using an instance can leave it at a plain
    /// `7`, a 7 KB buffer for every later user of tracefs.
    pub fn watch(&mut self, path: &Path) -> io::Result<()> {
        let before = self
            .kernel
            .read(path)
            .map_err(|e| cpushield_kernel::with_path(e, path))?;
        if !self.saved.iter().any(|(p, _)| p == path) {
            self.saved
                .push((path.to_path_buf(), restore_value(path, &before)));
        }
        Ok(())
    }

    /// The files changed so far and their original values, in order of change.
    pub fn saved(&self) -> &[(PathBuf, String)] {
        &self.saved
    }

    /// Writes every original value back, last changed first. Returns the
    /// errors (each naming its file); the guard is empty afterwards.
    pub fn restore(&mut self) -> Vec<String> {
        let mut errors = Vec::new();
        while let Some((path, value)) = self.saved.pop() {
            // A file that still means what it meant is left alone.
            if let Ok(now) = self.kernel.read(&path) {
                if restore_value(&path, &now) == value {
                    continue;
                }
            }
            if let Err(e) = self.kernel.write(&path, &value) {
                errors.push(format!(
                    "{}: could not restore '{value}': {e}",
                    path.display()
                ));
            }
        }
        errors
    }
}

/// For `<dir>/per_cpu/cpuN/buffer_size_kb` holding the never-used size while
/// `<dir>/buffer_size_kb` reads `7 (expanded: 1408)`: the size the kernel
/// gives that buffer on first use (1408), which is what the file means.
fn unexpanded_per_cpu_size(kernel: &dyn Kernel, path: &Path, value: &str) -> Option<String> {
    if path.file_name()? != "buffer_size_kb" {
        return None;
    }
    let cpu_dir = path.parent()?;
    let per_cpu = cpu_dir.parent()?;
    if per_cpu.file_name()? != "per_cpu" {
        return None;
    }
    let top = kernel
        .read(&per_cpu.parent()?.join("buffer_size_kb"))
        .ok()?;
    let (unexpanded, rest) = top.trim().split_once("(expanded:")?;
    (unexpanded.trim() == value).then(|| rest.trim().trim_end_matches(')').trim().to_string())
}

#[cfg(test)]
mod tests {
    use super::*;
    use cpushield_kernel::FakeKernel;

    #[test]
    fn restore_values_follow_the_kernel_file_formats() {
        assert_eq!(
            restore_value(Path::new("/t/trace_clock"), "[local] global mono\n"),
            "local"
        );
        assert_eq!(
            restore_value(Path::new("/t/buffer_size_kb"), "7 (expanded: 1408)\n"),
            "1408"
        );
        assert_eq!(
            restore_value(Path::new("/t/per_cpu/cpu1/buffer_size_kb"), "4096\n"),
            "4096"
        );
        assert_eq!(restore_value(Path::new("/t/tracing_on"), "1\n"), "1");
        assert_eq!(
            restore_value(Path::new("/t/events/sched/sched_switch/filter"), "none\n"),
            "0"
        );
    }

    #[test]
    fn restore_puts_back_every_changed_file_in_reverse_order() {
        let k = Arc::new(FakeKernel::new());
        k.set_file("/t/tracing_on", "1\n");
        k.set_file("/t/trace_clock", "[local] mono\n");
        k.set_file("/t/events/irq/irq_handler_entry/enable", "0\n");
        let mut g = SettingsGuard::new(k.clone());
        g.set(Path::new("/t/tracing_on"), "0").unwrap();
        g.set(Path::new("/t/trace_clock"), "mono").unwrap();
        g.set(Path::new("/t/tracing_on"), "1").unwrap();
        g.set(Path::new("/t/events/irq/irq_handler_entry/enable"), "1")
            .unwrap();
        assert_eq!(g.saved().len(), 3);
        assert!(g.restore().is_empty());
        assert_eq!(k.file("/t/tracing_on").unwrap(), "1");
        assert_eq!(k.file("/t/trace_clock").unwrap(), "local");
        assert_eq!(
            k.file("/t/events/irq/irq_handler_entry/enable").unwrap(),
            "0"
        );
    }

    #[test]
    fn a_never_used_per_cpu_buffer_is_restored_to_its_expanded_size() {
        // A freshly booted kernel: the top-level file says what "7" means.
        let k = Arc::new(FakeKernel::new());
        k.set_file("/t/buffer_size_kb", "7 (expanded: 1408)\n");
        k.set_file("/t/per_cpu/cpu1/buffer_size_kb", "7\n");
        let mut g = SettingsGuard::new(k.clone());
        g.set(Path::new("/t/per_cpu/cpu1/buffer_size_kb"), "32768")
            .unwrap();
        assert!(g.restore().is_empty());
        assert_eq!(k.file("/t/per_cpu/cpu1/buffer_size_kb").unwrap(), "1408");
        // An expanded buffer of a user's chosen 7 KB stays 7.
        k.set_file("/t/buffer_size_kb", "7\n");
        k.set_file("/t/per_cpu/cpu1/buffer_size_kb", "7\n");
        g.set(Path::new("/t/per_cpu/cpu1/buffer_size_kb"), "32768")
            .unwrap();
        assert!(g.restore().is_empty());
        assert_eq!(k.file("/t/per_cpu/cpu1/buffer_size_kb").unwrap(), "7");
    }

    #[test]
    fn a_top_level_buffer_left_at_its_never_used_size_gets_its_meaning_back() {
        let k = Arc::new(FakeKernel::new());
        k.set_file("/t/buffer_size_kb", "7 (expanded: 1408)\n");
        let mut g = SettingsGuard::new(k.clone());
        g.watch(Path::new("/t/buffer_size_kb")).unwrap();
        // Using an instance expanded the flag but not the buffer.
        k.set_file("/t/buffer_size_kb", "7\n");
        assert!(g.restore().is_empty());
        assert_eq!(k.file("/t/buffer_size_kb").unwrap(), "1408");
        // Untouched, a watched file is not written.
        k.set_file("/t/buffer_size_kb", "7 (expanded: 1408)\n");
        g.watch(Path::new("/t/buffer_size_kb")).unwrap();
        assert!(g.restore().is_empty());
        assert_eq!(k.file("/t/buffer_size_kb").unwrap(), "7 (expanded: 1408)\n");
    }

    #[test]
    fn an_unchanged_value_is_not_written_or_saved() {
        let k = Arc::new(FakeKernel::new());
        k.set_file("/t/current_tracer", "nop\n");
        let mut g = SettingsGuard::new(k.clone());
        g.set(Path::new("/t/current_tracer"), "nop").unwrap();
        assert!(g.saved().is_empty());
        assert_eq!(k.file("/t/current_tracer").unwrap(), "nop\n");
    }
}
