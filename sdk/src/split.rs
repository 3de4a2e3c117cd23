//! Splitting a connector's work over its tasks.

/// Split `items` into at most `groups` contiguous groups whose sizes differ by at most one,
/// larger groups first, as Kafka Connect's `ConnectorUtils.groupPartitions` does: 5 files or
/// tables over 3 tasks are 2, 2 and 1; 3 over 10 tasks are 3 groups of one; none, no group.
pub fn split_evenly<T>(items: &[T], groups: usize) -> Vec<&[T]> {
    let groups = groups.min(items.len());
    if groups == 0 {
        return Vec::new();
    }
    let (base, extra) = (items.len() / groups, items.len() % groups);
    let mut out = Vec::with_capacity(groups);
    let mut start = 0;
    for i in 0..groups {
        let len = base + usize::from(i < extra);
        out.push(&items[start..start + len]);
        start += len;
    }
    out
}

#[cfg(test)]
mod tests {
    use super::split_evenly;

    #[test]
    fn splits_contiguously_larger_groups_first() {
        let five = [1, 2, 3, 4, 5];
        let sizes: Vec<usize> = split_evenly(&five, 3).iter().map(|g| g.len()).collect();
        assert_eq!(sizes, vec![2, 2, 1]);
        assert_eq!(split_evenly(&five, 3)[2], &[5]);
        assert_eq!(split_evenly(&[1, 2, 3], 10).len(), 3);
        assert!(split_evenly::<u8>(&[], 4).is_empty());
        assert_eq!(split_evenly(&five, 1), vec![&five[..]]);
    }
}
