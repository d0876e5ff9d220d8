//! The documents of a lease container: one lease per partition, and (for strategies
//! that need to know who is alive) one heartbeat per host.

use super::Liveness;
use crate::expiry::Terms;
use crate::ids::{Checkpoint, DocId, Epoch, HostId, Incarnation, LeaseToken, PartitionKey, Tenure};
use crate::store::{Document, FieldPath, Value, json_field, json_size};
use crate::time::WallTime;
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;

/// One partition's lease. Field names on the wire follow the change feed processor
/// where it has the field.
#[derive(Clone, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub struct LeaseDocument {
    /// The document id: the processor group's prefix, `..`, then the token.
    pub id: DocId,
    /// The partition this lease covers.
    #[serde(rename = "LeaseToken")]
    pub token: LeaseToken,
    /// The host that owns the lease, if any.
    #[serde(rename = "Owner", default)]
    pub owner: Option<HostId>,
    /// Bumped on every change of owner.
    #[serde(rename = "Epoch", default)]
    pub epoch: Epoch,
    /// How far the partition has been processed.
    #[serde(rename = "ContinuationToken", default)]
    pub checkpoint: Option<Checkpoint>,
    /// Free-form properties, kept across every write.
    #[serde(default)]
    pub properties: BTreeMap<String, String>,
    /// The last writer's wall clock, for CFP's timestamp expiry rule.
    pub timestamp: WallTime,
    /// An earlier owner may still be within its authority: whoever owns this version
    /// must wait out one expiry of it before processing. Set when a lease is taken
    /// before it expired (a steal), cleared once that wait is over.
    #[serde(rename = "Fenced", default)]
    pub fenced: bool,
    /// Under session liveness, the owner's tenure that holds this lease: the lease is
    /// live exactly while that tenure's heartbeat is. Absent under lease liveness,
    /// so the document keeps the change feed processor's shape.
    #[serde(
        rename = "OwnerTenure",
        default,
        skip_serializing_if = "Option::is_none"
    )]
    pub owner_tenure: Option<Tenure>,
    /// Set by the owner once the partition's range has split: the children that
    /// replace it. A lease so marked is never processed again; whoever owns it
    /// creates the children, each from this lease's checkpoint, and then deletes it.
    #[serde(rename = "SplitInto", default, skip_serializing_if = "Vec::is_empty")]
    pub split_into: Vec<LeaseToken>,
    /// The leases this one descends from by splits, oldest first: a host never
    /// recreates a configured partition named here, whose range its descendants
    /// cover.
    #[serde(rename = "SplitFrom", default, skip_serializing_if = "Vec::is_empty")]
    pub split_from: Vec<LeaseToken>,
    /// Set, with the owner cleared, once every child's lease exists: the split is
    /// finished, and this lease is kept only so that its id is never created again.
    /// A marked lease merely released (its owner shut down mid-split) is not done:
    /// whoever takes it next finishes the split.
    #[serde(rename = "SplitDone", default, skip_serializing_if = "is_false")]
    pub split_done: bool,
    /// The expiry terms its last writer held it under. A reader waits out the
    /// longer of these and its own; absent in the change feed processor's documents.
    #[serde(rename = "Terms", default, skip_serializing_if = "Option::is_none")]
    pub terms: Option<Terms>,
    /// The liveness its last writer ran: a host under lease liveness cannot judge a
    /// lease held under session liveness, whose document is not renewed.
    #[serde(rename = "Liveness", default, skip_serializing_if = "Option::is_none")]
    pub liveness: Option<Liveness>,
    /// The life of the owner this version was written for: the writer's own, when
    /// it takes, renews or creates the lease in its name; the recipient's, as its
    /// heartbeat showed it, when a handoff gives it away; none when nobody owns it.
    /// A name and an epoch do not identify a writer: two lives of one name (a zombie
    /// and its replacement) may both write that name at one epoch, and only the life
    /// named here may process this version without first waiting it out.
    /// Earlier releases wrote it on handoffs only, as `HandedTo`, which still reads.
    #[serde(
        rename = "OwnerLife",
        alias = "HandedTo",
        default,
        skip_serializing_if = "Option::is_none"
    )]
    pub owner_life: Option<Incarnation>,
}

fn is_false(b: &bool) -> bool {
    !*b
}

