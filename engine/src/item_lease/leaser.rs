//! The item-lease state machine.

use super::config::{Candidate, ItemKnownBad};
use super::{
    Grant, Input, Item, ItemError, ItemHandle, ItemIntent, ItemKey, ItemLease, ItemRequest,
    ItemState, LeaserConfig, Output,
};
use crate::ids::{DocId, HostId, Incarnation, RequestId};
use crate::lock::{Client, Held, LockToken, Locks};
use crate::store::{Compare, Condition, Op, Query, Reply, StoreError, Stored, Value};
use crate::time::{LocalTime, Millis, Now, WallTime};
use std::collections::{BTreeMap, VecDeque};
use std::sync::Arc;

/// One holder of item leases, as a sans-IO state machine: feed it [`Input`]s with
/// [`handle_input`](Self::handle_input) and drain [`poll_output`](Self::poll_output).
///
/// ```
/// use leasehold_engine::item_lease::{Input, Item, ItemKey, ItemState, Leaser, LeaserConfig, Output};
/// use leasehold_engine::store::Container;
/// use leasehold_engine::{DocId, HostId, Incarnation, LocalTime, Millis, Now, PartitionKey, WallTime};
///
/// let mut store = Container::new();
/// let item = Item::new(DocId::from("tp-1"), PartitionKey::from("tp-1"), ItemState::from("REQUESTED"), WallTime(0));
/// store.create(item.clone()).unwrap();
/// let mut leaser = Leaser::new(HostId::from("connector-a"), Incarnation(0), LeaserConfig::new("tp-"));
/// let now = Now::new(LocalTime::ZERO, WallTime(1_000));
/// let mut inputs = vec![Input::NextForState {
///     state: ItemState::from("REQUESTED"),
///     limit: 5,
///     duration: Millis::from_secs(60),
/// }];
/// let mut leased = Vec::new();
/// while let Some(input) = inputs.pop() {
///     leaser.handle_input(now, input).unwrap();
///     while let Some(out) = leaser.poll_output() {
///         match out {
///             Output::Request(req) => inputs.push(Input::Response { id: req.id, result: store.execute(req.op) }),
///             Output::Leased(grants) => leased = grants,
///             _ => {}
///         }
///     }
/// }
/// assert_eq!(leased.len(), 1);
/// assert!(leaser.has_authority(&leased[0].handle(), LocalTime::ZERO));
/// ```
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct Leaser {
    client: Client,
    /// Shared, not copied: model checkers clone leasers with every state.
    config: Arc<LeaserConfig>,
    locks: Locks,
    /// The version of each held item this leaser last wrote.
    held_docs: BTreeMap<DocId, Item>,
    /// The items leased by others whose leases it watches: the state and state
    /// timestamp each was last read with, which tell the reads that cover it.
    watching: BTreeMap<DocId, (ItemState, WallTime)>,
    pending: BTreeMap<RequestId, Pending>,
    /// The lease each item was last held under, kept for items let go of while a
    /// request about them is unanswered: an answer under an earlier lease of this
    /// leaser's is about a lease that is over, though nothing is held now. Without
    /// it, an acquire answered after the item was leased again and let go granted
    /// the earlier lease, with authority, over a store that held no lease.
    let_go: BTreeMap<DocId, LockToken>,
    /// The running `next_for_state`: leases still unanswered, and those granted.
    next: Option<NextRun>,
    now: Now,
    out: VecDeque<Output>,
}

#[derive(Clone, Debug, PartialEq, Eq, Hash)]
struct NextRun {
    scanning: bool,
    outstanding: usize,
    state: ItemState,
    limit: usize,
    duration: Millis,
    granted: Vec<Grant>,
}

