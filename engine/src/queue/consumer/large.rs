//! The consumer's part of large payloads ([`crate::queue::parts`]): writing a part set,
//! reading one back for a delivery, deleting one, and sweeping those left behind.

use super::{Consumer, Pending};
use crate::expiry::ExpiryRule;
use crate::ids::{DocId, Etag};
use crate::lock::LockPolicy;
use crate::queue::dead_letter::{self, Failure};
use crate::queue::{
    Delivery, Message, MessageName, MessageState, Naming, Output, PartSetId, PartsRef, QueueError,
    QueueIntent, QueueKnownBad, head_id, join_parts, part_id, payload_hash, split_payload,
};
use crate::store::{
    BatchOp, Compare, Condition, Document, Op, Query, Reply, StoreError, Stored, Value,
};
use crate::time::LocalTime;
use std::collections::VecDeque;

/// Bytes kept free in each part's batch for the batch's own framing.
const BATCH_FRAMING: usize = 256;

/// An enqueue whose parts are being written, one batch at a time.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub(super) struct Staging {
    /// The message that names the set, written last.
    manifest: Message,
    /// The set's head, as this producer writes it.
    head: Message,
    /// The head's etag after this producer's last write of it.
    head_etag: Option<Etag>,
    /// Parts not yet written, in order.
    parts: VecDeque<Message>,
    /// The manifest is written (before the parts only under `ManifestFirst`).
    manifest_written: bool,
    /// For a claim check: where the driver is in storing the payload.
    pub(super) claim: ClaimPhase,
    /// When the head's first create was sent, on this producer's clock: no sweep can
    /// see the head before, so none drops its payload within the sweep's bound after
    /// it ([`Consumer::claim_in_time`]).
    head_sent: LocalTime,
}

/// A claim check's payload, between its head and its manifest.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub(super) enum ClaimPhase {
    /// Not a claim check: the payload is in parts.
    NotClaimed,
    /// The driver is to be asked once the head is stored.
    ToStore,
    /// The driver was asked, and has not answered.
    Storing,
    /// The payload is stored: the manifest may follow.
    Stored,
}

/// A delivered message whose parts are being read.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub(super) struct Assembly {
    /// The delivery, its payload still empty.
    delivery: Delivery,
    parts: PartsRef,
    pieces: Vec<Option<Message>>,
    waiting: u32,
    failed: Option<StoreError>,
}

/// A part set being deleted: its parts first, then its head.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub(super) struct Cleanup {
    head: DocId,
    /// The head's etag a sweep marked, so that only the marked head is deleted.
    head_etag: Option<Etag>,
    parts: u32,
    waiting: u32,
    failed: bool,
    /// Whether a sweep started it (and counts it).
    swept: bool,
}

/// What a sweep makes of a head it read.
enum Judged {
    /// Marked already: its parts and the head go.
    Marked,
    /// It names nobody, and stayed so long enough: it is marked.
    Unnamed,
    /// It predates the record, and stayed unchanged long enough: marked if a query
    /// finds no message or dead letter naming its set.
    Unrecorded,
}

/// A running sweep.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub(super) struct SweepRun {
    /// Heads under consideration, and the scan itself while it is unanswered.
    open: usize,
    read: usize,
    swept: usize,
}

impl Consumer {
    /// The most payload bytes a part may take, escaped, so that the part and the
    /// head's rewrite fit one batch.
    fn part_budget(&self, head: &Message, name: &MessageName, set: &PartSetId) -> usize {
        let empty = Message {
            id: part_id(&self.config.queue, name, set, u32::MAX),
            state: MessageState::Part {
                set: set.clone(),
                index: u32::MAX,
            },
            payload: String::new(),
            parts: None,
            ..head.clone()
        };
        let used = empty.stored_size() + head.stored_size() + BATCH_FRAMING;
        self.config.limits.max_document_bytes.saturating_sub(used)
    }

