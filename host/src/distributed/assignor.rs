//! The leader's incremental cooperative assignment (KIP-415, Kafka Connect's
//! `IncrementalCooperativeAssignor`), as a pure function of what the members run, what is
//! configured, and what the leader remembers from its earlier rounds.
//!
//! Guarantees, each a test below:
//! - Nothing runs twice: work is taken from a member (revoked) in one round and given to
//!   another only in a later round, after the member has stopped it and rejoined; work held by
//!   two members at once is revoked from all but one.
//! - Work no member holds any more (its member left) waits `scheduled.rebalance.max.delay.ms`
//!   for that member to come back, then goes to the members that were empty while it waited
//!   (a restarted worker gets its own work back), else to the least loaded.
//! - Balance: each member's connector count and task count end within one of every other's;
//!   work only moves for that reason, and what does not move keeps running.
//! - Revoking rounds in a row back off (40 ms, 1.6 s, 64 s, up to the max delay), so members
//!   that keep joining and leaving cannot make the group rebalance in a tight loop.
//!
//! The only state is [`Assignor`]'s, which lives on the leader; a new leader starts afresh from
//! what the members report they run.

use std::collections::{BTreeMap, BTreeSet};
use std::time::Duration;

use super::protocol::Work;
use crate::storage::ConnectorTaskId;

/// What one round is computed from.
#[derive(Debug, Clone)]
pub struct Round<'a> {
    /// Every member of this generation, by member id, with everything it runs now.
    pub members: &'a BTreeMap<String, Work>,
    /// Every connector whose task configs are complete, with its task count.
    pub configured: &'a BTreeMap<String, u32>,
    /// The generation this leader last completed (synced) as a member, if any.
    pub last_completed_generation: Option<i32>,
    /// This round's generation.
    pub generation: i32,
    /// Now, in milliseconds on a monotonic clock.
    pub now_ms: u64,
}

/// What each member is told.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Plan {
    /// What each member starts (only what it does not run yet).
    pub assigned: BTreeMap<String, Work>,
    /// What each member stops (it moves in a later round).
    pub revoked: BTreeMap<String, Work>,
    /// When non-zero, every member rejoins after this long.
    pub delay: Duration,
}

/// The leader's memory across rounds.
#[derive(Debug, Clone)]
pub struct Assignor {
    max_delay: Duration,
    /// Everything assigned after the last round, plus lost work still waiting for its member.
    previous: Work,
    /// What the last round revoked.
    previous_revocation: Work,
    revoked_in_previous: bool,
    /// Members that were empty while lost work waited: where it goes when the delay is over.
    candidates: BTreeSet<String>,
    /// When the lost work stops waiting (ms), if it is waiting.
    scheduled_ms: Option<u64>,
    /// The generation of the last round, and its members.
    previous_generation: Option<i32>,
    previous_members: BTreeSet<String>,
    /// Revoking rounds in a row.
    successive_revoking: u32,
}

impl Assignor {
    /// A leader's assignor; lost work waits at most `max_delay`
    /// (`scheduled.rebalance.max.delay.ms`).
    pub fn new(max_delay: Duration) -> Self {
        Self {
            max_delay,
            previous: Work::default(),
            previous_revocation: Work::default(),
            revoked_in_previous: false,
            candidates: BTreeSet::new(),
            scheduled_ms: None,
            previous_generation: None,
            previous_members: BTreeSet::new(),
            successive_revoking: 0,
        }
    }