#[derive(Clone, Debug, PartialEq, Eq, Hash)]
enum Pending {
    ReadToAcquire {
        id: DocId,
        duration: Millis,
        retry: bool,
    },
    Acquire {
        item: Item,
        sent_at: LocalTime,
        retry: bool,
    },
    ReadToBreak(ItemHandle),
    Renew {
        id: DocId,
        /// The lease renewed: this leaser may hold the item under another by the time
        /// the answer comes.
        token: LockToken,
        sent_at: LocalTime,
    },
    Break {
        id: DocId,
        /// The lease broken, if this leaser's own.
        token: Option<LockToken>,
    },
    Save {
        /// The item as saved: the version later writes under the lease start from.
        doc: Item,
        /// The lease the save was written under.
        token: LockToken,
        release: bool,
    },
    /// `next_for_state`'s read of the `window` oldest items in the state.
    Scan {
        window: usize,
    },
    Lease {
        item: Item,
        sent_at: LocalTime,
    },
}

impl Leaser {
    /// A leaser named `me`, in life `incarnation` (which must differ from every
    /// earlier life of the same name).
    pub fn new(me: HostId, incarnation: Incarnation, config: LeaserConfig) -> Leaser {
        Leaser {
            client: Client::new(me, incarnation),
            config: Arc::new(config),
            locks: Locks::default(),
            held_docs: BTreeMap::new(),
            watching: BTreeMap::new(),
            pending: BTreeMap::new(),
            let_go: BTreeMap::new(),
            next: None,
            now: Now::default(),
            out: VecDeque::new(),
        }
    }

    /// The locks this leaser holds, and what it watches.
    pub fn locks(&self) -> &Locks {
        &self.locks
    }

    /// Whether the task holding `lease` may still act on its item at `now`: this
    /// leaser holds the item under that very lease, and its authority has not run out.
    pub fn has_authority(&self, lease: &ItemHandle, now: LocalTime) -> bool {
        self.held(lease).is_ok() && self.locks.has_authority(&lease.item.id, now)
    }

    /// The next output, if any.
    pub fn poll_output(&mut self) -> Option<Output> {
        self.out.pop_front()
    }

    /// Takes one input at `now`. A refused input changes nothing.
    pub fn handle_input(&mut self, now: Now, input: Input) -> Result<(), ItemError> {
        if now.local >= self.now.local {
            self.now = now;
        }
        match input {
            Input::Acquire { item, duration } => {
                let pending = Pending::ReadToAcquire {
                    id: item.id.clone(),
                    duration,
                    retry: true,
                };
                self.send(ItemIntent::Read, None, read(item), pending);
            }
            Input::Renew(lease) => {
                let (held, mut doc) = self.held(&lease)?;
                if let Some(stored) = &mut doc.lease {
                    stored.at = self.now.wall;
                }
                let pending = Pending::Renew {
                    id: lease.item.id,
                    token: held.token.clone(),
                    sent_at: self.now.local,
                };
                self.write_held(ItemIntent::Renew, held, doc, pending);
            }
            Input::Break(lease) => match self.held(&lease) {
                Ok((held, mut doc)) => {
                    doc.lease = None;
                    let pending = Pending::Break {
                        id: lease.item.id,
                        token: Some(held.token.clone()),
                    };
                    self.write_held(ItemIntent::Break, held, doc, pending);
                }
                // Held under another lease, a later one: that one is another task's.
                Err(refused) if self.locks.held(&lease.item.id).is_some() => return Err(refused),
                // Not held as far as this leaser knows: the store may still carry the
                // lease (an answer lost on the way), so read it and break it if so.
                Err(_) => {
                    let key = lease.item.clone();
                    self.send(
                        ItemIntent::Read,
                        None,
                        read(key),
                        Pending::ReadToBreak(lease),
                    );
                }
            },
            Input::NextForState {
                state,
                limit,
                duration,
            } => {
                if self.next.is_some() {
                    return Err(ItemError::Busy);
                }
                // As wide as the leases it watches in the state, which the oldest
                // items are likeliest to carry: most calls read once.
                let watched = self.watching.values().filter(|(s, _)| *s == state).count();
                self.next = Some(NextRun {
                    scanning: true,
                    outstanding: 0,
                    state,
                    limit,
                    duration,
                    granted: Vec::new(),
                });
                self.scan(limit + watched);
            }
            Input::Save {
                lease,
                state,
                release,
            } => {
                let (held, mut doc) = self.held(&lease)?;
                doc.state = state;
                doc.state_timestamp = self.now.wall;
                if release {
                    doc.lease = None;
                }
                let pending = Pending::Save {
                    doc: doc.clone(),
                    token: held.token.clone(),
                    release,
                };
                self.write_held(ItemIntent::Save, held, doc, pending);
            }
            Input::Response { id, result } => {
                let pending = self
                    .pending
                    .remove(&id)
                    .ok_or(ItemError::UnknownRequest(id))?;
                self.answer(pending, result);
                if !self.let_go.is_empty() {
                    let asked: Vec<&DocId> =
                        self.pending.values().filter_map(Pending::item).collect();
                    self.let_go.retain(|id, _| asked.contains(&id));
                }
            }
        }
        Ok(())
    }

