//! What one worker admits: how many task instances it runs, how much linear memory their
//! limits may claim together, and how many open files the instances that may open files
//! (those with directory grants) may hold together. Work beyond that is refused when a connector is created,
//! reconfigured, validated, resumed or restored, with a message that names the limit and the
//! key to raise, instead of being discovered when instances fail to allocate.
//!
//! Invariant: the claims recorded here are those of every connector whose tasks exist (target
//! RUNNING or PAUSED and admitted); their sums never exceed the limits. A connector's claim is
//! replaced whole (re-split, new config) or released (stop, delete, failure to admit); a change
//! whose store write failed restores the claim it replaced, which may briefly exceed a limit
//! (see [`Capacity::restore`]).

use std::collections::BTreeMap;
use std::sync::Mutex;

use crate::config::Problem;
use crate::config_keys::{HANDLES_MAX, MEMORY_MAX_BYTES, TASKS_MAX};

// The limits are settings, read with the worker config; they live below it (`config/`), and
// this module, which admits work against them, re-exports them where callers always found them.
pub use crate::config::capacity::{
    CapacityLimits, FILES_BUDGET, MAPPINGS_PER_INSTANCE, MEMORY_BUDGET, TASKS_PER_CONNECTOR,
    TASKS_PER_WORKER,
};

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

    /// What `name` claims now, if anything: what to [`restore`](Self::restore) when a change
    /// that claimed anew is not carried out.
    pub fn claim_of(&self, name: &str) -> Option<Claim> {
        self.claims
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .get(name)
            .copied()
    }

    /// Put back `claim` (from [`claim_of`](Self::claim_of)) as `name`'s claim, or none. Not
    /// checked: it is what runs, so the books must say so even if another connector took room
    /// a smaller claim left meanwhile (the sums then exceed the limits until one of them stops).
    pub fn restore(&self, name: &str, claim: Option<Claim>) {
        let mut claims = self.claims.lock().unwrap_or_else(|e| e.into_inner());
        match claim {
            Some(claim) => claims.insert(name.to_owned(), claim),
            None => claims.remove(name),
        };
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
    use crate::config::capacity::tests::limits;

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