    /// Compute one round's assignment.
    pub fn assign(&mut self, round: &Round<'_>) -> Plan {
        let now = round.now_ms;
        // A leader whose last round was not completed (it failed to sync, or leadership moved
        // and back) cannot trust its memory.
        if self.previous_generation != round.last_completed_generation {
            self.previous = Work::default();
        }
        let configured = configured_work(round.configured);
        let mut active = Work::default();
        for work in round.members.values() {
            active.add(work);
        }
        // A revocation that did not take effect: work from what is actually held.
        if !self.previous_revocation.is_empty() && overlaps(&self.previous_revocation, &active) {
            self.previous = active.clone();
        }
        self.previous_revocation = Work::default();

        let mut gone = self.previous.clone();
        gone.add(&active);
        gone.remove(&configured);
        let duplicated = duplicates(round.members);
        let mut lost = self.previous.clone();
        lost.remove(&active);
        lost.remove(&gone);
        let mut created = configured.clone();
        created.remove(&self.previous);
        created.remove(&active);

        // Deleted work is revoked from whoever runs it; duplicated work from all but the first
        // holder (by member id), which keeps running it.
        let mut revoked: BTreeMap<String, Work> = BTreeMap::new();
        let mut next: BTreeMap<String, Work> = BTreeMap::new();
        let mut kept = Work::default();
        for (member, work) in round.members {
            let mut take = intersection(work, &gone);
            for connector in &work.connectors {
                if duplicated.connectors.contains(connector)
                    && !kept.connectors.insert(connector.clone())
                {
                    take.connectors.insert(connector.clone());
                }
            }
            for task in &work.tasks {
                if duplicated.tasks.contains(task) && !kept.tasks.insert(task.clone()) {
                    take.tasks.insert(task.clone());
                }
            }
            let mut keep = work.clone();
            keep.remove(&take);
            next.insert(member.clone(), keep);
            revoked.insert(member.clone(), take);
        }

        let mut delay = Duration::ZERO;
        let mut to_assign = created;
        if lost.is_empty() && !self.revoked_in_previous {
            self.reset_delay();
        } else if self.scheduled_ms.is_none()
            && self
                .previous_members
                .iter()
                .all(|m| round.members.contains_key(m))
        {
            // No member left: nothing to wait for.
            to_assign.add(&lost);
        } else if self.max_delay.is_zero() {
            to_assign.add(&lost);
        } else if self.scheduled_ms.is_some_and(|at| now >= at) {
            // The wait is over: the lost work goes to the members that were empty meanwhile
            // (a restarted worker among them), else to whoever has least.
            let candidates: Vec<&String> = self
                .candidates
                .iter()
                .filter(|c| round.members.contains_key(*c))
                .collect();
            if candidates.is_empty() {
                to_assign.add(&lost);
            } else {
                for (i, connector) in lost.connectors.iter().enumerate() {
                    let member = candidates[i % candidates.len()];
                    if let Some(work) = next.get_mut(member) {
                        work.connectors.insert(connector.clone());
                    }
                }
                for (i, task) in lost.tasks.iter().enumerate() {
                    let member = candidates[i % candidates.len()];
                    if let Some(work) = next.get_mut(member) {
                        work.tasks.insert(task.clone());
                    }
                }
            }
            self.reset_delay();
            self.revoked_in_previous = false;
        } else {
            // Lost work waits (its member may come back); members empty now are where it
            // goes if it does not.
            for (member, work) in &next {
                if work.is_empty() {
                    self.candidates.insert(member.clone());
                }
            }
            let wait = match self.scheduled_ms {
                Some(at) if now < at => Duration::from_millis(at - now).min(self.max_delay),
                _ => self.max_delay,
            };
            delay = wait;
            self.scheduled_ms = Some(now + millis(wait));
        }

        if delay.is_zero() {
            let balance = balancing_revocations(round.configured, &next);
            let any = balance.values().any(|w| !w.is_empty());
            if self.revoked_in_previous && any {
                // Revoking again right after revoking: back off before moving more.
                self.successive_revoking += 1;
                delay = self.backoff(self.successive_revoking);
                if delay.is_zero() {
                    apply_revocations(&balance, &mut next, &mut revoked);
                } else {
                    self.scheduled_ms = Some(now + millis(delay));
                }
            } else if any {
                apply_revocations(&balance, &mut next, &mut revoked);
                self.revoked_in_previous = true;
            } else if self.revoked_in_previous {
                self.revoked_in_previous = false;
                self.successive_revoking = 0;
            }
        } else {
            self.revoked_in_previous = false;
        }

        fill_connectors(&mut next, &to_assign.connectors);
        fill_tasks(&mut next, &to_assign.tasks);

        let mut plan = Plan {
            delay,
            ..Plan::default()
        };
        let mut previous = Work::default();
        for (member, work) in &next {
            previous.add(work);
            let mut new = work.clone();
            if let Some(running) = round.members.get(member) {
                new.remove(running);
            }
            plan.assigned.insert(member.clone(), new);
        }
        for (member, work) in revoked {
            self.previous_revocation.add(&work);
            plan.revoked.insert(member, work);
        }
        // Lost work not given out this round stays "previous", so it stays lost (not new)
        // while it waits.
        let mut still_lost = lost;
        still_lost.remove(&previous);
        previous.add(&still_lost);
        self.previous = previous;
        self.previous_generation = Some(round.generation);
        self.previous_members = round.members.keys().cloned().collect();
        plan
    }

