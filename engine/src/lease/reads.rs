//! What a host reads each acquire interval.
//!
//! Under lease liveness every lease renews itself, so a host must watch every lease:
//! each interval it reads the whole table. Under session liveness a lease changes
//! hands only through events a host sees in the heartbeats (a member's tenure ends,
//! it leaves, it claims or is claimed from), so the interval's read is the heartbeats
//! alone, O(hosts). The table is read only when such an event calls for it, and by a
//! slow audit that catches anything missed.
//!
//! Reading less never risks safety: every take and handoff is a conditional write,
//! so a version known from an old read fails (412) instead of overwriting a newer
//! one, and the host re-reads that lease.

use super::host::{LeaseHost, What};
use super::{HostDocument, Intent};
use crate::balance::spread;
use crate::store::Op;
use crate::time::{LocalTime, Now};

/// When this host last read the whole table, and whether something calls for a
/// read before the audit is due.
#[derive(Clone, Debug, Default, PartialEq, Eq, Hash)]
pub(super) struct TableReads {
    /// When the last complete read of the table was sent.
    pub read_at: Option<LocalTime>,
    /// An event calls for a read at the next scan.
    pub due: bool,
    /// When this host last had claims out.
    pub claimed_at: Option<LocalTime>,
    /// The last plan asked for nothing, and nothing this host holds changed since:
    /// a read of the heartbeats that shows no change needs no new plan.
    pub settled: bool,
}

/// Why the whole table is read.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Why {
    /// Every interval (lease liveness), or because an event calls for it.
    Needed,
    /// The audit.
    Audit,
}

impl LeaseHost {
    /// Sends the interval's read: the heartbeats alone, or the whole table.
    pub(super) fn send_scan(&mut self, now: Now) {
        self.scanning = true;
        let seq = self.issued;
        if !self.beat.published.is_empty() {
            self.table.claimed_at = Some(now.local);
        }
        let why = self.table_read_due(now);
        if why.is_some() {
            // This read sees every change before it: only later ones call for another.
            self.table.due = false;
        }
        let (intent, prefix, table) = match why {
            Some(Why::Needed) => (Intent::Scan, self.config.prefix.clone(), true),
            Some(Why::Audit) => (Intent::Audit, self.config.prefix.clone(), true),
            None => (
                Intent::ReadMembers,
                HostDocument::id_prefix(&self.config.prefix),
                false,
            ),
        };
        self.send(
            now,
            intent,
            Op::ReadAll { prefix },
            What::Scan { seq, table },
        );
    }

    fn table_read_due(&self, now: Now) -> Option<Why> {
        // A handoff confirmed just before its claim was withdrawn can still land:
        // the former claimant keeps reading for a lease duration, so that a lease
        // handed to it does not wait for the audit.
        let lately_claimed = self
            .table
            .claimed_at
            .is_some_and(|at| now.local < at + self.config.expiry.duration);
        if !self.session_liveness() || self.table.due || lately_claimed || self.is_claimed_from() {
            // Lease liveness watches every lease. In a handoff, both sides judge
            // the claim by how the leases are spread now: the claimant to see the
            // leases it asked for arrive, the owner to see whether to give them.
            return Some(Why::Needed);
        }
        let Some(at) = self.table.read_at else {
            return Some(Why::Needed);
        };
        // Each host audits once per audit interval times the group's size, at its
        // own phase within that period, so that the group as a whole reads the
        // table about once per audit interval rather than all at once.
        let hosts = self.live_members(now).count() as u64 + 1;
        let every = self
            .config
            .audit_interval
            .as_millis()
            .saturating_mul(hosts)
            .max(1);
        let phase = spread(self.me.as_str(), "audit") % every;
        let period = |t: LocalTime| (t.as_millis() + every - phase) / every;
        (period(now.local) > period(at)).then_some(Why::Audit)
    }

    /// Whether another host claims a lease this host holds.
    fn is_claimed_from(&self) -> bool {
        self.members.values().any(|m| {
            m.claimed
                .iter()
                .any(|t| self.slots.get(t).is_some_and(|s| s.own.is_some()))
        })
    }

    /// Something happened that only the table can tell the whole of: read it at
    /// the next scan, which is now.
    pub(super) fn need_table(&mut self, now: Now) {
        self.table.due = true;
        self.next_scan = self.next_scan.min(now.local);
    }

    /// A complete read of the table, sent at `sent_at`, came back, or failed.
    pub(super) fn table_read(&mut self, sent_at: LocalTime, ok: bool) {
        if ok {
            self.table.read_at = Some(sent_at);
        } else {
            self.table.due = true;
        }
    }
}
