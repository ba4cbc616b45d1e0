//! What wakes the latency probe (`measure latency --source`): the kernel's
//! hrtimer (`timer`, clock_nanosleep), the RTC's periodic interrupt (`rtc`,
//! Brosky & Rotolo's realfeel: /dev/rtc0 at 2048 Hz, woken by `read()`), the
//! HPET's (`hpet`, /dev/hpet), or the kernel's own timerlat tracer
//! (`timerlat`: its threads measure, the trace reports the IRQ and thread
//! latency of each wakeup). The pure parts (choice, interval to latency, the
//! RTC's IRQ in /proc/interrupts) are here; the device I/O is in [`Device`].

use serde::{Deserialize, Serialize};
use std::fs::File;
use std::io::{self, Read};
use std::os::fd::AsRawFd;
use std::path::Path;

/// The wakeup source of a latency run.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Source {
    /// An absolute clock_nanosleep on CLOCK_MONOTONIC (an hrtimer).
    #[default]
    Timer,
    /// The RTC's periodic interrupt, read from /dev/rtc0 (realfeel).
    Rtc,
    /// The HPET's periodic interrupt, read from /dev/hpet.
    Hpet,
    /// The kernel's timerlat tracer: a `timerlat/N` kernel thread per CPU
    /// (SCHED_FIFO 95) woken by an hrtimer, its IRQ and thread latency read
    /// from the trace.
    Timerlat,
}

/// What `--source` asked for.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum SourceRequest {
    /// The best source present: always `timer` (see [`select`]).
    Auto,
    /// This source.
    Exactly(Source),
}

/// `--source`'s words: `auto`, then each source's [`Source::word`].
#[cfg(feature = "clap")]
impl clap::ValueEnum for SourceRequest {
    fn value_variants<'a>() -> &'a [Self] {
        &[
            SourceRequest::Auto,
            SourceRequest::Exactly(Source::Timer),
            SourceRequest::Exactly(Source::Rtc),
            SourceRequest::Exactly(Source::Hpet),
            SourceRequest::Exactly(Source::Timerlat),
        ]
    }

    fn to_possible_value(&self) -> Option<clap::builder::PossibleValue> {
        Some(clap::builder::PossibleValue::new(match self {
            SourceRequest::Auto => "auto",
            SourceRequest::Exactly(s) => s.word(),
        }))
    }
}

impl SourceRequest {
    /// The source asked for; `Auto` is the timer, as [`select`] decides.
    pub fn source(self) -> Source {
        match self {
            SourceRequest::Auto => Source::Timer,
            SourceRequest::Exactly(s) => s,
        }
    }
}

/// The RTC device realfeel reads.
pub const RTC_DEVICE: &str = "/dev/rtc0";
/// The HPET character device.
pub const HPET_DEVICE: &str = "/dev/hpet";

impl Source {
    /// The probe's name in every output: "realfeel" only for the RTC.
    pub fn probe_name(self) -> &'static str {
        match self {
            Source::Timer => "timer wakeup (clock_nanosleep)",
            Source::Rtc => "realfeel (RTC periodic interrupt, /dev/rtc0)",
            Source::Hpet => "HPET periodic interrupt (/dev/hpet)",
            Source::Timerlat => "timerlat (the kernel's timerlat threads, IRQ and thread latency)",
        }
    }

    /// The word `--source` takes.
    pub fn word(self) -> &'static str {
        match self {
            Source::Timer => "timer",
            Source::Rtc => "rtc",
            Source::Hpet => "hpet",
            Source::Timerlat => "timerlat",
        }
    }

    /// The device a device source reads (None for the timer).
    pub fn device(self) -> Option<&'static str> {
        match self {
            Source::Timer | Source::Timerlat => None,
            Source::Rtc => Some(RTC_DEVICE),
            Source::Hpet => Some(HPET_DEVICE),
        }
    }
}

/// Picks the source, given which devices exist and how many CPUs are measured.
/// `timerlat` needs no device (whether the kernel has the tracer is asked
/// when its trace starts: `cpushield_trace::timerlat::available`).
///
/// `auto` is the timer: it is the one source present on every machine (VMs
/// often have no /dev/hpet, containers no /dev/rtc0), and the rtc and hpet
/// sources measure a device's interrupt path, a different experiment, which
/// is chosen on purpose. A device source measures one CPU (there is one
/// device) at a rate the device can make: a power of two from 2 to 8192 Hz.
pub fn select(
    request: SourceRequest,
    device_present: impl Fn(&str) -> bool,
    cpus: usize,
    rate_hz: Option<u32>,
) -> Result<Source, String> {
    let source = match request {
        SourceRequest::Auto | SourceRequest::Exactly(Source::Timer) => return Ok(Source::Timer),
        SourceRequest::Exactly(Source::Timerlat) => return Ok(Source::Timerlat),
        SourceRequest::Exactly(s) => s,
    };
    let device = source.device().unwrap_or_default();
    let word = source.word();
    if !device_present(device) {
        let driver = match source {
            Source::Rtc => "load the RTC driver (modprobe rtc_cmos)",
            _ => "enable the HPET driver (CONFIG_HPET, hpet=force)",
        };
        return Err(format!(
            "--source {word}: {device} is absent on this machine: {driver}, or use --source timer"
        ));
    }
    if cpus != 1 {
        return Err(format!(
            "--source {word} measures one CPU ({device} is one device): give --cpus with one CPU, or use --source timer"
        ));
    }
    match rate_hz {
        Some(hz) if (2..=8192).contains(&hz) && hz.is_power_of_two() => Ok(source),
        Some(hz) => Err(format!(
            "--source {word} at --rate {hz}: the device's periodic interrupt runs at a power of two from 2 to 8192 Hz: use e.g. --rate 2048"
        )),
        None => Err(format!(
            "--source {word} takes --rate (a power of two, e.g. 2048), not --interval"
        )),
    }
}