    fn reset_delay(&mut self) {
        self.candidates.clear();
        self.scheduled_ms = None;
    }

    /// The wait before the `n`th revoking round in a row: 40 ms, 1.6 s, 64 s, … up to the max
    /// delay (none when the max delay is zero).
    fn backoff(&self, n: u32) -> Duration {
        if self.max_delay.is_zero() {
            return Duration::ZERO;
        }
        let ms = 40u64.saturating_pow(n.min(10));
        Duration::from_millis(ms).min(self.max_delay)
    }
}

fn millis(d: Duration) -> u64 {
    u64::try_from(d.as_millis()).unwrap_or(u64::MAX)
}

/// Every configured connector and its tasks `0..count`.
fn configured_work(configured: &BTreeMap<String, u32>) -> Work {
    let mut work = Work::default();
    for (connector, count) in configured {
        work.connectors.insert(connector.clone());
        for task in 0..*count {
            work.tasks.insert(ConnectorTaskId::new(connector, task));
        }
    }
    work
}

fn intersection(a: &Work, b: &Work) -> Work {
    Work {
        connectors: a.connectors.intersection(&b.connectors).cloned().collect(),
        tasks: a.tasks.intersection(&b.tasks).cloned().collect(),
    }
}

fn overlaps(a: &Work, b: &Work) -> bool {
    a.connectors.iter().any(|c| b.connectors.contains(c))
        || a.tasks.iter().any(|t| b.tasks.contains(t))
}

/// Work that more than one member holds.
fn duplicates(members: &BTreeMap<String, Work>) -> Work {
    let mut seen = Work::default();
    let mut twice = Work::default();
    for work in members.values() {
        for connector in &work.connectors {
            if !seen.connectors.insert(connector.clone()) {
                twice.connectors.insert(connector.clone());
            }
        }
        for task in &work.tasks {
            if !seen.tasks.insert(task.clone()) {
                twice.tasks.insert(task.clone());
            }
        }
    }
    twice
}

/// What to take from members above their fair share so that, once it is given out again,
/// every member's connector count and task count are within one of each other's: with `n`
/// items over `m` members, `n % m` members may keep `n / m + 1`, the others `n / m`.
fn balancing_revocations(
    configured: &BTreeMap<String, u32>,
    next: &BTreeMap<String, Work>,
) -> BTreeMap<String, Work> {
    let mut revocations: BTreeMap<String, Work> = BTreeMap::new();
    if next.is_empty() || configured.is_empty() || next.values().all(Work::is_empty) {
        return revocations;
    }
    let members = next.len();
    let connectors = configured.len();
    let tasks: usize = configured.values().map(|c| *c as usize).sum();
    let connector_caps = caps(
        connectors,
        members,
        next.values().map(|w| w.connectors.len()),
    );
    let task_caps = caps(tasks, members, next.values().map(|w| w.tasks.len()));
    for ((member, work), (connector_cap, task_cap)) in
        next.iter().zip(connector_caps.into_iter().zip(task_caps))
    {
        let mut take = Work::default();
        // The last ones in order go: the same member keeps the same work round after round.
        let over = work.connectors.len().saturating_sub(connector_cap);
        take.connectors = work.connectors.iter().rev().take(over).cloned().collect();
        let over = work.tasks.len().saturating_sub(task_cap);
        take.tasks = work.tasks.iter().rev().take(over).cloned().collect();
        revocations.insert(member.clone(), take);
    }
    revocations
}

/// Each member's cap, in member order: `total / members`, plus one for the first
/// `total % members` members that hold more than that (they keep their extra one).
fn caps(total: usize, members: usize, counts: impl Iterator<Item = usize>) -> Vec<usize> {
    let min = total / members;
    let mut extra = total % members;
    counts
        .map(|count| {
            if count > min && extra > 0 {
                extra -= 1;
                min + 1
            } else {
                min
            }
        })
        .collect()
}