impl LeaseDocument {
    /// The document id of `token`'s lease in processor group `prefix`.
    pub fn id_for(prefix: &str, token: &LeaseToken) -> DocId {
        DocId::from(format!("{prefix}..{token}"))
    }

    /// Whether this document's id is the one [`id_for`](Self::id_for) gives its
    /// token in group `prefix` (a scan by prefix also lists longer groups' documents).
    ///
    /// ```
    /// use leasehold_engine::lease::LeaseDocument;
    /// use leasehold_engine::{LeaseToken, WallTime};
    ///
    /// let doc = LeaseDocument::new("orders-eu.", LeaseToken::from("7"), WallTime(0));
    /// assert!(doc.has_own_id("orders-eu."));
    /// assert!(!doc.has_own_id("orders"));
    /// ```
    pub fn has_own_id(&self, prefix: &str) -> bool {
        // Bytes, not `str`: a scan checks every lease of the table, and `as_str`
        // re-checks UTF-8 each time.
        let rest = self.id.as_bytes().strip_prefix(prefix.as_bytes());
        rest.and_then(|r| r.strip_prefix(b"..")) == Some(self.token.as_bytes())
    }

    /// A fresh, unowned lease at epoch 0 with no checkpoint.
    pub fn new(prefix: &str, token: LeaseToken, now: WallTime) -> LeaseDocument {
        LeaseDocument {
            id: Self::id_for(prefix, &token),
            token,
            owner: None,
            epoch: Epoch(0),
            checkpoint: None,
            properties: BTreeMap::new(),
            timestamp: now,
            fenced: false,
            owner_tenure: None,
            split_into: Vec::new(),
            split_from: Vec::new(),
            split_done: false,
            terms: None,
            liveness: None,
            owner_life: None,
        }
    }

    /// The unowned lease of `child`, one of the ranges this (marked) lease split
    /// into: it resumes from this lease's checkpoint and keeps its properties.
    ///
    /// ```
    /// use leasehold_engine::lease::LeaseDocument;
    /// use leasehold_engine::{Checkpoint, LeaseToken, WallTime};
    ///
    /// let mut parent = LeaseDocument::new("g", LeaseToken::from("0"), WallTime(0));
    /// parent.checkpoint = Some(Checkpoint::from("42"));
    /// let child = parent.child(LeaseToken::from("0a"), WallTime(5));
    /// assert_eq!(child.checkpoint, parent.checkpoint);
    /// assert_eq!(child.split_from, [LeaseToken::from("0")]);
    /// assert!(child.owner.is_none());
    /// ```
    pub fn child(&self, child: LeaseToken, now: WallTime) -> LeaseDocument {
        let prefix = self
            .id
            .as_str()
            .strip_suffix(self.token.as_str())
            .and_then(|p| p.strip_suffix(".."))
            .unwrap_or_default();
        let mut doc = LeaseDocument::new(prefix, child, now);
        doc.checkpoint = self.checkpoint.clone();
        doc.properties = self.properties.clone();
        doc.split_from = self.split_from.clone();
        doc.split_from.push(self.token.clone());
        doc
    }

    /// Whether this lease is a finished split: every child's lease exists, and it was
    /// given up for good. It is no partition any more.
    pub fn is_finished_split(&self) -> bool {
        self.split_done && !self.split_into.is_empty()
    }

    /// Whether `host` owns this lease.
    pub fn is_owned_by(&self, host: &HostId) -> bool {
        self.owner.as_ref() == Some(host)
    }

    /// Marks this version as written under `terms` and `liveness`. A fenced version
    /// keeps the wider of `terms` and those it carries: the fence is owed to an
    /// earlier holder, and whoever inherits it from the document (a later life of
    /// this owner, a host it is released to) must wait out that holder's terms, not
    /// only the writer's (the swarm's rolling-restart seed 2234772: a deploy that
    /// shortened the lease, a steal, and a restart of the thief).
    ///
    /// ```
    /// use leasehold_engine::lease::{LeaseDocument, Liveness};
    /// use leasehold_engine::{Drift, LeaseToken, Millis, Terms, WallTime};
    ///
    /// let terms = |s| Terms { duration: Millis::from_secs(s), drift: Drift::ppm(10_000) };
    /// let mut doc = LeaseDocument::new("g", LeaseToken::from("0"), WallTime(0));
    /// doc.stamp(terms(60), Liveness::Lease);
    /// // Stolen by a host of a build with a shorter lease: the fence keeps 60 s.
    /// doc.fenced = true;
    /// doc.stamp(terms(35), Liveness::Lease);
    /// assert_eq!(doc.terms, Some(terms(60)));
    /// // Once the fence has passed, the owner's own terms.
    /// doc.fenced = false;
    /// doc.stamp(terms(35), Liveness::Lease);
    /// assert_eq!(doc.terms, Some(terms(35)));
    /// ```
    pub fn stamp(&mut self, terms: Terms, liveness: Liveness) {
        self.terms = Some(if self.fenced {
            terms.widest(self.terms)
        } else {
            terms
        });
        self.liveness = Some(liveness);
    }
}

