//! Who processed which partition when, and where faults struck: the data behind
//! `--svg`.

use std::collections::HashMap;

/// A stretch of time one host processed one partition.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Segment {
    /// The partition.
    pub partition: u32,
    /// The host's slot.
    pub host: usize,
    /// Start, true time in ms.
    pub from: u64,
    /// End, true time in ms.
    pub to: u64,
}

/// A fault or membership change, marked on the timeline.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Mark {
    /// True time in ms.
    pub at: u64,
    /// What happened.
    pub label: String,
}

/// The ownership timeline of a run.
#[derive(Clone, Debug, Default)]
pub struct Timeline {
    /// Closed segments.
    pub segments: Vec<Segment>,
    open: HashMap<(u32, usize), u64>,
    /// Faults and membership changes.
    pub marks: Vec<Mark>,
    /// The hosts' names by slot.
    pub names: Vec<String>,
}

impl Timeline {
    /// `host` begins processing `partition` at `at`.
    pub fn start(&mut self, partition: u32, host: usize, at: u64) {
        self.open.entry((partition, host)).or_insert(at);
    }

    /// `host` stops processing `partition` at `at`.
    pub fn end(&mut self, partition: u32, host: usize, at: u64) {
        if let Some(from) = self.open.remove(&(partition, host)) {
            self.segments.push(Segment {
                partition,
                host,
                from,
                to: at,
            });
        }
    }

    /// Marks `label` at `at`.
    pub fn mark(&mut self, at: u64, label: String) {
        self.marks.push(Mark { at, label });
    }

    /// Closes every open segment at `at`.
    pub fn finish(&mut self, at: u64) {
        let mut open: Vec<((u32, usize), u64)> = self.open.drain().collect();
        open.sort_unstable();
        for ((partition, host), from) in open {
            self.segments.push(Segment {
                partition,
                host,
                from,
                to: at,
            });
        }
    }
}