    /// Starts an enqueue of a payload too large for one document: the head first.
    pub(super) fn enqueue_in_parts(&mut self, manifest: Message) -> Result<(), QueueError> {
        let Some(large) = self.config.large else {
            let size = manifest.stored_size();
            let limit = self.config.limits.max_document_bytes;
            return Err(QueueError::TooLarge { size, limit });
        };
        let bytes = manifest.payload.len();
        if bytes > large.max_bytes {
            return Err(QueueError::TooLarge {
                size: bytes,
                limit: large.max_bytes,
            });
        }
        let set = PartSetId::of(&self.client.next_token());
        let (queue, name) = (self.config.queue.clone(), manifest.name.clone());
        let mut head = self.head_for(&manifest, &set);
        let budget = self.part_budget(&head, &name, &set);
        let too_large = || QueueError::TooLarge {
            size: manifest.stored_size(),
            limit: self.config.limits.max_document_bytes,
        };
        let pieces = split_payload(&manifest.payload, budget).ok_or_else(too_large)?;
        let count = u32::try_from(pieces.len()).map_err(|_| too_large())?;
        if let MessageState::PartSet { count: c, .. } = &mut head.state {
            *c = count;
        }
        let parts = (0..count)
            .zip(pieces)
            .map(|(index, piece)| Message {
                id: part_id(&queue, &name, &set, index),
                state: MessageState::Part {
                    set: set.clone(),
                    index,
                },
                payload: piece.to_string(),
                parts: None,
                ..manifest.clone()
            })
            .collect();
        let manifest = Message {
            parts: Some(PartsRef {
                set: set.clone(),
                count,
                bytes: bytes as u64,
                hash: payload_hash(manifest.payload.as_bytes()),
            }),
            payload: String::new(),
            ..manifest
        };
        self.stage(set, manifest, head, parts, ClaimPhase::NotClaimed);
        Ok(())
    }

    /// A set's head, with no parts counted yet, for `manifest`'s payload.
    pub(super) fn head_for(&self, manifest: &Message, set: &PartSetId) -> Message {
        Message {
            id: head_id(&self.config.queue, &manifest.name, set),
            state: MessageState::PartSet {
                set: set.clone(),
                count: 0,
                sweeping: false,
                named_by: self.naming(Naming::Nobody),
            },
            payload: String::new(),
            parts: None,
            ..manifest.clone()
        }
    }

    /// What this consumer records as a head's naming document: `naming`, or nothing
    /// under `UnrecordedHeads`, as versions before the record wrote.
    pub(super) fn naming(&self, naming: Naming) -> Naming {
        if self.records_heads() {
            naming
        } else {
            Naming::Unrecorded
        }
    }

    /// Starts writing a set: its head first.
    pub(super) fn stage(
        &mut self,
        set: PartSetId,
        manifest: Message,
        head: Message,
        parts: VecDeque<Message>,
        claim: ClaimPhase,
    ) {
        let create = Op::Create(head.clone());
        self.staging.insert(
            set.clone(),
            Staging {
                manifest,
                head,
                head_etag: None,
                parts,
                manifest_written: false,
                claim,
                head_sent: self.now.local,
            },
        );
        self.send(QueueIntent::WritePart, None, create, Pending::PartHead(set));
    }

    /// The head's create, or its read, is answered.
    pub(super) fn head_answered(
        &mut self,
        set: PartSetId,
        result: Result<Reply<Message>, StoreError>,
    ) {
        let Some(staging) = self.staging.get_mut(&set) else {
            return;
        };
        match result {
            Ok(Reply::Created(etag)) => staging.head_etag = Some(etag),
            Ok(Reply::Read(Stored { doc, etag })) if matches!(&doc.state, MessageState::PartSet { set: s, sweeping: false, .. } if *s == set) =>
            {
                staging.head_etag = Some(etag);
            }
            // The create found the id taken: only an earlier attempt of this very
            // create can have made it (the set's id is this producer's own), so read
            // its etag and go on.
            Err(StoreError::Conflict) => return self.reread_head(set),
            Ok(_) | Err(StoreError::NotFound) => return self.staging_failed(&set, None),
            Err(e) => return self.staging_failed(&set, Some(e)),
        }
        self.write_next_part(set);
    }

