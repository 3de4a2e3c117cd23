//! What one worker admits: how many task instances it runs, how much linear memory their
//! limits may claim together, and how many open files the instances that may open files
//! (those with directory grants) may hold together. Work beyond that is refused when a connector is created,
//! reconfigured, validated, resumed or restored, with a message that names the limit and the
//! key to raise, instead of being discovered when instances fail to allocate.
//!
//! Invariant: the claims recorded here are those of every connector whose tasks exist (target
//! RUNNING or PAUSED and admitted); their sums never exceed the limits. A connector's claim is
//! replaced whole (re-split, new config) or released (stop, delete, failure to admit).

use std::collections::BTreeMap;
use std::sync::Mutex;

use crate::config::Problem;
use crate::config_keys::{HANDLES_MAX, MEMORY_MAX_BYTES, TASKS_MAX};
use crate::sandbox::engine::INSTANCE_ADDRESS_SPACE_OVERHEAD;

/// Worker key: the most task instances this worker runs.
pub const TASKS_PER_WORKER: &str = "tasks.max.per.worker";
/// Worker key: the most tasks one connector may ask for (`tasks.max`).
pub const TASKS_PER_CONNECTOR: &str = "tasks.max.per.connector";
/// Worker key: the sum of the memory limits of every task instance.
pub const MEMORY_BUDGET: &str = "sandbox.memory.budget.bytes";
/// Worker key: the sum of the handle limits of every task instance that may open files.
pub const FILES_BUDGET: &str = "sandbox.files.budget";

/// Open files the worker keeps for itself (Kafka connections, REST, state files, the compile
/// cache): a quarter of its open-file limit, and at least this many.
const FILES_RESERVED: u64 = 256;

/// Address-space mappings one plugin instance needs at most while it runs (its linear memory
/// and guard, its async stack and guard, and what the allocator maps for it). The kernel caps
/// mappings per process (`vm.max_map_count`), so this bounds the default task limit.
pub const MAPPINGS_PER_INSTANCE: u64 = 4;
/// Mappings left for everything else in the process (threads, libraries, librdkafka, the
/// connector instances that split work).
const MAPPINGS_RESERVED: u64 = 4096;
/// Memory assumed per task when the default task limit is derived from the machine's RAM: an
/// idle task needs far less, a busy one rarely more.
const MEMORY_PER_TASK_DEFAULT: u64 = 1 << 20;
/// The default memory budget, as a multiple of the machine's RAM: limits are ceilings that
/// instances rarely reach, so the default admits more than the RAM; an operator who wants a
/// hard guarantee sets the budget to the memory plugins may really use.
const MEMORY_BUDGET_RAM_MULTIPLE: u64 = 4;
/// Address space instances may reserve in all: half of x86-64's and aarch64's 47-bit user
/// space, leaving the rest to the process.
const ADDRESS_SPACE_FOR_INSTANCES: u64 = 1 << 46;
/// The default per-connector ceiling (the worker limit when that is lower).
const TASKS_PER_CONNECTOR_DEFAULT: u32 = 1000;

/// The limits, parsed once from the worker config.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct CapacityLimits {
    /// `tasks.max.per.worker`.
    pub tasks_per_worker: u32,
    /// `tasks.max.per.connector`.
    pub tasks_per_connector: u32,
    /// `sandbox.memory.budget.bytes`.
    pub memory_budget: u64,
    /// `sandbox.files.budget`.
    pub files_budget: u64,
}

impl CapacityLimits {
    /// Defaults derived from this machine: tasks bounded by its RAM, by the kernel's cap on
    /// mappings per process and by the address space instances reserve (`memory_reservation`
    /// each, plus guards and a stack); the memory budget a multiple of its RAM.
    pub fn for_this_machine(memory_reservation: u64) -> Self {
        let ram = machine_ram().unwrap_or(8 << 30);
        let map_count = std::fs::read_to_string("/proc/sys/vm/max_map_count")
            .ok()
            .and_then(|s| s.trim().parse::<u64>().ok())
            .unwrap_or(65530);
        let open_files = open_file_limit().unwrap_or(1024);
        Self::derived(ram, map_count, memory_reservation, open_files)
    }

