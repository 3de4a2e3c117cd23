//! The limits of what one worker admits (`herder/capacity.rs` does the admitting): how many task
//! instances it runs, how much linear memory their limits may claim together, and how many open
//! files the instances that may open files may hold together. Read with the worker config; the
//! defaults are derived from this machine (RAM, `vm.max_map_count`, address space, open-file
//! limit).

use super::connector::Problem;
use crate::config_keys::TASKS_MAX;
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

/// The machine's RAM in bytes (`MemTotal`).
fn machine_ram() -> Option<u64> {
    let meminfo = std::fs::read_to_string("/proc/meminfo").ok()?;
    let line = meminfo.lines().find(|l| l.starts_with("MemTotal:"))?;
    let kib: u64 = line.split_whitespace().nth(1)?.parse().ok()?;
    Some(kib * 1024)
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;

    /// Limits of `tasks` per worker, `per_connector` per connector and `memory` bytes, files
    /// unbounded (the admission tests of `herder/capacity.rs` use it too).
    pub(crate) fn limits(tasks: u32, per_connector: u32, memory: u64) -> CapacityLimits {
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
}