    /// Reads the head again for its etag, which an earlier attempt of this
    /// producer's own write changed unseen.
    fn reread_head(&mut self, set: PartSetId) {
        let Some(staging) = self.staging.get(&set) else {
            return;
        };
        let op = Op::Read {
            pk: staging.head.partition_key(),
            id: staging.head.id.clone(),
        };
        self.send(QueueIntent::WritePart, None, op, Pending::PartHead(set));
    }

    /// Writes the next part with a rewrite of the head, or the manifest once none is
    /// left: each write lands only while the head is as this producer left it. A
    /// claim check's manifest waits for its payload to be stored.
    pub(super) fn write_next_part(&mut self, set: PartSetId) {
        let pk = self.pk();
        let in_time = self.claim_in_time(&set);
        let Some(staging) = self.staging.get_mut(&set) else {
            return;
        };
        let manifest_first = self.config.known_bad.is_some_and(|k| {
            matches!(
                k,
                QueueKnownBad::ManifestFirst | QueueKnownBad::ManifestFirstUnchecked
            )
        });
        match staging.claim {
            ClaimPhase::ToStore if manifest_first && !staging.manifest_written => {}
            ClaimPhase::ToStore if !in_time => {
                // Too late to store a payload a sweep would not find: the head is
                // left to the sweep, and nothing goes to the claim store.
                self.staging_failed(&set, None);
                return;
            }
            ClaimPhase::ToStore => {
                staging.claim = ClaimPhase::Storing;
                let name = staging.manifest.name.clone();
                let key = self.claim_key(&name, &set);
                self.out.push_back(Output::StoreClaim(key));
                return;
            }
            ClaimPhase::Storing => return,
            ClaimPhase::NotClaimed | ClaimPhase::Stored => {}
        }
        let next = if manifest_first && !staging.manifest_written {
            None
        } else {
            staging.parts.front()
        };
        if next.is_none() && staging.manifest_written {
            self.staging.remove(&set);
            return;
        }
        if next.is_none()
            && let MessageState::PartSet { named_by, .. } = &mut staging.head.state
            && *named_by == Naming::Nobody
        {
            // The manifest's batch makes it the set's one naming document.
            *named_by = Naming::By(staging.manifest.id.clone());
        }
        let head = BatchOp::Replace {
            doc: staging.head.clone(),
            if_match: staging.head_etag.clone(),
        };
        let (first, pending) = match next {
            Some(part) => {
                let index = match part.state {
                    MessageState::Part { index, .. } => index,
                    _ => 0,
                };
                (part.clone(), Pending::PartWrite { set, index })
            }
            None => {
                let manifest = staging.manifest.clone();
                let pending = Pending::Manifest {
                    name: manifest.name.clone(),
                    set,
                };
                (manifest, pending)
            }
        };
        let intent = match pending {
            Pending::Manifest { .. } => QueueIntent::Enqueue,
            _ => QueueIntent::WritePart,
        };
        let op = Op::Batch {
            pk,
            ops: vec![BatchOp::Create(first), head],
        };
        self.send(intent, None, op, pending);
    }