    /// The defaults for a machine with `ram` bytes and a cap of `map_count` mappings, whose
    /// instances reserve `memory_reservation` bytes each for their memory, in a process that
    /// may hold `open_files` descriptors.
    pub fn derived(ram: u64, map_count: u64, memory_reservation: u64, open_files: u64) -> Self {
        let by_mappings = map_count.saturating_sub(MAPPINGS_RESERVED) / MAPPINGS_PER_INSTANCE;
        let by_memory = ram / MEMORY_PER_TASK_DEFAULT;
        let per_instance = memory_reservation.saturating_add(INSTANCE_ADDRESS_SPACE_OVERHEAD);
        let by_address_space = ADDRESS_SPACE_FOR_INSTANCES / per_instance.max(1);
        let tasks = by_mappings
            .min(by_memory)
            .min(by_address_space)
            .clamp(1, u64::from(u32::MAX)) as u32;
        Self {
            tasks_per_worker: tasks,
            tasks_per_connector: tasks.min(TASKS_PER_CONNECTOR_DEFAULT),
            memory_budget: ram.saturating_mul(MEMORY_BUDGET_RAM_MULTIPLE),
            files_budget: open_files.saturating_sub(FILES_RESERVED.max(open_files / 4)),
        }
    }

    /// Problems with a connector's `tasks.max` that no other connector could change: it asks
    /// for more tasks than one connector may have.
    pub fn check_tasks_max(&self, tasks_max: u32) -> Option<Problem> {
        (tasks_max > self.tasks_per_connector).then(|| {
            Problem::new(
                TASKS_MAX,
                format!(
                    "{tasks_max} is more than this worker runs for one connector: {TASKS_PER_CONNECTOR} is {} (and {TASKS_PER_WORKER} is {}); lower {TASKS_MAX}, or raise {TASKS_PER_CONNECTOR} in the worker config",
                    self.tasks_per_connector, self.tasks_per_worker
                ),
            )
        })
    }
}

/// The process's open-file limit (the soft limit, which `raise_open_file_limit` lifts to the
/// hard one at start).
fn open_file_limit() -> Option<u64> {
    let limits = std::fs::read_to_string("/proc/self/limits").ok()?;
    let line = limits.lines().find(|l| l.starts_with("Max open files"))?;
    line.split_whitespace().nth(3)?.parse().ok()
}

/// Lift the process's soft open-file limit to its hard limit, as servers commonly do: the
/// default soft limit (often 1024) would otherwise cap the files plugins may hold together.
pub fn raise_open_file_limit() {
    #[cfg(unix)]
    // SAFETY: getrlimit/setrlimit only read and write the struct passed to them.
    unsafe {
        let mut limit = libc::rlimit {
            rlim_cur: 0,
            rlim_max: 0,
        };
        if libc::getrlimit(libc::RLIMIT_NOFILE, &mut limit) == 0 && limit.rlim_cur < limit.rlim_max
        {
            limit.rlim_cur = limit.rlim_max;
            if libc::setrlimit(libc::RLIMIT_NOFILE, &limit) != 0 {
                tracing::warn!(
                    "cannot raise the open-file limit to {}: {}",
                    limit.rlim_max,
                    std::io::Error::last_os_error()
                );
            }
        }
    }
}

/// The machine's RAM in bytes (`MemTotal`).
fn machine_ram() -> Option<u64> {
    let meminfo = std::fs::read_to_string("/proc/meminfo").ok()?;
    let line = meminfo.lines().find(|l| l.starts_with("MemTotal:"))?;
    let kib: u64 = line.split_whitespace().nth(1)?.parse().ok()?;
    Some(kib * 1024)
}

/// What one connector's tasks claim.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct Claim {
    /// Task instances.
    pub tasks: u32,
    /// Bytes: the sum of their memory limits.
    pub memory: u64,
    /// Open files they may hold: the sum of their handle limits if they may open files (they
    /// have directory grants), else none.
    pub files: u64,
}

impl Claim {
    /// `tasks` instances, each limited to `memory_per_task` bytes.
    pub fn new(tasks: usize, memory_per_task: usize) -> Self {
        let tasks = u32::try_from(tasks).unwrap_or(u32::MAX);
        Self {
            tasks,
            memory: u64::from(tasks).saturating_mul(memory_per_task as u64),
            files: 0,
        }
    }

    /// This claim for tasks that may each hold `files_per_task` open files.
    pub fn with_files(self, files_per_task: usize) -> Self {
        Self {
            files: u64::from(self.tasks).saturating_mul(files_per_task as u64),
            ..self
        }
    }
}

/// The worker's admitted claims.
#[derive(Debug)]
pub struct Capacity {
    limits: CapacityLimits,
    claims: Mutex<BTreeMap<String, Claim>>,
}