/// A host's heartbeat, so that hosts which own nothing yet are still counted, and the
/// leases it claims for a handoff.
///
/// Claims live here rather than on the lease documents on purpose: a write to a lease
/// would change its etag, restarting every observer's expiry wait (a claim on a
/// crashed owner's lease would postpone its takeover by a whole expiry) and failing
/// the owner's next renewal. Only owners and takers ever write a lease.
#[derive(Clone, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub struct HostDocument {
    /// The document id: the processor group's prefix, `.host.`, then the host name.
    pub id: DocId,
    /// The host this heartbeat belongs to.
    #[serde(rename = "HostId")]
    pub host: HostId,
    /// The host's wall clock at its last heartbeat.
    pub timestamp: WallTime,
    /// Leases this host asks their owners to hand over to it.
    #[serde(rename = "Claims", default)]
    pub claims: Vec<LeaseToken>,
    /// Under session liveness, the tenure this heartbeat vouches for.
    #[serde(rename = "Tenure", default, skip_serializing_if = "Option::is_none")]
    pub tenure: Option<Tenure>,
    /// Set when another host fenced this tenure before taking its leases: the
    /// tenure is over, and its host's next renewal fails on the changed etag.
    #[serde(rename = "FencedBy", default, skip_serializing_if = "Option::is_none")]
    pub fenced_by: Option<HostId>,
    /// How many splits this life of the host has finished. A change tells the other
    /// hosts to read the lease table, where the children's leases are: under session
    /// liveness they read only the heartbeats otherwise.
    #[serde(rename = "Splits", default, skip_serializing_if = "is_zero")]
    pub splits: u64,
    /// How many leases this life of the host gave away without a claim: a stuck
    /// call's lease, handed to its successor once the stop timeout passed. A change
    /// tells the other hosts to read the lease table. The recipient is not waiting
    /// for the lease, and the count of the giver's leases tells it only while its
    /// view of the table and of the members agrees with the giver's (the swarm's
    /// seeds 5005496 and 5011530).
    #[serde(rename = "Gifts", default, skip_serializing_if = "is_zero")]
    pub gifts: u64,
    /// Under session liveness, how many leases the host held in this tenure when it
    /// wrote this heartbeat. Another host whose view of the table gives it fewer
    /// while this count is over any fair share reads the table again: a read that
    /// came from a lagging replica is otherwise believed until the audit.
    #[serde(rename = "Owned", default, skip_serializing_if = "Option::is_none")]
    pub owned: Option<u32>,
    /// Under session liveness, how many lease documents of the group the host's view
    /// of the table held when it wrote this heartbeat. Leases are only ever created,
    /// so another host whose view holds fewer has missed some, and reads the table
    /// again: a lease it missed, which its peers' plans give to it, is otherwise
    /// taken by nobody until its audit.
    #[serde(rename = "Leases", default, skip_serializing_if = "Option::is_none")]
    pub leases: Option<u32>,
    /// The expiry terms its writer renews it under: under session liveness, the
    /// terms of every lease its tenure holds. A reader waits out the longer of these
    /// and its own.
    #[serde(rename = "Terms", default, skip_serializing_if = "Option::is_none")]
    pub terms: Option<Terms>,
    /// The liveness its writer runs.
    #[serde(rename = "Liveness", default, skip_serializing_if = "Option::is_none")]
    pub liveness: Option<Liveness>,
    /// The writer's life: a handoff names it in the lease it hands over, so that
    /// only this life, and not another under the same name, takes the lease as its
    /// own at once.
    #[serde(rename = "Life", default, skip_serializing_if = "Option::is_none")]
    pub life: Option<Incarnation>,
    /// Its host is shutting down and will release its leases soon: the others read
    /// this heartbeat often until it is gone, so that they take those leases within a
    /// read of their release rather than at their next interval.
    #[serde(rename = "Leaving", default, skip_serializing_if = "is_false")]
    pub leaving: bool,
}