    /// A part's batch is answered.
    pub(super) fn part_written(
        &mut self,
        set: PartSetId,
        result: Result<Reply<Message>, StoreError>,
    ) {
        let etag = head_etag_of(&result);
        match dead_letter::outcome(&result) {
            Ok(()) => {
                let Some(staging) = self.staging.get_mut(&set) else {
                    return;
                };
                staging.parts.pop_front();
                staging.head_etag = etag;
                self.write_next_part(set);
            }
            // The part is there: an earlier attempt of this batch landed, and changed
            // the head with it. Read the head's etag again and go on.
            Err(Failure::Created) => {
                if let Some(staging) = self.staging.get_mut(&set) {
                    staging.parts.pop_front();
                }
                self.reread_head(set);
            }
            Err(Failure::Target(_)) => self.staging_failed(&set, None),
            Err(Failure::Request(e)) => self.staging_failed(&set, Some(e)),
        }
    }

    /// The manifest's batch is answered.
    pub(super) fn manifest_written(
        &mut self,
        name: MessageName,
        set: PartSetId,
        result: Result<Reply<Message>, StoreError>,
    ) {
        let etag = head_etag_of(&result);
        let Some(mut staging) = self.staging.remove(&set) else {
            return;
        };
        match dead_letter::outcome(&result) {
            Ok(()) if !staging.parts.is_empty() || staging.claim == ClaimPhase::ToStore => {
                // Only under `ManifestFirst`: the parts, or the claim-checked payload,
                // follow the message.
                staging.manifest_written = true;
                staging.head_etag = etag;
                self.staging.insert(set.clone(), staging);
                self.out.push_back(Output::Enqueued {
                    name,
                    already_present: false,
                });
                self.write_next_part(set);
            }
            Ok(()) => self.out.push_back(Output::Enqueued {
                name,
                already_present: false,
            }),
            // The name is taken (or this batch landed before, unseen): this set is
            // left for a sweep, which finds whether a message names it.
            Err(Failure::Created) => self.out.push_back(Output::Enqueued {
                name,
                already_present: true,
            }),
            Err(Failure::Target(_)) => {
                let id = staging.manifest.id;
                let claimed = staging.claim != ClaimPhase::NotClaimed;
                let key = self.claim_key(&name, &set);
                self.fail(id, QueueIntent::Enqueue, QueueError::PartsSwept(name));
                if claimed {
                    // The sweep may have dropped the key before the payload was
                    // stored under it, and no message will name it: discard it here.
                    self.out.push_back(Output::DiscardClaim(key));
                }
            }
            Err(Failure::Request(e)) => {
                let id = staging.manifest.id;
                self.fail(id, QueueIntent::Enqueue, QueueError::Store(e));
            }
        }
    }

    /// Whether set `set`'s claim-checked payload may still go to the claim store: only
    /// while this producer's head has authority, as a lock holder's write, with the
    /// sweep's bound as its duration. A sweep drops a set's payload only once it has
    /// seen the head unchanged for that bound (on any clock within the drift bound),
    /// so a payload stored before then is dropped by that sweep or named by the
    /// message; one stored after it could land once the sweep has dropped the key and
    /// deleted the head, where no sweep finds it again.
    pub(super) fn claim_in_time(&self, set: &PartSetId) -> bool {
        let (Some(staging), Some(large)) = (self.staging.get(set), self.config.large) else {
            return false;
        };
        if self.config.known_bad == Some(QueueKnownBad::ClaimUnbounded) {
            return true;
        }
        let span = self.sweep_policy().authority_span(large.orphan_after);
        self.now.local < staging.head_sent + span
    }

    /// The expiry a sweep judges a head by, and a producer its own head's authority:
    /// the consumer's lock policy under the observed rule, whatever rule locks follow,
    /// since a sweep watches the version, which is safe under any skew.
    fn sweep_policy(&self) -> LockPolicy {
        LockPolicy {
            rule: ExpiryRule::Observed,
            ..self.config.policy
        }
    }

    /// An enqueue in parts stops: its set is left for a sweep.
    pub(super) fn staging_failed(&mut self, set: &PartSetId, error: Option<StoreError>) {
        let Some(staging) = self.staging.remove(set) else {
            return;
        };
        let name = staging.manifest.name.clone();
        let error = match error {
            Some(e) => QueueError::Store(e),
            None => QueueError::PartsSwept(name),
        };
        self.fail(staging.manifest.id, QueueIntent::Enqueue, error);
    }

