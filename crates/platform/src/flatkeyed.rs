//! The kernel's files of "flat keyed" lines, `key value` (cgroup `cpu.stat`,
//! `memory.events`, `memory.stat`, `pids.events`, v1 `cpuacct.stat`), read by the tenant's
//! cgroup, the memory protection check and the noise attribution alike.

/// The value of `key` in a "key value" per line file.
pub(crate) fn keyed(text: &str, key: &str) -> Option<u64> {
    text.lines().find_map(|l| {
        let mut it = l.split_whitespace();
        (it.next()? == key).then(|| it.next()?.parse().ok())?
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn keyed_parser() {
        assert_eq!(
            keyed("oom_kill_disable 0\nunder_oom 0\noom_kill 3\n", "oom_kill"),
            Some(3)
        );
        assert_eq!(keyed("max 0\n", "oom"), None);
    }
}
