//! A client's atomic step: the engine's synchronous loop runs its machine, and the
//! world serves each request it sends at once, except the one a fault hits.

use super::Locking;
use super::{
    Budget, Fault, Rules, Serve, State, THROTTLE_RETRY_AFTER_MS, answer, apply, faulted, note, now,
    reader, stale_choice,
};
use leasehold_engine::DocId;
use leasehold_engine::drive::{self, Driver, Stepped};
use leasehold_engine::lock::LockToken;
use leasehold_engine::store::StoreError;
use leasehold_engine::{Machine, Millis, Request, StoreClient};
use std::collections::VecDeque;

type Input<R> = <<R as Rules>::M as Machine>::Input;
type Output<R> = <<R as Rules>::M as Machine>::Output;
type Sent<R> =
    Request<<<R as Rules>::M as StoreClient>::Doc, <<R as Rules>::M as StoreClient>::Intent>;

/// Runs client `c` on `first` until it has nothing left to do, serving its requests
/// at once except the one `fault` names. `None` if the step sent no request the fault
/// can hit, so that every action that exists changes the world.
pub fn run<R: Rules>(
    rules: &R,
    world: &mut State<R>,
    c: u8,
    first: Vec<Input<R>>,
    fault: Option<Fault>,
    journal: &mut Option<Vec<String>>,
) -> Option<()> {
    run_with(rules, world, c, first, fault.as_slice(), journal)
}

/// What a call of a handler that overran its authority did, made under the lock it
/// kept (`token`, on document `id`).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct KeptCall {
    /// It changed a lock its client holds under another token: it acted on a later
    /// delivery or lease, another handler's.
    pub crossed: bool,
    /// Its client held `id` under a later lock when the call came.
    pub later: bool,
}

/// Runs client `c` on the call `input` of its overrun handler, made under the lock
/// `token` on `id`, and judges it from the client's locks before and after.
pub fn run_kept<R: Rules>(
    rules: &R,
    world: &mut State<R>,
    c: u8,
    input: Input<R>,
    (id, token): (&DocId, &LockToken),
    fault: Option<Fault>,
    journal: &mut Option<Vec<String>>,
) -> Option<KeptCall>
where
    R::M: Locking,
{
    let before = world.clients[usize::from(c)]
        .engine
        .as_ref()?
        .locks()
        .clone();
    run(rules, world, c, vec![input], fault, journal)?;
    let after = world.clients[usize::from(c)]
        .engine
        .as_ref()
        .map(|e| e.locks());
    let crossed = before
        .all_held()
        .filter(|(_, h)| h.token != *token)
        .any(|(held, h)| after.and_then(|a| a.held(held)) != Some(h));
    let later = before.held(id).is_some_and(|h| h.token != *token);
    Some(KeptCall { crossed, later })
}

/// [`run`] with any number of faults, each on its own request: `None` unless every
/// one of them hits a request (a request two of them name takes the first).
pub fn run_with<R: Rules>(
    rules: &R,
    world: &mut State<R>,
    c: u8,
    first: Vec<Input<R>>,
    faults: &[Fault],
    journal: &mut Option<Vec<String>>,
) -> Option<()> {
    let mut step = Step {
        budget: rules.budget(),
        rules,
        world,
        c,
        faults,
        journal,
        writes: 0,
        reads: 0,
        sent: 0,
        side: 0,
        hits: 0,
        requests: Vec::new(),
        void: false,
    };
    // A refused input changes nothing but the clock, and the memo of transitions
    // keeps outputs only: the model treats a refusal as an input that did nothing.
    drive::feed(&mut step, first).ok()?;
    if step.void {
        return None;
    }
    let Step { world, hits, .. } = step;
    if let Some(engine) = world.clients[usize::from(c)].engine.as_mut() {
        engine.seal();
    }
    (hits == faults.len()).then_some(())
}