impl Capacity {
    /// No claims yet.
    pub fn new(limits: CapacityLimits) -> Self {
        Self {
            limits,
            claims: Mutex::new(BTreeMap::new()),
        }
    }

    /// The limits.
    pub fn limits(&self) -> CapacityLimits {
        self.limits
    }

    /// Tasks and memory claimed by every connector together.
    pub fn used(&self) -> Claim {
        let claims = self.claims.lock().unwrap_or_else(|e| e.into_inner());
        sum(claims.values())
    }

    /// Whether `claim` fits for connector `name` (replacing what it claims now); `Err` says
    /// which limit it would exceed, by how much, and which keys to change.
    pub fn fits(&self, name: &str, claim: Claim) -> Result<(), Problem> {
        let claims = self.claims.lock().unwrap_or_else(|e| e.into_inner());
        self.fits_among(&claims, name, claim)
    }

    fn fits_among(
        &self,
        claims: &BTreeMap<String, Claim>,
        name: &str,
        claim: Claim,
    ) -> Result<(), Problem> {
        let others = sum(claims.iter().filter(|(n, _)| *n != name).map(|(_, c)| c));
        let tasks = u64::from(others.tasks) + u64::from(claim.tasks);
        if tasks > u64::from(self.limits.tasks_per_worker) {
            return Err(Problem::new(
                TASKS_MAX,
                format!(
                    "{} task(s) do not fit in this worker: it runs at most {} ({TASKS_PER_WORKER}) and other connectors have {}; lower {TASKS_MAX}, stop or delete other connectors, or raise {TASKS_PER_WORKER} in the worker config",
                    claim.tasks, self.limits.tasks_per_worker, others.tasks
                ),
            ));
        }
        let memory = others.memory.saturating_add(claim.memory);
        if memory > self.limits.memory_budget {
            return Err(Problem::new(
                MEMORY_MAX_BYTES,
                format!(
                    "{} task(s) with a memory limit of {} each claim {}, and other connectors' tasks claim {}: more than this worker's budget of {} ({MEMORY_BUDGET}); lower {MEMORY_MAX_BYTES} or {TASKS_MAX} for this connector, or raise {MEMORY_BUDGET} in the worker config",
                    claim.tasks,
                    bytes(
                        claim
                            .memory
                            .checked_div(u64::from(claim.tasks))
                            .unwrap_or(0)
                    ),
                    bytes(claim.memory),
                    bytes(others.memory),
                    bytes(self.limits.memory_budget)
                ),
            ));
        }
        let files = others.files.saturating_add(claim.files);
        if claim.files > 0 && files > self.limits.files_budget {
            return Err(Problem::new(
                HANDLES_MAX,
                format!(
                    "{} task(s) that may open files, with {} handles each ({HANDLES_MAX}), claim {} open files, and other connectors' tasks claim {}: more than this worker's budget of {} ({FILES_BUDGET}, from its open-file limit); lower {HANDLES_MAX} or {TASKS_MAX} for this connector, or raise the worker's open-file limit (ulimit -n) or {FILES_BUDGET}",
                    claim.tasks,
                    claim.files.checked_div(u64::from(claim.tasks)).unwrap_or(0),
                    claim.files,
                    others.files,
                    self.limits.files_budget
                ),
            ));
        }
        Ok(())
    }

    /// Record `claim` for `name` if it fits (replacing its current claim); otherwise leave
    /// everything as it was.
    pub fn admit(&self, name: &str, claim: Claim) -> Result<(), Problem> {
        // Checked and recorded under one lock, so two admissions cannot both take the last room.
        let mut claims = self.claims.lock().unwrap_or_else(|e| e.into_inner());
        self.fits_among(&claims, name, claim)?;
        claims.insert(name.to_owned(), claim);
        Ok(())
    }

    /// Forget `name`'s claim.
    pub fn release(&self, name: &str) {
        self.claims
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .remove(name);
    }
}

fn sum<'a>(claims: impl Iterator<Item = &'a Claim>) -> Claim {
    claims.fold(Claim::default(), |a, c| Claim {
        tasks: a.tasks.saturating_add(c.tasks),
        memory: a.memory.saturating_add(c.memory),
        files: a.files.saturating_add(c.files),
    })
}

