//! `cpushield agent`: a long-running loop that keeps the shield true and
//! serves what reaches the shielded CPUs as Prometheus metrics.
//!
//! Every interval it reads the saved shield (the state `shield` and `apply`
//! keep), the IRQ masks, and check's counters of the shielded CPUs. An IRQ
//! whose mask moved onto a shielded CPU (irqbalance, a new device) is drift:
//! the agent re-applies the shield through `cpushield_shield::shield_in`, the
//! same code path, state and journal as `cpushield shield`, so `reset` stays
//! exact, and logs one line per IRQ with the cause. The same holds for a CPU
//! that comes online and for a task outside the shield whose affinity was
//! widened onto a shielded CPU (the re-applied shield keeps the widened mask
//! as the task's request, Brosky's rule, and sets it back to housekeeping).

pub mod access;
pub mod drift;
pub mod metrics;
pub mod sample;
pub mod server;
pub mod socket;
pub mod status;

use cpushield_kernel::Kernel;
use cpushield_shield::state::{self, StateStore};
use cpushield_shield::{snapshot, Options, ShieldMasks};
use std::io;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

/// What to do with the shield when the agent stops.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum OnStop {
    /// Leave the shield up.
    Keep,
    /// Reset it (exactly, as `cpushield reset`).
    Reset,
}

/// The agent's settings.
#[derive(Debug, Clone)]
pub struct Settings {
    /// How often it looks.
    pub interval: Duration,
    /// One look, then stop (no server).
    pub once: bool,
    /// What to do with the shield on SIGTERM / SIGINT.
    pub on_stop: OnStop,
    /// Shield options (root).
    pub options: Options,
}

/// The state shared between the loop and the HTTP server.
pub struct Shared {
    /// The metrics.
    pub metrics: Mutex<metrics::Metrics>,
    /// The `/status` conditions.
    pub conditions: Mutex<status::Conditions>,
}

impl Shared {
    /// Fresh metrics and no conditions yet.
    pub fn new(version: &str) -> Arc<Self> {
        Arc::new(Self {
            metrics: Mutex::new(metrics::Metrics::new(version, cpushield_kernel::user_hz())),
            conditions: Mutex::new(status::Conditions::default()),
        })
    }
}

/// The agent's loop state.
pub struct Agent<'a> {
    kernel: &'a dyn Kernel,
    store: &'a dyn StateStore,
    watch: drift::Watch,
    tasks: drift::TaskWatch,
    online: drift::OnlineWatch,
    shared: Arc<Shared>,
    options: Options,
}

fn lock<T>(m: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|e| e.into_inner())
}

impl<'a> Agent<'a> {
    /// An agent over `kernel` with the shield's state in `store`.
    pub fn new(
        kernel: &'a dyn Kernel,
        store: &'a dyn StateStore,
        shared: Arc<Shared>,
        options: Options,
    ) -> Self {
        Self {
            kernel,
            store,
            watch: drift::Watch::new(),
            tasks: drift::TaskWatch::new(),
            online: drift::OnlineWatch::default(),
            shared,
            options,
        }
    }