/// One client's step as the engine's loop drives it: what it counts to find the
/// request each fault names.
struct Step<'a, R: Rules> {
    rules: &'a R,
    world: &'a mut State<R>,
    c: u8,
    faults: &'a [Fault],
    journal: &'a mut Option<Vec<String>>,
    budget: Budget,
    writes: u8,
    reads: u8,
    sent: u8,
    side: u8,
    hits: usize,
    /// The requests of the input being routed, served once every other output of it
    /// is handled.
    requests: Vec<Sent<R>>,
    /// A fault named a choice that does not exist: the step is no action.
    void: bool,
}

impl<R: Rules> Driver<R::M> for Step<'_, R> {
    fn step(&mut self, input: Input<R>) -> Option<Stepped<R::M>> {
        if self.void {
            return None;
        }
        let now = now(&self.budget, self.world, self.c);
        let engine = self.world.clients[usize::from(self.c)].engine.as_mut()?;
        let outputs = engine.handle(self.rules.transitions(), now, input);
        Some(Stepped {
            outputs,
            refused: None,
        })
    }

    fn send(&mut self, request: Sent<R>, _next: &mut VecDeque<Input<R>>) {
        self.requests.push(request);
    }

    // What the engine tells its driver is handled before its requests go out, as a
    // driver that reacts to each output at once would: a handler that stops at once
    // reports it before the replies come back.
    fn output(&mut self, other: Output<R>, next: &mut VecDeque<Input<R>>) {
        let mut fails = false;
        if self.rules.fallible(&other) {
            let nth = self.side;
            self.side += 1;
            let hit = self
                .faults
                .iter()
                .copied()
                .find(|f| *f == Fault::SideFails(nth));
            if let Some(f) = hit {
                fails = true;
                self.hits += 1;
                faulted(self.world, f);
            }
        }
        next.extend(
            self.rules
                .output(self.world, self.c, other, fails, self.journal),
        );
    }

    fn routed(&mut self, next: &mut VecDeque<Input<R>>) {
        let requests = std::mem::take(&mut self.requests);
        if self.world.clients[usize::from(self.c)].cut {
            let (who, c) = (R::ACTOR, self.c);
            for req in requests {
                note(self.journal, || {
                    format!(
                        "{who}{c} sends {}: it never arrives (CUT OFF), a timeout",
                        self.rules.describe(&req)
                    )
                });
                next.push_back(R::M::response(req.id, Err(StoreError::Timeout)));
            }
            return;
        }
        for req in requests {
            if self.serve(req, next).is_none() {
                self.void = true;
                return;
            }
        }
    }
}