    /// Reads the `window` oldest items in the wanted state, leased or not: a
    /// selective read, whose cost grows with the window, never with the backlog.
    fn scan(&mut self, window: usize) {
        let state = self
            .next
            .as_ref()
            .map(|r| r.state.0.clone())
            .unwrap_or_default();
        let query = Query {
            pk: None,
            prefix: self.config.prefix.clone(),
            filter: vec![Condition::new(
                Item::STATE,
                Compare::Eq,
                Value::String(state),
            )],
            order_by: Some(Item::STATE_TIMESTAMP),
            limit: Some(window),
        };
        self.send(
            ItemIntent::Scan,
            None,
            Op::Query(query),
            Pending::Scan { window },
        );
    }

    /// The lock and document of the lease named, if this leaser holds the item under
    /// it.
    fn held(&self, lease: &ItemHandle) -> Result<(Held, Item), ItemError> {
        let id = &lease.item.id;
        match (self.locks.held(id), self.held_docs.get(id)) {
            (Some(held), Some(doc)) if self.names(lease, &held.token) => {
                Ok((held.clone(), doc.clone()))
            }
            _ => Err(ItemError::NotHeld),
        }
    }

    /// Whether `lease` names the lease of `token`.
    fn names(&self, lease: &ItemHandle, token: &LockToken) -> bool {
        self.config.known_bad == Some(ItemKnownBad::GrantNamesItem) || lease.token == *token
    }

    fn send(
        &mut self,
        intent: ItemIntent,
        lock: Option<LockToken>,
        op: Op<Item>,
        pending: Pending,
    ) {
        let id = self.client.next_request();
        self.pending.insert(id, pending);
        self.out.push_back(Output::Request(ItemRequest {
            id,
            intent,
            lock,
            op,
        }));
    }

    fn write_held(&mut self, intent: ItemIntent, held: Held, doc: Item, pending: Pending) {
        // A write that gives the lease up ends authority when it is sent: if its
        // outcome is unknown, someone else may already hold the item.
        if doc.lease.is_none() {
            self.locks.give_up_authority(&doc.id, self.now.local);
        }
        let op = Op::Replace {
            doc,
            if_match: Some(held.etag),
        };
        self.send(intent, Some(held.token), op, pending);
    }

    /// Whether a stored item's lease, if any, counts as expired now; and whether it is
    /// this leaser's own.
    fn judge(&mut self, stored: &Stored<Item>) -> (bool, bool) {
        let now = self.now;
        match &stored.doc.lease {
            None => (false, false),
            Some(lease) => {
                let first = self.locks.sight(&stored.doc.id, &stored.etag, now.local);
                let expired =
                    self.config
                        .policy
                        .is_expired(lease.duration, first, lease.until(), now);
                (expired, self.client.owns(&lease.token))
            }
        }
    }