fn apply_revocations(
    balance: &BTreeMap<String, Work>,
    next: &mut BTreeMap<String, Work>,
    revoked: &mut BTreeMap<String, Work>,
) {
    for (member, take) in balance {
        if let Some(work) = next.get_mut(member) {
            work.remove(take);
        }
        revoked.entry(member.clone()).or_default().add(take);
    }
}

/// Give each connector to a member with the fewest connectors (ties: lowest member id).
fn fill_connectors(next: &mut BTreeMap<String, Work>, connectors: &BTreeSet<String>) {
    for connector in connectors {
        if let Some(work) = least(next, |w| w.connectors.len()) {
            work.connectors.insert(connector.clone());
        }
    }
}

/// Give each task to a member with the fewest tasks (ties: lowest member id).
fn fill_tasks(next: &mut BTreeMap<String, Work>, tasks: &BTreeSet<ConnectorTaskId>) {
    for task in tasks {
        if let Some(work) = least(next, |w| w.tasks.len()) {
            work.tasks.insert(task.clone());
        }
    }
}

fn least(next: &mut BTreeMap<String, Work>, count: impl Fn(&Work) -> usize) -> Option<&mut Work> {
    next.values_mut().min_by_key(|w| count(w))
}

#[cfg(test)]
mod tests {
    use super::*;

    const DELAY: Duration = Duration::from_secs(300);

    /// A group as the tests drive it: members that apply what they are told, as workers do.
    struct Group {
        assignor: Assignor,
        members: BTreeMap<String, Work>,
        configured: BTreeMap<String, u32>,
        generation: i32,
        now_ms: u64,
        /// Every plan so far.
        plans: Vec<Plan>,
    }

    impl Group {
        fn new(members: &[&str], configured: &[(&str, u32)]) -> Self {
            Self {
                assignor: Assignor::new(DELAY),
                members: members
                    .iter()
                    .map(|m| (m.to_string(), Work::default()))
                    .collect(),
                configured: configured
                    .iter()
                    .map(|(c, n)| (c.to_string(), *n))
                    .collect(),
                generation: 0,
                now_ms: 1_000_000,
                plans: Vec::new(),
            }
        }

        /// One round: every member stops what is revoked and starts what is assigned. Checks
        /// that nothing is assigned in the round it is revoked and that nothing runs twice.
        fn round(&mut self) -> Plan {
            let last = (self.generation > 0).then_some(self.generation);
            self.generation += 1;
            let plan = self.assignor.assign(&Round {
                members: &self.members,
                configured: &self.configured,
                last_completed_generation: last,
                generation: self.generation,
                now_ms: self.now_ms,
            });
            let mut revoked = Work::default();
            for work in plan.revoked.values() {
                revoked.add(work);
            }
            for (member, work) in &plan.assigned {
                assert!(
                    !overlaps(work, &revoked),
                    "{member} was given work revoked in the same round: {plan:?}"
                );
            }
            for (member, work) in self.members.iter_mut() {
                if let Some(r) = plan.revoked.get(member) {
                    work.remove(r);
                }
                if let Some(a) = plan.assigned.get(member) {
                    work.add(a);
                }
            }
            assert_eq!(duplicates(&self.members), Work::default(), "runs twice");
            self.plans.push(plan.clone());
            plan
        }

        /// Rounds until one neither revokes nor assigns anything (the group is settled), at
        /// most `limit`.
        fn settle(&mut self, limit: usize) {
            for _ in 0..limit {
                let plan = self.round();
                let quiet = plan.revoked.values().all(Work::is_empty)
                    && plan.assigned.values().all(Work::is_empty);
                if quiet && plan.delay.is_zero() {
                    return;
                }
                self.now_ms += millis(plan.delay);
            }
            panic!("not settled after {limit} rounds: {:?}", self.plans);
        }

        fn counts(&self) -> Vec<(usize, usize)> {
            self.members
                .values()
                .map(|w| (w.connectors.len(), w.tasks.len()))
                .collect()
        }