impl<R: Rules> Step<'_, R> {
    /// Serves one request as the fault that names it (if any) says; `None` if that
    /// fault names a choice that does not exist.
    fn serve(&mut self, mut req: Sent<R>, next: &mut VecDeque<Input<R>>) -> Option<()> {
        let (rules, c, who) = (self.rules, self.c, R::ACTOR);
        let write = req.op.is_write();
        let counter = if write {
            &mut self.writes
        } else {
            &mut self.reads
        };
        let nth = *counter;
        *counter += 1;
        // Keyed as `World::refused` keys it: sender, its life, document, etag.
        let life = req.id.incarnation.0 as u8;
        let refusable = (req.op.conditional_on()).map(|(doc, etag)| (c, life, doc, etag.clone()));
        if let Some(key) = &refusable
            && self.world.refused.contains(key)
        {
            self.world.rewrote_refused = true;
        }
        let nth_sent = self.sent;
        self.sent += 1;
        let id = req.id;
        if !write && self.world.clients[usize::from(c)].throttled {
            note(self.journal, || {
                format!(
                    "{who}{c} sends {}: THROTTLED, answered 429 unserved",
                    rules.describe(&req)
                )
            });
            let retry_after = Millis(THROTTLE_RETRY_AFTER_MS);
            next.push_back(R::M::response(
                id,
                Err(StoreError::Throttled { retry_after }),
            ));
            return Some(());
        }
        let this = self.faults.iter().copied().find(|f| match *f {
            Fault::Hold(n) | Fault::LoseReply(n) | Fault::Retried(n) => write && n == nth,
            Fault::LateReply(n) => n == nth_sent,
            Fault::Stale { read, .. } => !write && read == nth,
            Fault::SideFails(_) => false,
        });
        let world = &mut *self.world;
        let mut heard_refused = false;
        match this {
            Some(Fault::Hold(_)) => {
                note(self.journal, || {
                    format!("{who}{c} sends {}: HELD on the wire", rules.describe(&req))
                });
                world.net.insert((c, id), req);
            }
            Some(Fault::LoseReply(_)) => {
                let applied = apply(rules, world, c, &mut req, Serve::Fresh);
                rules.reply_lost(world, &applied);
                note(self.journal, || {
                    format!(
                        "{who}{c} sends {}: {}, but the REPLY IS LOST",
                        rules.describe(&req),
                        answer(&applied)
                    )
                });
                next.push_back(R::M::response(id, Err(StoreError::Timeout)));
            }
            Some(Fault::Retried(_)) => {
                let applied = apply(rules, world, c, &mut req, Serve::Fresh);
                rules.reply_lost(world, &applied);
                let again = apply(rules, world, c, &mut req, Serve::Fresh);
                note(self.journal, || {
                    format!(
                        "{who}{c} sends {}: {}, the reply is lost, and the SDK's RETRY \
                         answers {}",
                        rules.describe(&req),
                        answer(&applied),
                        answer(&again)
                    )
                });
                heard_refused = matches!(again, Err(StoreError::PreconditionFailed));
                next.push_back(R::M::response(id, again));
            }
            Some(Fault::LateReply(_)) => {
                let result = apply(rules, world, c, &mut req, Serve::Fresh);
                note(self.journal, || {
                    format!(
                        "{who}{c} sends {}: {}, but the REPLY IS HELD on the way back",
                        rules.describe(&req),
                        answer(&result)
                    )
                });
                world.replies.insert((c, id), (result, req.lock.clone()));
            }
            Some(Fault::Stale { choice, .. }) => {
                let reader = reader(c, id.incarnation.0);
                let options = world.store.options(reader, &req.op);
                let (doc, back) = stale_choice(&options, choice)?;
                let doc = doc.clone();
                let result = apply(rules, world, c, &mut req, Serve::Stale(&doc, back));
                note(self.journal, || {
                    format!(
                        "{who}{c} sends {}: {}, served by a LAGGING replica: {doc} as it \
                         was {back} write{} ago",
                        rules.describe(&req),
                        answer(&result),
                        if back == 1 { "" } else { "s" }
                    )
                });
                next.push_back(R::M::response(id, result));
            }
            None | Some(Fault::SideFails(_)) => {
                let result = apply(rules, world, c, &mut req, Serve::Fresh);
                note(self.journal, || {
                    format!(
                        "{who}{c} sends {}: {}",
                        rules.describe(&req),
                        answer(&result)
                    )
                });
                heard_refused = matches!(result, Err(StoreError::PreconditionFailed));
                next.push_back(R::M::response(id, result));
            }
        }
        if let Some(f) = this {
            self.hits += 1;
            faulted(self.world, f);
        }
        // A refused version can be shown again only by a stale read or by the late
        // reply of a read sent before the write: once neither can come, no later
        // read shows one, but one already shown may still be acted on, so what was
        // recorded stays.
        let world = &mut *self.world;
        let shown_again = world.stale_reads < self.budget.stale_reads
            || world.late_replies < self.budget.late_replies
            || !world.replies.is_empty();
        if let (true, true, Some(key)) = (heard_refused, shown_again, refusable) {
            world.refused.insert(key);
        }
        Some(())
    }
}