fn is_zero(n: &u64) -> bool {
    *n == 0
}

impl HostDocument {
    /// A heartbeat of `host` in processor group `prefix`, claiming nothing.
    pub fn new(prefix: &str, host: HostId, now: WallTime) -> HostDocument {
        HostDocument {
            id: Self::id_for(prefix, &host),
            host,
            timestamp: now,
            claims: Vec::new(),
            tenure: None,
            fenced_by: None,
            splits: 0,
            gifts: 0,
            owned: None,
            leases: None,
            terms: None,
            liveness: None,
            life: None,
            leaving: false,
        }
    }
}

impl HostDocument {
    /// Whether this version still vouches for the tenure it names: it names one, and
    /// no fencer has ended it.
    pub fn vouches_for_tenure(&self) -> bool {
        self.tenure.is_some() && self.fenced_by.is_none()
    }

    /// Marks this version as written under `terms` and `liveness`.
    pub fn stamp(&mut self, terms: Terms, liveness: Liveness) {
        self.terms = Some(terms);
        self.liveness = Some(liveness);
    }

    /// The document id of `host`'s heartbeat in processor group `prefix`.
    pub fn id_for(prefix: &str, host: &HostId) -> DocId {
        DocId::from(format!("{}{host}", Self::id_prefix(prefix)))
    }

    /// What the id of every heartbeat of group `prefix` starts with: one read by
    /// this prefix lists the group's members without its leases.
    ///
    /// ```
    /// use leasehold_engine::lease::HostDocument;
    /// use leasehold_engine::HostId;
    ///
    /// let id = HostDocument::id_for("orders", &HostId::from("h1"));
    /// assert!(id.as_str().starts_with(&HostDocument::id_prefix("orders")));
    /// ```
    pub fn id_prefix(prefix: &str) -> String {
        format!("{prefix}.host.")
    }

    /// Whether this document's id is the one [`id_for`](Self::id_for) gives its host
    /// in group `prefix`; it allocates nothing, as every scan checks every heartbeat.
    ///
    /// ```
    /// use leasehold_engine::lease::HostDocument;
    /// use leasehold_engine::{HostId, WallTime};
    ///
    /// let doc = HostDocument::new("orders", HostId::from("h1"), WallTime(0));
    /// assert!(doc.has_own_id("orders"));
    /// assert!(!doc.has_own_id("order"));
    /// ```
    pub fn has_own_id(&self, prefix: &str) -> bool {
        let rest = self.id.as_bytes().strip_prefix(prefix.as_bytes());
        rest.and_then(|r| r.strip_prefix(b".host.")) == Some(self.host.as_bytes())
    }
}

/// A document of the lease container.
#[derive(Clone, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(untagged)]
pub enum Record {
    /// A partition's lease.
    Lease(LeaseDocument),
    /// A host's heartbeat.
    Host(HostDocument),
}

impl Record {
    /// What the id of every document of group `prefix` starts with: its leases
    /// (`prefix..token`) and heartbeats (`prefix.host.name`). A read by it leaves out
    /// the documents of another group whose name merely begins with this one's
    /// (`orders-eu` beside `orders`), which a read by the bare name would pay for.
    ///
    /// ```
    /// use leasehold_engine::lease::{HostDocument, LeaseDocument, Record};
    /// use leasehold_engine::{HostId, LeaseToken};
    ///
    /// let group = Record::group_prefix("orders");
    /// assert!(LeaseDocument::id_for("orders", &LeaseToken::from("3")).as_str().starts_with(&group));
    /// assert!(HostDocument::id_for("orders", &HostId::from("h1")).as_str().starts_with(&group));
    /// assert!(!LeaseDocument::id_for("orders-eu", &LeaseToken::from("3")).as_str().starts_with(&group));
    /// ```
    pub fn group_prefix(prefix: &str) -> String {
        format!("{prefix}.")
    }