/// One device wakeup turned into a sample: `interval_ns` since the previous
/// wakeup covered `interrupts` interrupts (the count the read returned), due
/// `period_ns` apart. Returns the latency (the interval beyond the periods it
/// covered; 0 when shorter, i.e. the previous wakeup was the late one) and the
/// interrupts missed (all but the last).
pub fn interval_latency(interval_ns: u64, period_ns: u64, interrupts: u64) -> (u64, u64) {
    let n = interrupts.max(1);
    (
        interval_ns.saturating_sub(period_ns.saturating_mul(n)),
        n - 1,
    )
}

/// The interrupt count in the value a read of /dev/rtc returns: the high
/// bytes (the low byte holds the RTC_PF/RTC_AF/RTC_UF flags).
pub fn rtc_count(value: u64) -> u64 {
    value >> 8
}

/// The IRQ whose handler is named `rtc0` in /proc/interrupts text.
pub fn rtc_irq(interrupts: &str) -> Option<u32> {
    cpushield_parse::interrupts::parse_interrupts(interrupts)
        .ok()?
        .into_iter()
        .filter(|l| l.name().split_whitespace().any(|w| w == "rtc0"))
        .find_map(|l| l.number())
}

/// The device requests, from <linux/rtc.h> and <linux/hpet.h>.
mod ioctl {
    // The rate is passed as a C int by value: on x86-64 and aarch64 the
    // 32-bit write zero-extends into the register the kernel reads as an
    // unsigned long, so a positive rate arrives intact.
    // RTC_IRQP_SET is _IOW('p', 0x0c, unsigned long) in <linux/rtc.h>: its size
    // field is sizeof(unsigned long), not the int `ioctl_write_int!` encodes, so
    // the request is built with `request_code_write!` and passed by value.
    nix::ioctl_write_int_bad!(
        rtc_irqp_set,
        nix::request_code_write!(b'p', 0x0c, std::mem::size_of::<libc::c_ulong>())
    );
    // RTC_PIE_ON / RTC_PIE_OFF: _IO('p', 0x05) / _IO('p', 0x06).
    nix::ioctl_none!(rtc_pie_on, b'p', 0x05);
    nix::ioctl_none!(rtc_pie_off, b'p', 0x06);
    // HPET_IE_ON / HPET_IE_OFF: _IO('h', 0x01) / _IO('h', 0x02) in <linux/hpet.h>.
    nix::ioctl_none!(hpet_ie_on, b'h', 0x01);
    nix::ioctl_none!(hpet_ie_off, b'h', 0x02);
    // HPET_IRQFREQ is _IOW('h', 0x6, unsigned long): as RTC_IRQP_SET.
    nix::ioctl_write_int_bad!(
        hpet_irqfreq,
        nix::request_code_write!(b'h', 0x06, std::mem::size_of::<libc::c_ulong>())
    );
}
use ioctl::*;

/// An open device with its periodic interrupt on; turned off and closed on drop.
#[derive(Debug)]
pub struct Device {
    file: File,
    source: Source,
}

impl Device {
    /// Opens `source`'s device and starts its periodic interrupt at `hz`.
    pub fn open(source: Source, hz: u32) -> io::Result<Self> {
        let path = source
            .device()
            .ok_or_else(|| io::Error::other("the timer source has no device"))?;
        let file = File::open(Path::new(path))
            .map_err(|e| io::Error::new(e.kind(), format!("{path}: {e}")))?;
        let fd = file.as_raw_fd();
        let on = || -> nix::Result<()> {
            // SAFETY: `fd` is an open descriptor of the device these requests
            // belong to; the rate is passed by value, no memory is shared.
            unsafe {
                match source {
                    Source::Rtc => {
                        rtc_irqp_set(fd, hz as libc::c_int)?;
                        rtc_pie_on(fd)?;
                    }
                    _ => {
                        hpet_irqfreq(fd, hz as libc::c_int)?;
                        hpet_ie_on(fd)?;
                    }
                }
            }
            Ok(())
        };
        on().map_err(|e| {
            io::Error::from_raw_os_error(e as i32)
        })
        .map_err(|e| {
            let remedy = match source {
                Source::Rtc => "run as root (rates above /proc/sys/dev/rtc/max-user-freq need CAP_SYS_RESOURCE), or use --source timer",
                // EIO: no HPET timer with a free interrupt line (the kernel keeps them for its clock events).
                _ => "run as root (rates above /proc/sys/dev/hpet/max-user-freq need CAP_SYS_RESOURCE); EIO means no HPET timer has a free interrupt: use --source rtc or --source timer",
            };
            io::Error::new(e.kind(), format!("{path}: starting the periodic interrupt at {hz} Hz: {e}: {remedy}"))
        })?;
        Ok(Self { file, source })
    }