    /// A claim of a message kept in parts landed: reads its parts before delivering.
    pub(super) fn read_parts(&mut self, delivery: Delivery, parts: PartsRef) {
        let (queue, pk) = (self.config.queue.clone(), self.pk());
        let message = delivery.id.clone();
        for index in 0..parts.count {
            let op = Op::Read {
                pk: pk.clone(),
                id: part_id(&queue, &delivery.name, &parts.set, index),
            };
            let pending = Pending::ReadPart {
                message: message.clone(),
                index,
            };
            self.send(QueueIntent::ReadPart, None, op, pending);
        }
        let assembly = Assembly {
            delivery,
            pieces: vec![None; parts.count as usize],
            waiting: parts.count,
            parts,
            failed: None,
        };
        self.assembling.insert(message.clone(), assembly);
        if self
            .assembling
            .get(&message)
            .is_some_and(|a| a.waiting == 0)
        {
            self.assembled(message);
        }
    }

    /// A part's read is answered.
    pub(super) fn part_read(
        &mut self,
        message: DocId,
        index: u32,
        result: Result<Reply<Message>, StoreError>,
    ) {
        let Some(assembly) = self.assembling.get_mut(&message) else {
            return;
        };
        assembly.waiting = assembly.waiting.saturating_sub(1);
        // The earlier reading of a part not found, which the unchecked join of parts
        // (an earlier behaviour too) relied on to deliver what it found.
        let missing_is_damage = matches!(
            self.config.known_bad,
            Some(QueueKnownBad::MissingPartIsDamage | QueueKnownBad::ManifestFirstUnchecked)
        );
        match result {
            Ok(Reply::Read(stored)) => {
                if let Some(piece) = assembly.pieces.get_mut(index as usize) {
                    *piece = Some(stored.doc);
                }
            }
            // Parts are written before the message that names them and deleted only
            // after it, so a part not found beside a live message is one a replica
            // that lags has not received yet (Session reads promise nothing of a
            // document this session never saw): the delivery fails as after any read
            // that failed, and the message comes back once its lock runs out, by
            // which time the replica has caught up. A part really lost goes to the
            // dead letters with its message once the deliveries run out.
            Err(StoreError::NotFound) if !missing_is_damage => {
                assembly.failed = Some(StoreError::NotFound);
            }
            Ok(_) | Err(StoreError::NotFound) => {}
            Err(e) => assembly.failed = Some(e),
        }
        if assembly.waiting == 0 {
            self.assembled(message);
        }
    }

    /// Every part of `message` is read: deliver the payload whole, or never.
    fn assembled(&mut self, message: DocId) {
        let Some(assembly) = self.assembling.remove(&message) else {
            return;
        };
        if let Some(e) = assembly.failed {
            // Not delivered: the lock stays, excluding others until it runs out, and
            // the message comes back then, as after a crash.
            self.locks.give_up_authority(&message, self.now.local);
            self.fail(message, QueueIntent::ReadPart, QueueError::Store(e));
            self.claim_answered(false, false);
            return;
        }
        let joined = if self.config.known_bad == Some(QueueKnownBad::ManifestFirstUnchecked) {
            Ok(assembly
                .pieces
                .iter()
                .flatten()
                .map(|p| p.payload.as_str())
                .collect())
        } else {
            join_parts(&assembly.parts, &assembly.pieces)
        };
        match joined {
            Ok(payload) => {
                self.out.push_back(Output::Delivered(Delivery {
                    payload,
                    ..assembly.delivery
                }));
                self.claim_answered(true, false);
            }
            // Never delivered in part: the message goes to the dead letters with
            // what was wrong, and its payload's remains stay for inspection.
            Err(problem) => {
                let held = self.locks.drop_lock(&message);
                let doc = self.held_docs.remove(&message);
                let (Some(held), Some(doc)) = (held, doc) else {
                    self.claim_answered(false, false);
                    return;
                };
                let reason = problem.to_string();
                let etag = held.etag.clone();
                let op = self.move_op(doc, &held.token, held.etag, reason.clone());
                let pending = Pending::Poison {
                    id: message,
                    etag,
                    reason,
                };
                self.send(QueueIntent::Poison, None, op, pending);
            }
        }
    }