        fn assert_balanced_and_complete(&self) {
            let mut all = Work::default();
            for work in self.members.values() {
                all.add(work);
            }
            assert_eq!(
                all,
                configured_work(&self.configured),
                "every configured item runs"
            );
            let counts = self.counts();
            let spread = |f: fn(&(usize, usize)) -> usize| {
                let v: Vec<usize> = counts.iter().map(f).collect();
                v.iter().max().unwrap() - v.iter().min().unwrap()
            };
            assert!(spread(|c| c.0) <= 1, "connectors unbalanced: {counts:?}");
            assert!(spread(|c| c.1) <= 1, "tasks unbalanced: {counts:?}");
        }

        fn join(&mut self, member: &str) {
            self.members.insert(member.to_owned(), Work::default());
        }

        /// `member` leaves without a word (killed): what it ran is held by no one.
        fn die(&mut self, member: &str) -> Work {
            self.members.remove(member).unwrap_or_default()
        }
    }

    /// The table: a group, an event, and what must hold once it settles.
    #[test]
    fn groups_settle_balanced_with_every_item_running_once() {
        type Setup = fn() -> Group;
        let cases: &[(&str, Setup)] = &[
            ("one member takes everything", || {
                Group::new(&["a"], &[("file", 3), ("datagen", 4)])
            }),
            ("three members share two connectors and seven tasks", || {
                Group::new(&["a", "b", "c"], &[("file", 3), ("datagen", 4)])
            }),
            ("more members than work", || {
                Group::new(&["a", "b", "c", "d", "e"], &[("c", 2)])
            }),
            ("nothing configured", || Group::new(&["a", "b"], &[])),
            ("a connector without tasks", || {
                Group::new(&["a", "b"], &[("idle", 0), ("busy", 5)])
            }),
        ];
        for (what, setup) in cases {
            let mut group = setup();
            group.settle(4);
            group.assert_balanced_and_complete();
            assert!(
                group
                    .plans
                    .iter()
                    .all(|p| p.revoked.values().all(Work::is_empty)),
                "{what}: nothing to revoke from a fresh group"
            );
        }
    }

    #[test]
    fn a_joining_member_takes_a_fair_share_and_what_does_not_move_keeps_running() {
        let mut group = Group::new(&["a", "b", "c"], &[("file", 3), ("datagen", 9)]);
        group.settle(3);
        let before = group.members.clone();
        group.join("d");
        // First round: only revocations (nothing is given out in the round it is taken).
        let plan = group.round();
        let moved: usize = plan.revoked.values().map(Work::len).sum();
        assert!(moved > 0, "{plan:?}");
        assert!(plan.assigned.values().all(Work::is_empty), "{plan:?}");
        group.settle(3);
        group.assert_balanced_and_complete();
        // Only what had to move moved: each old member lost at most its surplus.
        for (member, work) in &before {
            let now = &group.members[member];
            let kept = intersection(work, now).len();
            assert_eq!(kept, now.len(), "{member} only lost work, gained none");
        }
        assert_eq!(group.members["d"].tasks.len(), 3);
    }

    #[test]
    fn a_departed_members_work_waits_for_it_then_moves() {
        let mut group = Group::new(&["a", "b", "c"], &[("file", 3), ("datagen", 3)]);
        group.settle(3);
        let gone = group.die("b");
        assert!(!gone.is_empty());
        // Its work waits the scheduled delay; nothing else moves meanwhile.
        let plan = group.round();
        assert_eq!(plan.delay, DELAY);
        assert!(plan.assigned.values().all(Work::is_empty), "{plan:?}");
        assert!(plan.revoked.values().all(Work::is_empty), "{plan:?}");
        // A rejoin before the delay is over (someone else restarted) keeps waiting, less long.
        group.now_ms += 100_000;
        let plan = group.round();
        assert_eq!(plan.delay, Duration::from_secs(200));
        // Past the delay: it runs elsewhere, balanced.
        group.now_ms += 200_000;
        group.settle(4);
        group.assert_balanced_and_complete();
    }