    /// The item with a fresh lease of this leaser's, and the write that takes it.
    fn leased(&mut self, stored: &Stored<Item>, duration: Millis) -> (Item, Op<Item>) {
        let mut doc = stored.doc.clone();
        doc.lease = Some(ItemLease {
            token: self.client.next_token(),
            at: self.now.wall,
            duration,
        });
        let op = Op::Replace {
            doc: doc.clone(),
            if_match: Some(stored.etag.clone()),
        };
        (doc, op)
    }

    /// Records a successful lease write and returns its grant.
    fn granted(&mut self, item: Item, etag: crate::ids::Etag, sent_at: LocalTime) -> Option<Grant> {
        let lease = item.lease.clone()?;
        let authority_until = sent_at + self.config.policy.authority_span(lease.duration);
        self.locks.hold(
            item.id.clone(),
            Held {
                etag,
                token: lease.token.clone(),
                duration: lease.duration,
                authority_until,
                excludes_until: authority_until,
            },
        );
        let grant = Grant {
            item: item.id.clone(),
            pk: item.pk.clone(),
            token: lease.token.clone(),
            until: lease.until(),
            authority_until,
        };
        self.held_docs.insert(item.id.clone(), item);
        Some(grant)
    }

    fn answer(&mut self, pending: Pending, result: Result<Reply<Item>, StoreError>) {
        if self.answers_earlier(&pending) {
            self.earlier_lease_answered(pending, result);
            return;
        }
        match pending {
            Pending::ReadToAcquire {
                id,
                duration,
                retry,
            } => match result {
                Ok(Reply::Read(stored)) => {
                    let (expired, own) = self.judge(&stored);
                    match &stored.doc.lease {
                        Some(lease) if !expired && !own => {
                            let error = ItemError::LeaseHeld {
                                holder: lease.holder().clone(),
                                until: lease.until(),
                            };
                            self.fail(id, ItemIntent::Acquire, error);
                        }
                        _ => {
                            let (item, op) = self.leased(&stored, duration);
                            let token = item.lease.as_ref().map(|l| l.token.clone());
                            let sent_at = self.now.local;
                            let pending = Pending::Acquire {
                                item,
                                sent_at,
                                retry,
                            };
                            self.send(ItemIntent::Acquire, token, op, pending);
                        }
                    }
                }
                Ok(_) => {}
                Err(StoreError::NotFound) => {
                    self.fail(id, ItemIntent::Acquire, ItemError::NotFound)
                }
                Err(e) => self.fail(id, ItemIntent::Acquire, ItemError::Store(e)),
            },
            Pending::Acquire {
                item,
                sent_at,
                retry,
            } => match result {
                Ok(Reply::Replaced(etag)) => {
                    if let Some(grant) = self.granted(item, etag, sent_at) {
                        self.out.push_back(Output::Acquired(grant));
                    }
                }
                Ok(_) => {}
                // Someone wrote the item between the read and the lease: read again
                // once, to report who holds it now.
                Err(StoreError::PreconditionFailed) if retry => {
                    let duration = item.lease.as_ref().map_or(Millis::ZERO, |l| l.duration);
                    let pending = Pending::ReadToAcquire {
                        id: item.id.clone(),
                        duration,
                        retry: false,
                    };
                    let key = ItemKey::of(&item);
                    self.send(ItemIntent::Read, None, read(key), pending);
                }
                Err(StoreError::PreconditionFailed) => {
                    self.fail(item.id, ItemIntent::Acquire, ItemError::LockLost)
                }
                Err(StoreError::NotFound) => {
                    self.fail(item.id, ItemIntent::Acquire, ItemError::NotFound)
                }
                Err(e) => self.fail(item.id, ItemIntent::Acquire, ItemError::Store(e)),
            },
            Pending::ReadToBreak(named) => {
                let id = named.item.id.clone();
                match result {
                    Ok(Reply::Read(stored)) => match &stored.doc.lease {
                        Some(lease)
                            if self.client.owns(&lease.token)
                                && self.names(&named, &lease.token) =>
                        {
                            let mut doc = stored.doc.clone();
                            doc.lease = None;
                            let op = Op::Replace {
                                doc,
                                if_match: Some(stored.etag.clone()),
                            };
                            let token = Some(lease.token.clone());
                            let pending = Pending::Break {
                                id,
                                token: token.clone(),
                            };
                            self.send(ItemIntent::Break, token, op, pending);
                        }
                        // A later lease of this leaser's: the one named is over.
                        Some(lease) if self.client.owns(&lease.token) => {
                            self.fail(id, ItemIntent::Break, ItemError::LockLost)
                        }
                        lease => {
                            let holder = lease.as_ref().map(|l| l.holder().clone());
                            self.fail(id, ItemIntent::Break, ItemError::NotHolder { holder });
                        }
                    },
                    Ok(_) => {}
                    Err(StoreError::NotFound) => {
                        self.fail(id, ItemIntent::Break, ItemError::NotFound)
                    }
                    Err(e) => self.fail(id, ItemIntent::Break, ItemError::Store(e)),
                }
            }
            Pending::Renew { id, sent_at, .. } => match result {
                Ok(Reply::Replaced(etag)) => {
                    let (Some(mut held), Some(doc)) =
                        (self.locks.held(&id).cloned(), self.held_docs.get_mut(&id))
                    else {
                        return;
                    };
                    if let Some(lease) = &mut doc.lease {
                        lease.at = self.now.wall;
                    }
                    held.etag = etag;
                    held.authority_until =
                        sent_at + self.config.policy.authority_span(held.duration);
                    held.excludes_until = held.authority_until;
                    let authority_until = held.authority_until;
                    self.locks.hold(id.clone(), held);
                    self.out.push_back(Output::Renewed {
                        item: id,
                        authority_until,
                    });
                }
                Ok(_) => {}
                Err(e) => self.holder_write_failed(id, ItemIntent::Renew, e),
            },
            Pending::Break { id, .. } => match result {
                Ok(_) => {
                    self.release(&id);
                    self.out.push_back(Output::Broken(id));
                }
                Err(e) => self.holder_write_failed(id, ItemIntent::Break, e),
            },
            Pending::Save { doc, release, .. } => match result {
                Ok(Reply::Replaced(etag)) => {
                    let id = doc.id.clone();
                    if release {
                        self.release(&id);
                    } else if let Some(mut held) = self.locks.held(&id).cloned() {
                        // A renewal or a break after the save writes the item as saved,
                        // not as it was leased.
                        held.etag = etag;
                        self.locks.hold(id.clone(), held);
                        self.held_docs.insert(id.clone(), doc);
                    }
                    self.out.push_back(Output::Saved(id));
                }
                Ok(_) => {}
                Err(e) => self.holder_write_failed(doc.id, ItemIntent::Save, e),
            },
            Pending::Scan { window } => match result {
                Ok(Reply::Query(items)) => {
                    // Leases held by others fill the window's top: read a window wider
                    // by as many, so that `limit` unleased items are in it if they
                    // exist. It widens only while they fill it, and never past the
                    // items in the state.
                    let limit = self.next.as_ref().map_or(0, |r| r.limit);
                    let others = items
                        .iter()
                        .filter(|s| {
                            s.doc
                                .lease
                                .as_ref()
                                .is_some_and(|l| !self.client.owns(&l.token))
                        })
                        .count();
                    let wider = limit + others;
                    let full = items.len() == window;
                    if full && wider > window {
                        self.scan(wider);
                    } else {
                        self.lease_from(items, full);
                    }
                }
                other => self.scan_failed(other),
            },
            Pending::Lease { item, sent_at } => {
                // A lease this leaser has since taken again under another token is
                // over: the run grants nothing for it (the model found the later
                // lease overwritten by the earlier's late answer).
                let again = item
                    .lease
                    .as_ref()
                    .is_some_and(|l| self.leased_again(&item.id, &l.token));
                if let Ok(Reply::Replaced(etag)) = result
                    && !again
                    && let Some(grant) = self.granted(item, etag, sent_at)
                    && let Some(run) = &mut self.next
                {
                    run.granted.push(grant);
                }
                if let Some(run) = &mut self.next {
                    run.outstanding = run.outstanding.saturating_sub(1);
                }
                self.finish_next_if_done();
            }
        }
    }