    /// Deletes a set's `count` parts, then its head: after its message completed, or
    /// when a sweep marked it (`head_etag`: the marked version).
    pub(super) fn delete_parts(
        &mut self,
        name: &MessageName,
        set: &PartSetId,
        count: u32,
        head_etag: Option<Etag>,
        swept: bool,
    ) {
        // A cleanup of the set already runs (this consumer's sweep took the set while
        // the answer that asks again was held): it deletes the same documents, and
        // replacing it would leave its sweep waiting for good.
        if self.cleanups.contains_key(set) {
            return;
        }
        let queue = self.config.queue.clone();
        if !swept && self.config.known_bad == Some(QueueKnownBad::HeadFirst) {
            let op = Op::Delete {
                pk: self.pk(),
                id: head_id(&queue, name, set),
                if_match: None,
            };
            let pending = Pending::DeleteHeadFirst {
                name: name.clone(),
                set: set.clone(),
                count,
            };
            self.send(QueueIntent::DeletePart, None, op, pending);
            return;
        }
        self.send_part_deletes(name, set, count);
        self.cleanups.insert(
            set.clone(),
            Cleanup {
                head: head_id(&queue, name, set),
                head_etag,
                parts: count,
                // A claim check waits for its one payload, in the claim store.
                waiting: count.max(1),
                failed: false,
                swept,
            },
        );
        if count == 0 {
            // A claim check: its payload goes before the head that names it.
            let key = self.claim_key(name, set);
            self.out.push_back(Output::DropClaim(key));
        }
    }

    /// Sends the deletes of a set's `count` parts.
    fn send_part_deletes(&mut self, name: &MessageName, set: &PartSetId, count: u32) {
        let (queue, pk) = (self.config.queue.clone(), self.pk());
        for index in 0..count {
            let op = Op::Delete {
                pk: pk.clone(),
                id: part_id(&queue, name, set, index),
                if_match: None,
            };
            let pending = Pending::DeletePart { set: set.clone() };
            self.send(QueueIntent::DeletePart, None, op, pending);
        }
    }

    /// A delete of a part, or of the head, is answered.
    pub(super) fn part_deleted(
        &mut self,
        set: PartSetId,
        head: bool,
        result: Result<Reply<Message>, StoreError>,
    ) {
        let ok = matches!(result, Ok(_) | Err(StoreError::NotFound));
        self.part_gone(set, head, ok);
    }

    /// A part, the head, or a claim-checked payload (`ok`: now absent) is deleted.
    pub(super) fn part_gone(&mut self, set: PartSetId, head: bool, ok: bool) {
        if head {
            let Some(cleanup) = self.cleanups.remove(&set) else {
                return;
            };
            if cleanup.swept {
                if ok {
                    self.out.push_back(Output::Swept {
                        set,
                        parts: cleanup.parts,
                    });
                }
                self.sweep_settled(ok);
            }
            return;
        }
        let Some(cleanup) = self.cleanups.get_mut(&set) else {
            return;
        };
        cleanup.waiting = cleanup.waiting.saturating_sub(1);
        cleanup.failed |= !ok;
        if cleanup.waiting > 0 {
            return;
        }
        if cleanup.failed {
            // A part may remain: keep the head, so that a sweep finds the set again.
            let swept = cleanup.swept;
            self.cleanups.remove(&set);
            if swept {
                self.sweep_settled(false);
            }
            return;
        }
        self.delete_head(set);
    }