    #[test]
    fn a_member_back_within_the_delay_gets_its_own_work_back() {
        let mut group = Group::new(&["a", "b", "c"], &[("file", 3), ("datagen", 3)]);
        group.settle(3);
        let gone = group.die("b");
        group.round();
        // It restarts with a new member id and nothing running.
        group.join("b2");
        group.now_ms += 10_000;
        let plan = group.round();
        assert!(plan.delay > Duration::ZERO);
        assert!(plan.assigned.values().all(Work::is_empty));
        group.now_ms += millis(plan.delay);
        group.round();
        assert_eq!(
            group.members["b2"], gone,
            "the returning member gets exactly its work"
        );
        group.settle(3);
        group.assert_balanced_and_complete();
    }

    #[test]
    fn without_a_delay_lost_work_moves_at_once() {
        let mut group = Group::new(&["a", "b"], &[("c", 4)]);
        group.assignor = Assignor::new(Duration::ZERO);
        group.settle(3);
        group.die("a");
        let plan = group.round();
        assert_eq!(plan.delay, Duration::ZERO);
        group.settle(2);
        group.assert_balanced_and_complete();
        assert_eq!(group.members["b"].tasks.len(), 4);
    }

    #[test]
    fn deleted_and_shrunk_connectors_are_revoked_and_new_tasks_assigned() {
        let mut group = Group::new(&["a", "b"], &[("x", 4), ("y", 2)]);
        group.settle(3);
        group.configured.remove("y");
        group.configured.insert("x".into(), 2);
        group.configured.insert("z".into(), 3);
        let plan = group.round();
        let mut revoked = Work::default();
        for w in plan.revoked.values() {
            revoked.add(w);
        }
        assert!(revoked.connectors.contains("y"));
        assert!(revoked.tasks.contains(&ConnectorTaskId::new("x", 3)));
        assert!(revoked.tasks.contains(&ConnectorTaskId::new("y", 0)));
        assert!(!revoked.tasks.contains(&ConnectorTaskId::new("x", 0)));
        group.settle(4);
        group.assert_balanced_and_complete();
    }

    #[test]
    fn work_held_twice_is_revoked_from_all_but_one_holder() {
        let mut group = Group::new(&["a", "b"], &[("c", 2)]);
        let task = ConnectorTaskId::new("c", 0);
        for member in ["a", "b"] {
            group
                .members
                .get_mut(member)
                .unwrap()
                .tasks
                .insert(task.clone());
        }
        let mut assignor = Assignor::new(DELAY);
        let plan = assignor.assign(&Round {
            members: &group.members,
            configured: &group.configured,
            last_completed_generation: None,
            generation: 1,
            now_ms: 0,
        });
        assert!(!plan.revoked["a"].tasks.contains(&task));
        assert!(plan.revoked["b"].tasks.contains(&task));
    }

    #[test]
    fn members_that_keep_joining_and_leaving_meet_a_growing_backoff() {
        let mut group = Group::new(&["a", "b"], &[("c", 8)]);
        group.settle(3);
        // A member joins; the next revoking round right after a revoking round waits.
        group.join("c1");
        let first = group.round();
        assert!(first.revoked.values().any(|w| !w.is_empty()));
        assert_eq!(first.delay, Duration::ZERO);
        // Before the follow-up round another member joins: revoking again now backs off.
        group.join("c2");
        let second = group.round();
        assert_eq!(second.delay, Duration::from_millis(40));
        group.now_ms += 40;
        group.settle(6);
        group.assert_balanced_and_complete();
        assert_eq!(group.assignor.backoff(2), Duration::from_millis(1600));
        assert_eq!(group.assignor.backoff(3), Duration::from_millis(64_000));
        assert_eq!(group.assignor.backoff(9), DELAY);
    }

    #[test]
    fn a_new_leader_without_memory_keeps_what_runs_where_it_runs() {
        let mut group = Group::new(&["a", "b", "c"], &[("file", 3), ("datagen", 4)]);
        group.settle(3);
        let before = group.members.clone();
        // Leadership moved: a fresh assignor, from what the members report.
        group.assignor = Assignor::new(DELAY);
        let plan = group.round();
        assert!(plan.revoked.values().all(Work::is_empty), "{plan:?}");
        assert!(plan.assigned.values().all(Work::is_empty), "{plan:?}");
        assert_eq!(group.members, before);
    }
}