    /// Ends a `next_for_state` whose read failed: nothing leased.
    fn scan_failed(&mut self, result: Result<Reply<Item>, StoreError>) {
        if let Err(e) = result {
            let prefix = DocId::from(self.config.prefix.as_str());
            self.fail(prefix, ItemIntent::Scan, ItemError::Store(e));
        }
        if let Some(run) = &mut self.next {
            run.scanning = false;
        }
        self.finish_next_if_done();
    }

    /// Picks and leases items from a scan, for `next_for_state`.
    fn lease_from(&mut self, items: Vec<Stored<Item>>, full: bool) {
        let Some(run) = self.next.clone() else {
            return;
        };
        self.rewatch(&run.state, &items, full);
        let mut chosen = Vec::new();
        for stored in &items {
            if stored.doc.state != run.state {
                continue;
            }
            let (lease_expired, own) = self.judge(stored);
            let candidate = Candidate {
                item: &stored.doc,
                lease_expired,
                own,
                me: &self.client.me,
                now: self.now,
            };
            if (self.config.select.pick)(&candidate) {
                chosen.push(stored);
            }
        }
        chosen.sort_by(|a, b| {
            (a.doc.state_timestamp, &a.doc.id).cmp(&(b.doc.state_timestamp, &b.doc.id))
        });
        chosen.truncate(run.limit);
        let sent_at = self.now.local;
        let mut sent = 0;
        for stored in chosen {
            let (item, op) = self.leased(stored, run.duration);
            let token = item.lease.as_ref().map(|l| l.token.clone());
            self.send(
                ItemIntent::Lease,
                token,
                op,
                Pending::Lease { item, sent_at },
            );
            sent += 1;
        }
        if let Some(run) = &mut self.next {
            run.scanning = false;
            run.outstanding = sent;
        }
        self.finish_next_if_done();
    }