    /// One look: correct drift, update metrics and conditions. Returns the
    /// log lines (one per correction, and one per failure).
    pub fn tick(&mut self) -> io::Result<Vec<String>> {
        let mut log = Vec::new();
        let loaded = state::load_from(self.store)?.map(|l| l.state);
        let masks = loaded.as_ref().map(|s| s.masks.clone()).unwrap_or_default();
        let online = cpushield_kernel::online_cpus(self.kernel)?;
        let came_online = self.online.observe(&online);
        let shielded_irqs = masks.irqs.intersection(&online);
        let shielded_procs = masks.procs.intersection(&online);
        let irqs = snapshot::read_irqs(self.kernel);
        let drifts = self.watch.observe(&irqs, &shielded_irqs);
        let tasks = match &loaded {
            Some(s) if !shielded_procs.is_empty() => snapshot::read_tasks(self.kernel, &s.layout)
                .unwrap_or_else(|e| {
                    log.push(format!("reading the tasks failed: {e}"));
                    Vec::new()
                }),
            _ => Vec::new(),
        };
        let task_drifts = self.tasks.observe(&tasks, &shielded_procs);
        let now = status::now();
        let mut corrected = None;
        let drifted = !drifts.is_empty() || !task_drifts.is_empty() || !came_online.is_empty();
        if drifted && !masks.is_empty() {
            let result = cpushield_shield::shield_in(self.kernel, self.store, &masks, self.options);
            let after = snapshot::read_irqs(self.kernel);
            let outcome = |what: String| match &result {
                Ok(_) => format!("re-applied the shield, {what}"),
                Err(e) => format!("re-applying the shield failed: {e}"),
            };
            if !came_online.is_empty() {
                let cause = drift::Cause::CpuOnline;
                log.push(format!(
                    "correction: CPU {} came online: {} [cause {}]; {}",
                    came_online.to_list(),
                    cause.describe(),
                    cause.label(),
                    outcome(format!("online CPUs now {}", online.to_list()))
                ));
                lock(&self.shared.metrics).correction(cause.label());
                corrected.get_or_insert(cause.label());
            }
            for d in &drifts {
                let now_text = after
                    .iter()
                    .find(|i| i.irq == d.irq)
                    .map(|i| i.mask_text.clone())
                    .unwrap_or_default();
                if result.is_ok() && now_text == d.mask_text {
                    // The shield wrote nothing new: the kernel keeps this IRQ
                    // where it is (kernel-managed). Not a correction.
                    log.push(format!(
                        "IRQ {} ({}) stays on shielded CPU {}: either its owner asked for shielded CPUs only (Brosky's rule keeps such a request) or the kernel keeps it there (kernel-managed; fix at boot: isolcpus=managed_irq,{})",
                        d.irq,
                        if d.name.is_empty() { "?" } else { &d.name },
                        d.on.to_list(),
                        d.on.to_list()
                    ));
                    continue;
                }
                log.push(format!(
                    "correction: IRQ {} ({}) mask {} reached shielded CPU {}: {} [cause {}]; {}",
                    d.irq,
                    if d.name.is_empty() { "?" } else { &d.name },
                    d.mask_text,
                    d.on.to_list(),
                    d.cause.describe(),
                    d.cause.label(),
                    outcome(format!("mask now {now_text}"))
                ));
                lock(&self.shared.metrics).correction(d.cause.label());
                corrected.get_or_insert(d.cause.label());
            }
            // What the shield wrote (or could not change) is the new baseline.
            self.watch.remember(&after);
            if !task_drifts.is_empty() {
                let layout = loaded.as_ref().map(|s| s.layout.clone());
                let tasks_after = layout
                    .and_then(|l| snapshot::read_tasks(self.kernel, &l).ok())
                    .unwrap_or_default();
                for d in &task_drifts {
                    let now_aff = tasks_after
                        .iter()
                        .find(|t| t.tid == d.tid)
                        .map(|t| t.affinity.clone());
                    let Some(now_aff) = now_aff else { continue };
                    if result.is_ok() && now_aff == d.affinity {
                        log.push(format!(
                            "task {} ({}) stays on shielded CPU {}: the shield cannot move it (it asked for shielded CPUs only, or the kernel keeps it there)",
                            d.tid,
                            d.comm,
                            d.on.to_list()
                        ));
                        continue;
                    }
                    log.push(format!(
                        "correction: task {} ({}) affinity {} reached shielded CPU {}: {} [cause {}]; {}",
                        d.tid,
                        d.comm,
                        d.affinity.to_list(),
                        d.on.to_list(),
                        d.cause.describe(),
                        d.cause.label(),
                        outcome(format!(
                            "affinity now {} (the widened mask is kept as its request, Brosky's rule)",
                            now_aff.to_list()
                        ))
                    ));
                    lock(&self.shared.metrics).correction(d.cause.label());
                    corrected.get_or_insert(d.cause.label());
                }
                self.tasks.remember(&tasks_after);
            }
        }
        let sample = sample::read(self.kernel, &masks.any().intersection(&online));
        {
            let mut m = lock(&self.shared.metrics);
            m.set_shield(&masks);
            match sample {
                Ok(s) => m.update(s),
                Err(e) => log.push(format!("reading the counters failed: {e}")),
            }
        }
        let mut c = lock(&self.shared.conditions);
        c.set(
            "ShieldUp",
            !masks.is_empty(),
            if masks.is_empty() {
                "NoShield"
            } else {
                "Shielded"
            },
            describe(&masks),
            &now,
        );
        c.set(
            "Corrected",
            corrected.is_some(),
            if corrected.is_some() {
                "DriftCorrected"
            } else {
                "NoDrift"
            },
            match corrected {
                Some(cause) => {
                    format!("the last look found drift ({cause}) and re-applied the shield")
                }
                None => "the last look found every IRQ off the shielded CPUs or unchanged".into(),
            },
            &now,
        );
        Ok(log)
    }
}

fn describe(masks: &ShieldMasks) -> String {
    if masks.is_empty() {
        return "no shield is in force".into();
    }
    format!(
        "shielded CPUs: procs {:?}, irqs {:?}, ltmr {:?}",
        masks.procs.to_list(),
        masks.irqs.to_list(),
        masks.ltmr.to_list()
    )
}

/// Installs SIGINT and SIGTERM handlers that ask the loop to stop; a second
/// signal is caught too, so the loop still leaves or resets the shield.
pub fn stop_on_signals() -> io::Result<&'static AtomicBool> {
    cpushield_kernel::signal::stop_on_signals(cpushield_kernel::signal::SecondSignal::Caught)
}

/// Runs the loop until `stop` is set (or once), printing each log line, then
/// leaves or resets the shield as `settings.on_stop` says.
pub fn run(
    kernel: &dyn Kernel,
    store: &dyn StateStore,
    shared: Arc<Shared>,
    settings: &Settings,
    stop: &AtomicBool,
) -> io::Result<()> {
    let mut agent = Agent::new(kernel, store, shared, settings.options);
    loop {
        match agent.tick() {
            Ok(lines) => {
                for line in lines {
                    println!("cpushield agent: {line}");
                }
            }
            // One failed look (a state being rewritten, a vanished file) does
            // not end the daemon; `--once` reports it as an error.
            Err(e) if !settings.once => println!("cpushield agent: look failed: {e}"),
            Err(e) => return Err(e),
        }
        if settings.once {
            break;
        }
        let next = Instant::now() + settings.interval;
        while Instant::now() < next && !stop.load(Ordering::SeqCst) {
            std::thread::sleep(Duration::from_millis(50).min(settings.interval));
        }
        if stop.load(Ordering::SeqCst) {
            break;
        }
    }
    if !settings.once && settings.on_stop == OnStop::Reset {
        cpushield_shield::reset_in(kernel, store, settings.options).map_err(io::Error::other)?;
        println!("cpushield agent: stopped; shield reset (on_stop = \"reset\")");
    } else if !settings.once {
        println!("cpushield agent: stopped; shield left up (on_stop = \"keep\")");
    }
    Ok(())
}

#[cfg(test)]
mod tests;