    /// Marks this version as written under `terms` and `liveness`.
    pub fn stamp(&mut self, terms: Terms, liveness: Liveness) {
        match self {
            Record::Lease(doc) => doc.stamp(terms, liveness),
            Record::Host(doc) => doc.stamp(terms, liveness),
        }
    }

    /// The lease, if this is one.
    ///
    /// ```
    /// use leasehold_engine::lease::{LeaseDocument, Record};
    /// use leasehold_engine::{LeaseToken, WallTime};
    ///
    /// let doc = LeaseDocument::new("orders", LeaseToken::from("3"), WallTime(0));
    /// assert_eq!(Record::Lease(doc.clone()).as_lease(), Some(&doc));
    /// ```
    pub fn as_lease(&self) -> Option<&LeaseDocument> {
        match self {
            Record::Lease(doc) => Some(doc),
            Record::Host(_) => None,
        }
    }
}

impl Document for Record {
    const PARTITION_KEY_PATH: &'static str = "/id";

    fn id(&self) -> &DocId {
        match self {
            Record::Lease(doc) => &doc.id,
            Record::Host(doc) => &doc.id,
        }
    }

    /// Lease containers are partitioned by `/id`, as the change feed processor's are.
    fn partition_key(&self) -> PartitionKey {
        PartitionKey::new(self.id().as_str())
    }

    fn stored_size(&self) -> usize {
        json_size(self)
    }

    fn field(&self, path: &FieldPath) -> Option<Value> {
        json_field(self, path)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_lease_document_round_trips_through_json_with_cfp_field_names() {
        let mut doc = LeaseDocument::new("grp", LeaseToken::from("3"), WallTime(42));
        doc.owner = Some(HostId::from("a"));
        doc.checkpoint = Some(Checkpoint::from("\"17\""));
        let json = serde_json::to_value(Record::Lease(doc.clone())).unwrap();
        assert_eq!(json["id"], "grp..3");
        assert_eq!(json["LeaseToken"], "3");
        assert_eq!(json["Owner"], "a");
        assert_eq!(json["ContinuationToken"], "\"17\"");
        let back: Record = serde_json::from_value(json).unwrap();
        assert_eq!(back, Record::Lease(doc));
    }

    #[test]
    fn an_owned_lease_names_its_owners_life_and_a_heartbeat_names_its_writers() {
        let mut doc = LeaseDocument::new("grp", LeaseToken::from("3"), WallTime(42));
        let json = serde_json::to_value(Record::Lease(doc.clone())).unwrap();
        assert!(
            json.get("OwnerLife").is_none(),
            "the CFP shape has no such key"
        );
        doc.owner_life = Some(Incarnation(7));
        let json = serde_json::to_value(Record::Lease(doc.clone())).unwrap();
        assert_eq!(json["OwnerLife"], 7);
        assert_eq!(
            serde_json::from_value::<Record>(json).unwrap(),
            Record::Lease(doc.clone())
        );
        // An earlier release's handoff named the recipient's life as `HandedTo`.
        let mut json = serde_json::to_value(Record::Lease(doc.clone())).unwrap();
        let life = json.as_object_mut().unwrap().remove("OwnerLife").unwrap();
        json["HandedTo"] = life;
        assert_eq!(
            serde_json::from_value::<Record>(json).unwrap(),
            Record::Lease(doc)
        );
        let mut beat = HostDocument::new("grp", HostId::from("h1"), WallTime(1));
        beat.life = Some(Incarnation(7));
        let json = serde_json::to_value(Record::Host(beat.clone())).unwrap();
        assert_eq!(json["Life"], 7);
        assert_eq!(
            serde_json::from_value::<Record>(json).unwrap(),
            Record::Host(beat)
        );
    }

    #[test]
    fn a_heartbeat_is_told_apart_from_a_lease() {
        let mut heartbeat = HostDocument::new("grp", HostId::from("h1"), WallTime(1));
        heartbeat.claims.push(LeaseToken::from("4"));
        let beat = Record::Host(heartbeat);
        let json = serde_json::to_string(&beat).unwrap();
        assert_eq!(serde_json::from_str::<Record>(&json).unwrap(), beat);
    }

    #[test]
    fn the_stored_size_is_the_json_length() {
        let doc = Record::Lease(LeaseDocument::new("p", LeaseToken::from("0"), WallTime(0)));
        assert_eq!(doc.stored_size(), serde_json::to_vec(&doc).unwrap().len());
    }
}