    /// Keeps watching the leases a read shows, and stops watching those it shows
    /// gone: a read of the oldest items in `state` covers every item of the state
    /// older than the last it returned, or every item if it was not `full`. A lease
    /// outside the window is still watched: forgotten, its wait would start again.
    fn rewatch(&mut self, state: &ItemState, items: &[Stored<Item>], full: bool) {
        let newest = items.last().map(|s| s.doc.state_timestamp);
        let covered = |(s, at): &(ItemState, WallTime)| {
            s == state && (!full || newest.is_some_and(|newest| *at < newest))
        };
        let stale: Vec<DocId> = self
            .watching
            .iter()
            .filter(|(id, seen)| covered(seen) && !items.iter().any(|s| &s.doc.id == *id))
            .map(|(id, _)| id.clone())
            .collect();
        for id in stale {
            self.watching.remove(&id);
            self.locks.forget_sighting(&id);
        }
        for stored in items {
            let doc = &stored.doc;
            if doc.lease.is_some() {
                let seen = (doc.state.clone(), doc.state_timestamp);
                self.watching.insert(doc.id.clone(), seen);
            } else {
                self.watching.remove(&doc.id);
                self.locks.forget_sighting(&doc.id);
            }
        }
    }

    fn finish_next_if_done(&mut self) {
        if self
            .next
            .as_ref()
            .is_some_and(|run| !run.scanning && run.outstanding == 0)
            && let Some(run) = self.next.take()
        {
            self.out.push_back(Output::Leased(run.granted));
        }
    }

    fn release(&mut self, id: &DocId) {
        if let Some(held) = self.locks.drop_lock(id)
            && self.config.known_bad != Some(ItemKnownBad::ForgetsLetGo)
            && self.pending.values().any(|p| p.item() == Some(id))
        {
            self.let_go.insert(id.clone(), held.token);
        }
        self.held_docs.remove(id);
    }

