//! The split fault: a partition's range splits in two. Its feed ends; each child
//! starts with all of the parent's events so far (a child may re-read the parent's
//! unprocessed tail: at least once) and then gets half the parent's rate.

use super::*;
use leasehold_engine::feed::Read;

impl World {
    /// Events partition `p` has by true time `t`: those it inherited, then its own.
    pub(super) fn produced(&self, p: u32, t: u64) -> u64 {
        let p = p as usize;
        self.bases[p] + self.feeds[p].produced(t)
    }

    /// When event `k` of partition `p` arrived.
    pub(super) fn arrival(&self, p: u32, k: u64) -> u64 {
        let base = self.bases[p as usize];
        match self.parents[p as usize] {
            Some(parent) if k < base => self.arrival(parent, k),
            _ => self.feeds[p as usize].arrival(k - base),
        }
    }

    /// Splits a random partition that has not split yet; `None` if every one has.
    pub(super) fn split_some_partition(&mut self) -> Option<(Option<usize>, i64)> {
        let current: Vec<u32> = (0..self.tokens.len() as u32)
            .filter(|p| self.ranges.read(&self.tokens[*p as usize]) == Read::Current)
            .collect();
        if current.is_empty() {
            return None;
        }
        let p = current[self.rng.random_range(0..current.len())];
        let token = self.tokens[p as usize].clone();
        let children_tokens = vec![
            LeaseToken::from(format!("{token}a")),
            LeaseToken::from(format!("{token}b")),
        ];
        self.ranges.split(&token, children_tokens.clone()).ok()?;
        let now = self.now;
        let base = self.produced(p, now);
        self.feeds[p as usize].end_at(now);
        let children = self.checker.split(p, 2, now);
        let heal = self.cfg.heal_at().as_millis();
        let rate = self.rates[p as usize] / 2.0;
        for (child, token) in children.iter().zip(children_tokens) {
            let phase = now + self.rng.random_range(0..SECOND);
            self.feeds.push(Feed::new(rate, phase, heal));
            self.rates.push(rate);
            self.bases.push(base);
            self.parents.push(Some(p));
            self.tokens.push(token.clone());
            self.index.insert(token, *child);
        }
        Some((None, 0))
    }

    /// The partitions `partition`'s range split into, as the feed tells.
    pub(super) fn children_of(&self, partition: u32) -> Vec<u32> {
        match self.ranges.read(&self.tokens[partition as usize]) {
            Read::Gone(children) => children
                .iter()
                .filter_map(|c| self.index.get(c).copied())
                .collect(),
            Read::Current => Vec::new(),
        }
    }

    /// The children of `partition` inherit what it committed since the split.
    pub(super) fn pass_down(&mut self, partition: u32) {
        let children = self.children_of(partition);
        if children.is_empty() {
            return;
        }
        let committed = self.checker.committed(partition);
        for child in children {
            self.checker.inherit(child, committed);
            self.pass_down(child);
        }
    }

    /// A handler of another range that overlaps `partition` (an ancestor or a
    /// descendant by splits) running now, if any.
    pub(super) fn overlapping_run(&self, partition: u32) -> Option<String> {
        let mut related = Vec::new();
        let mut at = self.parents[partition as usize];
        while let Some(p) = at {
            related.push(p);
            at = self.parents[p as usize];
        }
        let mut below = vec![partition];
        while let Some(p) = below.pop() {
            for c in self.children_of(p) {
                related.push(c);
                below.push(c);
            }
        }
        related.into_iter().find_map(|p| {
            let r = self.checker.running(p).first()?;
            Some(format!(
                "{} runs partition {} ({})",
                self.hosts[r.host].name, p, self.tokens[p as usize]
            ))
        })
    }

    /// The handler of `partition` on `host` finds its range split: it tells the
    /// engine, which stops it. Whether it did.
    pub(super) fn found_split(&mut self, host: usize, partition: u32, session: Session) -> bool {
        let token = self.tokens[partition as usize].clone();
        let Read::Gone(children) = self.ranges.read(&token) else {
            return false;
        };
        let children = children.to_vec();
        self.feed(
            host,
            Input::Split {
                lease: token,
                session,
                children,
            },
        );
        true
    }
}