/// `bytes` for people: whole MiB or GiB where exact, else bytes.
fn bytes(n: u64) -> String {
    const MIB: u64 = 1 << 20;
    const GIB: u64 = 1 << 30;
    if n >= GIB && n.is_multiple_of(GIB) {
        format!("{} GiB", n / GIB)
    } else if n >= MIB && n.is_multiple_of(MIB) {
        format!("{} MiB", n / MIB)
    } else {
        format!("{n} bytes")
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn limits(tasks: u32, per_connector: u32, memory: u64) -> CapacityLimits {
        CapacityLimits {
            tasks_per_worker: tasks,
            tasks_per_connector: per_connector,
            memory_budget: memory,
            files_budget: u64::MAX,
        }
    }

    #[test]
    fn defaults_follow_the_machine() {
        // 24 GiB and the kernel's default cap: the mappings bound the tasks.
        let l = CapacityLimits::derived(24 << 30, 65530, 256 << 20, 20_000);
        assert_eq!(l.tasks_per_worker, (65530 - 4096) / 4);
        assert_eq!(l.tasks_per_connector, 1000);
        assert_eq!(l.memory_budget, 96 << 30);
        // A quarter of the open-file limit is the worker's own.
        assert_eq!(l.files_budget, 15_000);
        // A small machine: its RAM bounds them.
        let l = CapacityLimits::derived(512 << 20, 65530, 256 << 20, 1024);
        assert_eq!(l.tasks_per_worker, 512);
        assert_eq!(l.tasks_per_connector, 512);
        assert_eq!(
            l.files_budget, 768,
            "a quarter of 1024 descriptors is the worker's own"
        );
        // 4 GiB reservations and a raised mapping cap: the address space bounds them.
        let l = CapacityLimits::derived(1 << 40, 1 << 30, 1 << 32, 1 << 20);
        assert_eq!(
            u64::from(l.tasks_per_worker),
            (1 << 46) / ((1u64 << 32) + INSTANCE_ADDRESS_SPACE_OVERHEAD)
        );
    }

    #[test]
    fn tasks_max_over_the_connector_ceiling_names_both_keys() {
        let l = limits(16000, 1000, u64::MAX);
        assert!(l.check_tasks_max(1000).is_none());
        let p = l.check_tasks_max(100_000).unwrap();
        assert_eq!(p.key, TASKS_MAX);
        assert!(
            p.message.contains("100000") && p.message.contains(TASKS_PER_CONNECTOR),
            "{p}"
        );
    }

    #[test]
    fn claims_add_up_to_the_limits_and_a_refusal_changes_nothing() {
        let c = Capacity::new(limits(10, 10, 90 << 20));
        c.admit("a", Claim::new(6, 10 << 20)).unwrap();
        let refused = c.admit("b", Claim::new(5, 1 << 20)).unwrap_err();
        assert!(
            refused.message.contains(TASKS_PER_WORKER)
                && refused.message.contains("other connectors have 6"),
            "{refused}"
        );
        assert_eq!(c.used(), Claim::new(6, 10 << 20));
        // Memory: 6 × 10 MiB claimed, 4 × 10 MiB more is over 90 MiB.
        let refused = c.admit("b", Claim::new(4, 10 << 20)).unwrap_err();
        assert_eq!(refused.key, MEMORY_MAX_BYTES);
        assert!(refused.message.contains(MEMORY_BUDGET), "{refused}");
        c.admit("b", Claim::new(4, 1 << 20)).unwrap();
        // A connector's new claim replaces its old one.
        c.admit("a", Claim::new(5, 10 << 20)).unwrap();
        assert_eq!(c.used().tasks, 9);
        c.release("a");
        assert_eq!(c.used(), Claim::new(4, 1 << 20));
    }

    #[test]
    fn only_tasks_that_may_open_files_claim_them() {
        let c = Capacity::new(CapacityLimits {
            files_budget: 1000,
            ..limits(100, 100, u64::MAX)
        });
        // No directory grant: no files claimed, however many tasks.
        c.admit("plain", Claim::new(50, 1)).unwrap();
        c.admit("files", Claim::new(3, 1).with_files(256)).unwrap();
        let refused = c
            .admit("more", Claim::new(1, 1).with_files(256))
            .unwrap_err();
        assert_eq!(refused.key, HANDLES_MAX);
        assert!(
            refused
                .message
                .contains("claim 256 open files, and other connectors' tasks claim 768")
                && refused.message.contains(FILES_BUDGET),
            "{refused}"
        );
        c.admit("more", Claim::new(1, 1).with_files(232)).unwrap();
    }
}