    /// Whether `pending` is a write under a lease of this leaser's, which has since
    /// leased the item again: its answer is about a lease that is over.
    fn answers_earlier(&self, pending: &Pending) -> bool {
        let (id, token) = match pending {
            Pending::Acquire { item, .. } => match &item.lease {
                Some(lease) => (&item.id, &lease.token),
                None => return false,
            },
            Pending::Renew { id, token, .. } => (id, token),
            Pending::Save { doc, token, .. } => (&doc.id, token),
            Pending::Break {
                id,
                token: Some(token),
            } => (id, token),
            _ => return false,
        };
        self.leased_again(id, token)
    }

    /// Whether this leaser holds `id` under a lease it took after `token`'s, or has
    /// let such a lease go (tokens of one life count up). One taken before is not
    /// newer: an acquire's answer, say, while a break of the earlier lease is still on
    /// its way.
    fn leased_again(&self, id: &DocId, token: &LockToken) -> bool {
        self.config.known_bad != Some(ItemKnownBad::AnswersReadHeld)
            && (self.locks.held(id).is_some_and(|h| h.token > *token)
                || self.let_go.get(id).is_some_and(|t| t > token))
    }

    /// An answer about a lease this leaser held before it leased the item again (the
    /// reply was held meanwhile): it reports on that lease and leaves the one held now,
    /// its etag and its authority, as they are. Acted on as the lease held now, an
    /// acquire's late answer put the earlier token and etag back, and a renewal's,
    /// a save's or a break's changed or dropped the new lease: its next write was
    /// refused and the item waited out a lease nobody held (the model found it).
    fn earlier_lease_answered(
        &mut self,
        pending: Pending,
        result: Result<Reply<Item>, StoreError>,
    ) {
        let (id, intent, done) = match pending {
            // Superseded by this leaser's own later lease: the earlier one is lost.
            Pending::Acquire { item, .. } => (item.id, ItemIntent::Acquire, None),
            Pending::Renew { id, .. } => (id, ItemIntent::Renew, None),
            Pending::Save { doc, .. } => {
                let id = doc.id;
                (id.clone(), ItemIntent::Save, Some(Output::Saved(id)))
            }
            Pending::Break { id, .. } => (id.clone(), ItemIntent::Break, Some(Output::Broken(id))),
            _ => return,
        };
        match (result, done) {
            (Ok(_), Some(done)) => self.out.push_back(done),
            (Ok(_) | Err(StoreError::PreconditionFailed | StoreError::NotFound), _) => {
                self.fail(id, intent, ItemError::LockLost)
            }
            (Err(e), _) => self.fail(id, intent, ItemError::Store(e)),
        }
    }

    /// 412 or 404 on a holder's write means the lease is lost; an ambiguous error
    /// keeps it so that the caller may retry.
    fn holder_write_failed(&mut self, id: DocId, intent: ItemIntent, error: StoreError) {
        match error {
            StoreError::PreconditionFailed | StoreError::NotFound => {
                self.release(&id);
                self.fail(id, intent, ItemError::LockLost);
            }
            e => self.fail(id, intent, ItemError::Store(e)),
        }
    }

    fn fail(&mut self, item: DocId, intent: ItemIntent, error: ItemError) {
        self.out.push_back(Output::Failed {
            item,
            intent,
            error,
        });
    }
}

impl Pending {
    /// The item the request is about; `None` for a scan.
    fn item(&self) -> Option<&DocId> {
        match self {
            Pending::ReadToAcquire { id, .. }
            | Pending::Renew { id, .. }
            | Pending::Break { id, .. } => Some(id),
            Pending::ReadToBreak(lease) => Some(&lease.item.id),
            Pending::Acquire { item, .. } | Pending::Lease { item, .. } => Some(&item.id),
            Pending::Save { doc, .. } => Some(&doc.id),
            Pending::Scan { .. } => None,
        }
    }
}

fn read(key: ItemKey) -> Op<Item> {
    Op::Read {
        pk: key.pk,
        id: key.id,
    }
}