    /// Blocks until the next interrupt; returns how many came since the last read.
    pub fn wait(&self) -> io::Result<u64> {
        let mut buf = [0u8; std::mem::size_of::<libc::c_ulong>()];
        (&self.file).read_exact(&mut buf)?;
        // c_ulong is u32 on 32-bit targets, u64 here.
        #[allow(clippy::useless_conversion)]
        let value = u64::from(libc::c_ulong::from_ne_bytes(buf));
        Ok(match self.source {
            Source::Rtc => rtc_count(value),
            _ => value,
        })
    }
}

impl Drop for Device {
    fn drop(&mut self) {
        let fd = self.file.as_raw_fd();
        // SAFETY: `fd` is still open (the file closes after this); the
        // requests take no argument.
        let _ = unsafe {
            match self.source {
                Source::Rtc => rtc_pie_off(fd),
                _ => hpet_ie_off(fd),
            }
        };
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn present(_: &str) -> bool {
        true
    }
    fn absent(_: &str) -> bool {
        false
    }

    #[test]
    fn auto_picks_the_timer_whatever_devices_exist() {
        assert_eq!(
            select(SourceRequest::Auto, present, 2, Some(2048)),
            Ok(Source::Timer)
        );
        assert_eq!(
            select(SourceRequest::Auto, absent, 1, None),
            Ok(Source::Timer)
        );
    }

    #[test]
    fn a_device_source_needs_its_device_and_names_it_when_absent() {
        let e = select(SourceRequest::Exactly(Source::Rtc), absent, 1, Some(2048)).unwrap_err();
        assert!(
            e.contains("/dev/rtc0 is absent") && e.contains("--source timer"),
            "{e}"
        );
        let e = select(SourceRequest::Exactly(Source::Hpet), absent, 1, Some(2048)).unwrap_err();
        assert!(e.contains("--source hpet: /dev/hpet is absent"), "{e}");
        assert_eq!(
            select(SourceRequest::Exactly(Source::Rtc), present, 1, Some(2048)),
            Ok(Source::Rtc)
        );
    }

    #[test]
    fn rtc_refuses_more_than_one_cpu_and_rates_it_cannot_make() {
        let e = select(SourceRequest::Exactly(Source::Rtc), present, 2, Some(2048)).unwrap_err();
        assert!(e.contains("one CPU"), "{e}");
        let e = select(SourceRequest::Exactly(Source::Rtc), present, 1, Some(1000)).unwrap_err();
        assert!(e.contains("power of two"), "{e}");
        assert!(select(SourceRequest::Exactly(Source::Rtc), present, 1, None).is_err());
    }

    #[test]
    fn an_interval_beyond_the_period_is_the_latency_and_extra_interrupts_are_missed() {
        assert_eq!(interval_latency(488_281 + 7_000, 488_281, 1), (7_000, 0));
        // the previous wakeup was late, this one is early: no negative latency
        assert_eq!(interval_latency(480_000, 488_281, 1), (0, 0));
        // two interrupts since the last read: one missed
        assert_eq!(interval_latency(2 * 488_281 + 50, 488_281, 2), (50, 1));
        // a count of 0 is read as one interrupt
        assert_eq!(interval_latency(488_300, 488_281, 0), (19, 0));
    }

    #[test]
    fn the_rtc_count_is_the_value_without_its_flag_byte() {
        assert_eq!(rtc_count((3 << 8) | 0x40), 3);
    }

    #[test]
    fn the_rtc_irq_is_found_by_its_handler_name() {
        let text = "           CPU0       CPU1\n  4:        120          0   IO-APIC   4-edge      ttyS0\n  8:       2048          5   IO-APIC   8-edge      rtc0\n LOC:  1 2  Local timer interrupts\n";
        assert_eq!(rtc_irq(text), Some(8));
        assert_eq!(
            rtc_irq("           CPU0\n  4:  1  IO-APIC 4-edge ttyS0\n"),
            None
        );
    }

    #[test]
    fn timerlat_needs_no_device_and_measures_any_number_of_cpus() {
        assert_eq!(
            select(SourceRequest::Exactly(Source::Timerlat), absent, 3, None),
            Ok(Source::Timerlat)
        );
        assert_eq!(Source::Timerlat.device(), None);
    }

    #[test]
    fn every_source_has_its_own_name_and_only_rtc_is_realfeel() {
        assert_eq!(Source::Timer.probe_name(), "timer wakeup (clock_nanosleep)");
        assert!(Source::Rtc.probe_name().starts_with("realfeel"));
        assert!(!Source::Hpet.probe_name().contains("realfeel"));
    }
}