    /// Under `HeadFirst`: the head is deleted; now the parts, and nothing after.
    pub(super) fn head_deleted_first(&mut self, name: MessageName, set: PartSetId, count: u32) {
        self.send_part_deletes(&name, &set, count);
        if count == 0 {
            let key = self.claim_key(&name, &set);
            self.out.push_back(Output::DropClaim(key));
        }
    }

    /// Whether a cleanup of set `set` waits for its claim-checked payload's drop, and
    /// its head is `head`.
    pub(super) fn awaits_claim(&self, set: &PartSetId, head: &DocId) -> bool {
        self.cleanups
            .get(set)
            .is_some_and(|c| c.parts == 0 && c.waiting > 0 && c.head == *head)
    }

    pub(super) fn delete_head(&mut self, set: PartSetId) {
        let Some(cleanup) = self.cleanups.get(&set) else {
            return;
        };
        let op = Op::Delete {
            pk: self.pk(),
            id: cleanup.head.clone(),
            if_match: cleanup.head_etag.clone(),
        };
        self.send(
            QueueIntent::DeletePart,
            None,
            op,
            Pending::DeleteHead { set },
        );
    }

    /// Starts a sweep: reads up to `max` heads after the last one read.
    pub(super) fn start_sweep(&mut self, max: usize) -> Result<(), QueueError> {
        if self.sweep.is_some() {
            return Err(QueueError::Busy);
        }
        let mut filter = vec![super::status_is("PartSet")];
        if let Some(after) = &self.sweep_after {
            filter.push(Condition::new(
                crate::store::FieldPath::from_static("id"),
                Compare::Gt,
                Value::String(after.as_str().to_string()),
            ));
        }
        let query = Query {
            filter,
            order_by: None,
            limit: Some(max),
            ..self.query()
        };
        self.sweep = Some(SweepRun {
            open: 1,
            read: 0,
            swept: 0,
        });
        let pending = Pending::SweepScan {
            after: self.sweep_after.clone(),
            max,
        };
        self.send(QueueIntent::Sweep, None, Op::Query(query), pending);
        Ok(())
    }

    /// The heads are read: each one seen unchanged long enough is checked.
    pub(super) fn heads_read(
        &mut self,
        after: Option<DocId>,
        max: usize,
        result: Result<Reply<Message>, StoreError>,
    ) {
        let Ok(Reply::Query(heads)) = result else {
            self.sweep_settled(false);
            return;
        };
        // The next sweep goes on after the last head read, and starts over once a
        // read comes back short.
        let last = heads.last().map(|h| h.doc.id.clone());
        self.sweep_after = if heads.len() < max {
            None
        } else {
            last.clone()
        };
        let present: Vec<DocId> = heads.iter().map(|h| h.doc.id.clone()).collect();
        let through = last.filter(|_| heads.len() >= max);
        self.part_sets
            .forget_sightings_between(after.as_ref(), through.as_ref(), &present);
        let Some(large) = self.config.large else {
            self.sweep_settled(false);
            return;
        };
        let policy = self.sweep_policy();
        let now = self.now;
        let mut checks = Vec::new();
        for head in heads {
            let MessageState::PartSet {
                sweeping, named_by, ..
            } = &head.doc.state
            else {
                continue;
            };
            if *sweeping {
                checks.push((head, Judged::Marked));
                continue;
            }
            let judged = match named_by {
                // Named: not left behind, however long it stays unchanged.
                Naming::By(_) => continue,
                Naming::Nobody => Judged::Unnamed,
                Naming::Unrecorded => Judged::Unrecorded,
            };
            let first = self.part_sets.sight(&head.doc.id, &head.etag, now.local);
            if policy.is_expired(large.orphan_after, first, head.doc.created, now) {
                checks.push((head, judged));
            }
        }
        if let Some(run) = &mut self.sweep {
            run.read += present.len();
            run.open += checks.len();
        }
        for (head, judged) in checks {
            match judged {
                Judged::Marked => self.sweep_marked(head.doc, head.etag),
                Judged::Unnamed => self.mark(head),
                Judged::Unrecorded => self.check_references(head),
            }
        }
        self.sweep_settled(false);
    }

    /// Asks whether any message names the set: the live one or a dead letter.
    fn check_references(&mut self, head: Stored<Message>) {
        let MessageState::PartSet { set, .. } = &head.doc.state else {
            self.sweep_settled(false);
            return;
        };
        let query = Query {
            prefix: format!("{}{}", self.config.queue.prefix(), head.doc.name),
            filter: vec![
                Condition::new(
                    Message::NAME,
                    Compare::Eq,
                    Value::String(head.doc.name.as_str().to_string()),
                ),
                Condition::new(
                    Message::PARTS_SET,
                    Compare::Eq,
                    Value::String(set.as_str().to_string()),
                ),
            ],
            order_by: None,
            limit: Some(1),
            ..self.query()
        };
        self.send(
            QueueIntent::Sweep,
            None,
            Op::Query(query),
            Pending::SweepCheck(head),
        );
    }

    /// The references are read: a set no message names is marked.
    pub(super) fn references_read(
        &mut self,
        head: Stored<Message>,
        result: Result<Reply<Message>, StoreError>,
    ) {
        let Ok(Reply::Query(found)) = result else {
            self.sweep_settled(false);
            return;
        };
        if !found.is_empty() {
            self.sweep_settled(false);
            return;
        }
        self.mark(head);
    }

    /// Marks a head that nothing names, with if-match on the version judged: it
    /// fences off every later write of its producer.
    fn mark(&mut self, head: Stored<Message>) {
        let Stored { mut doc, etag } = head;
        if let MessageState::PartSet { sweeping, .. } = &mut doc.state {
            *sweeping = true;
        }
        let op = Op::Replace {
            doc: doc.clone(),
            if_match: Some(etag),
        };
        self.send(QueueIntent::Sweep, None, op, Pending::SweepMark(doc));
    }

    /// The mark is answered: a marked set is deleted.
    pub(super) fn mark_answered(
        &mut self,
        head: Message,
        result: Result<Reply<Message>, StoreError>,
    ) {
        match result {
            Ok(Reply::Replaced(etag)) => self.sweep_marked(head, etag),
            // Changed since it was read (its producer wrote, or another sweep marked
            // it): the next sweep looks again.
            _ => self.sweep_settled(false),
        }
    }

    /// Deletes a marked set: no message names it, and none can any more.
    fn sweep_marked(&mut self, head: Message, etag: Etag) {
        let MessageState::PartSet { set, count, .. } = head.state else {
            self.sweep_settled(false);
            return;
        };
        self.part_sets.forget_sighting(&head.id);
        if self.cleanups.contains_key(&set) {
            self.sweep_settled(false);
            return;
        }
        self.delete_parts(&head.name, &set, count, Some(etag), true);
    }

    /// One of the sweep's threads ended (`swept`: a set was removed); the sweep
    /// finishes with the last.
    fn sweep_settled(&mut self, swept: bool) {
        let Some(run) = &mut self.sweep else { return };
        run.open = run.open.saturating_sub(1);
        run.swept += usize::from(swept);
        if run.open == 0 {
            let run = self.sweep.take().expect("checked above");
            self.out.push_back(Output::SweepFinished {
                read: run.read,
                swept: run.swept,
            });
        }
    }
}

/// The head's new etag in a part's or the manifest's batch reply.
fn head_etag_of(result: &Result<Reply<Message>, StoreError>) -> Option<Etag> {
    match result {
        Ok(Reply::Batch(response)) => response.outcomes.get(1).and_then(|o| o.etag.clone()),
        _ => None,
    }
}
