//! Sharding: every replica reconciles the Runs of some buckets
//! ([`names::bucket_of`]), so agent-heavy loads that hold calls open in the
//! controller are spread over replicas instead of waiting on one.
//!
//! Who holds which bucket is written in one Lease, the *bucket map*
//! (`<lease>-buckets`, annotation [`MAP_ANNOTATION`]: 64 holder names), and
//! each replica proves it is alive with a *member* Lease of its own
//! (`<lease>-member-<hash of its identity>`) that it renews every third of
//! the Lease duration. Renewing one Lease per replica instead of one per
//! bucket keeps the cost at `replicas / (duration / 3)` writes a second
//! (0.4/s for 2 replicas at 15 s) instead of 64 / 5 s; the map is written
//! only when a bucket changes hands.
//!
//! The rules, each replica applying them at every tick:
//! - a replica acts on a bucket while the map names it and its own last
//!   successful renewal was sent less than two thirds of the duration ago;
//!   past that it stops acting on every bucket at once;
//! - a bucket named for a replica whose member Lease did not change for a
//!   whole duration (as this replica observed it, by its own clock), or has
//!   no member Lease, is free: the holder stopped acting a third of the
//!   duration before anyone can take it;
//! - each replica takes free buckets up to `ceil(64 / live replicas)`;
//! - a replica holding more than that stops acting on the extra ones,
//!   waits until nothing of them is being reconciled here, and only then
//!   frees them in the map (a voluntary hand-over never overlaps). It
//!   gives up idle buckets first: one with work held in this process (a
//!   call in flight, a result not yet written) only after it has been
//!   over its share for a whole duration, since stopping it cancels that
//!   work and the taker makes the call again;
//! - on a graceful shutdown it frees every bucket and deletes its member
//!   Lease, so the others take over at their next tick.
//!
//! Every write to the map carries the version read (a compare-and-swap), so
//! two replicas taking the same free bucket cannot both win.

use std::collections::{BTreeMap, HashMap};
use std::sync::atomic::{AtomicU32, Ordering};
use std::sync::{Arc, OnceLock};
use std::time::{Duration, Instant};

use futures::future::BoxFuture;
use k8s_openapi::api::coordination::v1::{Lease, LeaseSpec};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{MicroTime, ObjectMeta};
use kube::api::{DeleteParams, ListParams, PostParams, Preconditions};
use kube::{Api, Client, ResourceExt};
use sha2::{Digest, Sha256};
use tokio::sync::watch;
use tokio::task::JoinHandle;

use crate::names::{self, BUCKETS, ROLE_LABEL};

/// Annotation on the bucket map: a JSON array of 64 replica identities,
/// `""` for a bucket nobody holds.
pub const MAP_ANNOTATION: &str = "coxswain.dev/buckets";

/// Role label value of the bucket map Lease.
const ROLE_MAP: &str = "shard-map";
/// Role label value of a replica's member Lease.
const ROLE_MEMBER: &str = "shard-member";

/// A set of buckets, bit `b` for bucket `b`.
pub type BucketSet = u64;

/// Called with the buckets this replica stops acting on, before they can
/// be handed to another: cancel the in-process work of their Runs.
pub type OnLost = Arc<dyn Fn(BucketSet) -> BoxFuture<'static, ()> + Send + Sync>;

/// The buckets whose Runs have work held in this process now: what a
/// hand-over of them would cancel.
pub type Working = Arc<dyn Fn() -> BucketSet + Send + Sync>;

/// Where the Leases are and who this replica is.
#[derive(Clone, Debug)]
pub struct ShardSettings {
    /// Namespace of the Leases.
    pub namespace: String,
    /// The leader Lease's name, which the shard Leases' names start with.
    pub lease_name: String,
    /// This replica's identity.
    pub identity: String,
    /// How long a member Lease holds without renewal.
    pub duration: Duration,
}

/// This replica's share of the buckets. Cloned handles see the same share.
#[derive(Clone)]
pub struct Shards {
    owned: watch::Receiver<BucketSet>,
    busy: Arc<Busy>,
}

/// The task keeping the share; [`Keeper::stop`] frees it.
pub struct Keeper {
    task: JoinHandle<()>,
    stop: watch::Sender<bool>,
}

/// Reconciles in flight per bucket, so a bucket is freed only once nothing
/// of it is being reconciled here.
struct Busy {
    owned: watch::Sender<BucketSet>,
    in_flight: [AtomicU32; BUCKETS as usize],
    /// Until when the last renewal lets this replica act (`None`: always,
    /// when it is alone). Checked by every reconcile as it starts, so a
    /// replica that was paused (a stopped process, a long stall) refuses
    /// work at once on waking, before its next tick stops the rest.
    fresh_until: std::sync::Mutex<Option<Instant>>,
    /// Told once the in-process launcher exists; until then every bucket
    /// counts as idle.
    working: OnceLock<Working>,
}

impl Busy {
    fn fresh(&self) -> bool {
        let until = *self.fresh_until.lock().unwrap_or_else(|e| e.into_inner());
        until.is_none_or(|until| Instant::now() < until)
    }

    fn set_fresh_until(&self, until: Instant) {
        *self.fresh_until.lock().unwrap_or_else(|e| e.into_inner()) = Some(until);
    }

    fn working(&self) -> BucketSet {
        self.working.get().map_or(0, |working| working())
    }
}

/// A reconcile of a bucket's Run in flight; the bucket is not freed until
/// it is dropped.
pub struct Entered {
    busy: Arc<Busy>,
    bucket: u8,
}

impl Drop for Entered {
    fn drop(&mut self) {
        self.busy.in_flight[usize::from(self.bucket)].fetch_sub(1, Ordering::SeqCst);
    }
}

impl Shards {
    /// A share that is always all buckets: one replica alone, no Leases.
    pub fn everything() -> Shards {
        Shards::with(all(), None)
    }

    /// A share of `owned`, acted on until `fresh_until` (`None`: always).
    fn with(owned: BucketSet, fresh_until: Option<Instant>) -> Shards {
        let (owned, rx) = watch::channel(owned);
        Shards {
            owned: rx,
            busy: Arc::new(Busy {
                owned,
                in_flight: std::array::from_fn(|_| AtomicU32::new(0)),
                fresh_until: std::sync::Mutex::new(fresh_until),
                working: OnceLock::new(),
            }),
        }
    }

    /// Starts keeping a share of the buckets in the Leases `settings` name.
    /// `on_lost` is called with each set of buckets this replica stops
    /// acting on.
    pub fn start(client: Client, settings: ShardSettings, on_lost: OnLost) -> (Shards, Keeper) {
        // Nothing until the first renewal and the map say so.
        let shards = Shards::with(0, Some(Instant::now()));
        let (stop, stopping) = watch::channel(false);
        let state = Tick {
            api: Api::namespaced(client, &settings.namespace),
            member_name: member_name(&settings.lease_name, &settings.identity),
            map_name: format!("{}-buckets", settings.lease_name),
            settings,
            seen: HashMap::new(),
            renewed: None,
            releasing: 0,
            over_since: None,
            first: true,
            busy: shards.busy.clone(),
            on_lost,
        };
        let task = tokio::spawn(state.run(stopping));
        (shards.clone(), Keeper { task, stop })
    }

    /// Marks a reconcile of the Run with `uid` as in flight, if this replica
    /// acts on its bucket now; `None` when it does not.
    pub fn enter(&self, uid: &str) -> Option<Entered> {
        let bucket = names::bucket_of(uid);
        // Counted first, checked second: a bucket being freed either is
        // seen as not ours here, or is seen busy by the freeing tick.
        self.busy.in_flight[usize::from(bucket)].fetch_add(1, Ordering::SeqCst);
        let entered = Entered {
            busy: self.busy.clone(),
            bucket,
        };
        (self.owns(bucket) && self.busy.fresh()).then_some(entered)
    }

    /// Tells the keeper which buckets have work held in this process, so a
    /// voluntary hand-over picks idle ones first. Only the first call counts.
    pub fn tell_working(&self, working: Working) {
        let _ = self.busy.working.set(working);
    }

    /// Whether this replica acts on `bucket` now.
    pub fn owns(&self, bucket: u8) -> bool {
        *self.owned.borrow() & bit(bucket) != 0
    }

    /// The buckets this replica acts on now.
    pub fn owned(&self) -> BucketSet {
        *self.owned.borrow()
    }

    /// Changes to the share, for the driver to queue a gained bucket's Runs.
    pub fn watch(&self) -> watch::Receiver<BucketSet> {
        self.owned.clone()
    }
}

impl Keeper {
    /// Stops acting on every bucket, waits (a little) for their reconciles
    /// in flight, frees them in the map and deletes the member Lease, so
    /// the others take them at their next tick.
    pub async fn stop(self) {
        let _ = self.stop.send(true);
        if let Err(e) = self.task.await {
            tracing::warn!(error = %e, "the shard keeper stopped badly");
        }
    }
}

/// Whether `set` holds the bucket of the Run with `uid`.
pub fn holds(set: BucketSet, uid: &str) -> bool {
    set & bit(names::bucket_of(uid)) != 0
}

/// The buckets of the Runs with these uids.
pub fn of_runs<'a>(uids: impl IntoIterator<Item = &'a str>) -> BucketSet {
    uids.into_iter()
        .fold(0, |set, uid| set | bit(names::bucket_of(uid)))
}

/// Every bucket.
fn all() -> BucketSet {
    u64::MAX
}

fn bit(bucket: u8) -> BucketSet {
    1u64 << bucket
}

/// The name of a replica's member Lease: identities may hold characters a
/// name may not, so a digest of it.
fn member_name(lease: &str, identity: &str) -> String {
    let digest = Sha256::digest(identity.as_bytes());
    let hex: String = digest[..8].iter().map(|b| format!("{b:02x}")).collect();
    format!("{lease}-member-{hex}")
}

/// The keeper's memory between ticks.
struct Tick {
    api: Api<Lease>,
    settings: ShardSettings,
    member_name: String,
    map_name: String,
    /// Lease name → the version last seen and when it was first seen.
    seen: HashMap<String, (String, Instant)>,
    /// When the last successful renewal of the member Lease was sent.
    renewed: Option<Instant>,
    /// Buckets no longer acted on, waiting for their reconciles to end
    /// before they are freed in the map.
    releasing: BucketSet,
    /// Since when this replica has held more than its share (as the tick
    /// that first saw it was sent).
    over_since: Option<Instant>,
    /// The first tick only announces this replica, so replicas starting
    /// together see each other before taking buckets.
    first: bool,
    busy: Arc<Busy>,
    on_lost: OnLost,
}

impl Tick {
    async fn run(mut self, mut stopping: watch::Receiver<bool>) {
        let every = self.settings.duration / 3;
        loop {
            self.tick().await;
            tokio::select! {
                () = tokio::time::sleep(every) => {}
                _ = stopping.wait_for(|s| *s) => break,
            }
        }
        self.free_all().await;
    }

    /// Renews the member Lease, reads the map and the members, and takes,
    /// frees or stops acting on buckets as the rules say.
    async fn tick(&mut self) {
        let sent = Instant::now();
        // Stale (a pause, renewals failing): stop acting before anything
        // else, so a renewal that succeeds below cannot revive buckets the
        // map may have moved meanwhile.
        self.check_fresh().await;
        let leases = match self.list().await {
            Ok(leases) => leases,
            Err(e) => {
                tracing::warn!(error = %e, "reading the shard Leases failed");
                self.check_fresh().await;
                return;
            }
        };
        self.observe(&leases, sent);
        match self.renew_member(&leases).await {
            Ok(()) => {
                self.renewed = Some(sent);
                self.busy
                    .set_fresh_until(sent + self.settings.duration * 2 / 3);
            }
            Err(e) => tracing::warn!(error = %e, "renewing this replica's member Lease failed"),
        }
        if self.check_fresh().await {
            return;
        }
        let members = self.live_members(&leases, sent);
        let map = leases.iter().find(|l| l.name_any() == self.map_name);
        let held = map.map(read_map).unwrap_or_default();
        let here = Here {
            drained: self.drained(),
            releasing: self.releasing,
            working: self.busy.working(),
            impatient: self
                .over_since
                .is_some_and(|since| sent.duration_since(since) >= self.settings.duration),
            announce_only: self.first,
        };
        let plan = plan(&held, &members, &self.settings.identity, &here);
        self.first = false;
        self.over_since = if plan.over {
            self.over_since.or(Some(sent))
        } else {
            None
        };
        if plan.map != held {
            if let Err(e) = self.write_map(map, &plan.map).await {
                tracing::debug!(error = %e, "the bucket map changed under this replica; next tick");
                // Keep only what the map read names this replica for (a
                // map deleted and made again by another names nothing).
                let named = mask_of(&held, &self.settings.identity) & !self.releasing;
                let owned = *self.busy.owned.borrow();
                self.set_owned(owned & named).await;
                return;
            }
            if plan.freed != 0 {
                tracing::info!(buckets = %show(plan.freed), "handed buckets over");
            }
        }
        self.releasing = (self.releasing & !plan.freed) | plan.release;
        let mine = mask_of(&plan.map, &self.settings.identity) & !self.releasing;
        self.set_owned(mine).await;
    }

    async fn list(&self) -> Result<Vec<Lease>, kube::Error> {
        let selector = format!("{ROLE_LABEL} in ({ROLE_MAP},{ROLE_MEMBER})");
        let prefix = format!("{}-", self.settings.lease_name);
        Ok(self
            .api
            .list(&ListParams::default().labels(&selector))
            .await?
            .items
            .into_iter()
            .filter(|l| l.name_any().starts_with(&prefix))
            .collect())
    }

    /// Notes when each Lease's version was first seen: a member whose
    /// version stays for a whole duration is gone.
    fn observe(&mut self, leases: &[Lease], now: Instant) {
        let mut seen = HashMap::new();
        for lease in leases {
            let version = lease.resource_version().unwrap_or_default();
            let since = match self.seen.get(&lease.name_any()) {
                Some((old, since)) if *old == version => *since,
                _ => now,
            };
            seen.insert(lease.name_any(), (version, since));
        }
        self.seen = seen;
    }

    /// The identities of the replicas alive now (this one included), and
    /// the member Leases of those gone, which are deleted.
    fn live_members(&self, leases: &[Lease], now: Instant) -> Vec<String> {
        let mut live = vec![self.settings.identity.clone()];
        for lease in leases.iter().filter(|l| role(l) == Some(ROLE_MEMBER)) {
            let Some(holder) = holder(lease) else {
                continue;
            };
            let since = self.seen.get(&lease.name_any()).map(|(_, since)| *since);
            let fresh =
                since.is_some_and(|since| now.duration_since(since) < self.settings.duration);
            if fresh && !live.contains(&holder) {
                live.push(holder);
            } else if !fresh && lease.name_any() != self.member_name {
                self.forget_member(lease);
            }
        }
        live
    }

    /// Deletes a gone replica's member Lease, on the version seen.
    fn forget_member(&self, lease: &Lease) {
        let api = self.api.clone();
        let (name, uid, version) = (lease.name_any(), lease.uid(), lease.resource_version());
        tokio::spawn(async move {
            let params = DeleteParams {
                preconditions: Some(Preconditions {
                    uid,
                    resource_version: version,
                }),
                ..DeleteParams::default()
            };
            let _ = api.delete(&name, &params).await;
        });
    }

    async fn renew_member(&self, leases: &[Lease]) -> Result<(), kube::Error> {
        let now = MicroTime(jiff::Timestamp::now());
        let seconds = i32::try_from(self.settings.duration.as_secs()).unwrap_or(i32::MAX);
        match leases.iter().find(|l| l.name_any() == self.member_name) {
            Some(lease) => {
                let mut lease = lease.clone();
                let spec = lease.spec.get_or_insert_with(LeaseSpec::default);
                spec.holder_identity = Some(self.settings.identity.clone());
                spec.lease_duration_seconds = Some(seconds);
                spec.renew_time = Some(now);
                lease.metadata.managed_fields = None;
                self.api
                    .replace(&self.member_name, &PostParams::default(), &lease)
                    .await?;
            }
            None => {
                let lease = Lease {
                    metadata: self.meta(&self.member_name, ROLE_MEMBER),
                    spec: Some(LeaseSpec {
                        holder_identity: Some(self.settings.identity.clone()),
                        lease_duration_seconds: Some(seconds),
                        acquire_time: Some(now.clone()),
                        renew_time: Some(now),
                        ..LeaseSpec::default()
                    }),
                };
                self.api.create(&PostParams::default(), &lease).await?;
            }
        }
        Ok(())
    }

    fn meta(&self, name: &str, role: &str) -> ObjectMeta {
        ObjectMeta {
            name: Some(name.to_string()),
            namespace: Some(self.settings.namespace.clone()),
            labels: Some(BTreeMap::from([(ROLE_LABEL.to_string(), role.to_string())])),
            ..ObjectMeta::default()
        }
    }

    /// Stops acting on every bucket when the member Lease was not renewed
    /// for two thirds of its duration (the others may take them after a
    /// whole one); says whether it did.
    async fn check_fresh(&mut self) -> bool {
        let stale = self
            .renewed
            .is_none_or(|sent| sent.elapsed() >= self.settings.duration * 2 / 3);
        if stale && self.busy.owned.borrow().count_ones() > 0 {
            tracing::error!(
                "this replica's member Lease was not renewed in time: it stops acting on every bucket"
            );
        }
        if stale {
            self.releasing = 0;
            self.set_owned(0).await;
        }
        stale
    }

    /// The releasing buckets with no reconcile in flight here.
    fn drained(&self) -> BucketSet {
        (0..BUCKETS)
            .filter(|b| self.releasing & bit(*b) != 0)
            .filter(|b| self.busy.in_flight[usize::from(*b)].load(Ordering::SeqCst) == 0)
            .fold(0, |set, b| set | bit(b))
    }

    async fn set_owned(&self, owned: BucketSet) {
        let before = self.busy.owned.send_replace(owned);
        let lost = before & !owned;
        if owned != before {
            tracing::info!(
                buckets = owned.count_ones(),
                gained = %show(owned & !before),
                lost = %show(lost),
                "acting on a new share of the buckets"
            );
        }
        if lost != 0 {
            (self.on_lost)(lost).await;
        }
    }

    async fn write_map(&self, map: Option<&Lease>, holders: &[String]) -> Result<(), kube::Error> {
        let text = serde_json::to_string(holders).unwrap_or_default();
        match map {
            Some(lease) => {
                let mut lease = lease.clone();
                lease
                    .annotations_mut()
                    .insert(MAP_ANNOTATION.to_string(), text);
                lease.metadata.managed_fields = None;
                self.api
                    .replace(&self.map_name, &PostParams::default(), &lease)
                    .await?;
            }
            None => {
                let mut meta = self.meta(&self.map_name, ROLE_MAP);
                meta.annotations = Some(BTreeMap::from([(MAP_ANNOTATION.to_string(), text)]));
                let lease = Lease {
                    metadata: meta,
                    spec: Some(LeaseSpec::default()),
                };
                self.api.create(&PostParams::default(), &lease).await?;
            }
        }
        Ok(())
    }

    /// On shutdown: stop acting on everything, wait for the reconciles in
    /// flight (they were asked to stop too), free this replica's buckets
    /// and delete its member Lease.
    async fn free_all(&mut self) {
        self.set_owned(0).await;
        let deadline = Instant::now() + self.settings.duration / 3;
        while self
            .busy
            .in_flight
            .iter()
            .any(|n| n.load(Ordering::SeqCst) > 0)
            && Instant::now() < deadline
        {
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
        for _ in 0..5 {
            let Ok(leases) = self.list().await else {
                break;
            };
            let map = leases.iter().find(|l| l.name_any() == self.map_name);
            let mut holders = map.map(read_map).unwrap_or_default();
            let before = holders.clone();
            for holder in holders.iter_mut() {
                if *holder == self.settings.identity {
                    holder.clear();
                }
            }
            if holders == before || self.write_map(map, &holders).await.is_ok() {
                break;
            }
        }
        let _ = self
            .api
            .delete(&self.member_name, &DeleteParams::default())
            .await;
        tracing::info!("freed this replica's buckets");
    }
}

fn role(lease: &Lease) -> Option<&str> {
    lease.labels().get(ROLE_LABEL).map(String::as_str)
}

fn holder(lease: &Lease) -> Option<String> {
    lease
        .spec
        .as_ref()
        .and_then(|s| s.holder_identity.clone())
        .filter(|h| !h.is_empty())
}

/// The map's holders, 64 of them; a map that does not read is taken as
/// holding nothing (the next write mends it).
fn read_map(lease: &Lease) -> Vec<String> {
    let holders: Vec<String> = lease
        .annotations()
        .get(MAP_ANNOTATION)
        .and_then(|text| serde_json::from_str(text).ok())
        .unwrap_or_default();
    if holders.len() == usize::from(BUCKETS) {
        holders
    } else {
        vec![String::new(); usize::from(BUCKETS)]
    }
}

fn mask_of(holders: &[String], me: &str) -> BucketSet {
    holders
        .iter()
        .enumerate()
        .filter(|(_, h)| *h == me)
        .fold(0, |set, (b, _)| set | (1u64 << b))
}

/// What one tick decides.
#[derive(Debug, PartialEq)]
struct Plan {
    /// The map to write (unchanged: nothing to write).
    map: Vec<String>,
    /// Buckets to stop acting on now, to be freed once drained.
    release: BucketSet,
    /// Buckets freed in `map` (they were drained).
    freed: BucketSet,
    /// Whether this replica holds more than its share while another is
    /// short of it.
    over: bool,
}

/// What a tick knows of this replica itself.
#[derive(Debug, Default)]
struct Here {
    /// Buckets it stopped acting on that have nothing in flight.
    drained: BucketSet,
    /// Buckets it stopped acting on, to be freed once drained.
    releasing: BucketSet,
    /// Buckets with work held in this process.
    working: BucketSet,
    /// It has been over its share long enough to give up busy buckets too.
    impatient: bool,
    /// Its first tick: take nothing yet.
    announce_only: bool,
}

/// The rules, on what one tick read: `held` the map (64 holders), `live`
/// the replicas alive (this one, `me`, first), and what `here` knows of
/// this replica.
fn plan(held: &[String], live: &[String], me: &str, here: &Here) -> Plan {
    let buckets = usize::from(BUCKETS);
    let mut map: Vec<String> = held
        .iter()
        .map(|h| {
            if live.contains(h) {
                h.clone()
            } else {
                String::new()
            }
        })
        .collect();
    map.resize(buckets, String::new());
    let target = buckets.div_ceil(live.len().max(1));
    let mut freed = 0;
    for (b, holder) in map.iter_mut().enumerate() {
        if here.drained & (1u64 << b) != 0 && holder == me {
            holder.clear();
            freed |= 1u64 << b;
        }
    }
    let mine = map.iter().filter(|h| *h == me).count();
    let mut release = 0;
    let mut over = false;
    if !here.announce_only && mine < target {
        // Free buckets, in an order of this replica's own, so replicas
        // taking at once mostly want different ones.
        let mut free: Vec<usize> = (0..buckets)
            .filter(|b| map[*b].is_empty() && freed & (1u64 << b) == 0)
            .collect();
        free.sort_by_key(|b| preference(me, *b));
        for b in free.into_iter().take(target - mine) {
            map[b] = me.to_string();
        }
    } else if mine > target {
        // Some other live replica must be short of the fair share for this
        // one to give any up: otherwise nobody would take them.
        let short = live
            .iter()
            .filter(|r| *r != me)
            .any(|r| map.iter().filter(|h| *h == r).count() < buckets / live.len());
        if short {
            over = true;
            let has = |set: BucketSet, b: usize| set & (1u64 << b) != 0;
            // Those already stopping, then idle ones, each in this
            // replica's order; busy ones only once it is impatient.
            let mut ours: Vec<usize> = (0..buckets)
                .filter(|b| map[*b] == me)
                .filter(|b| here.impatient || has(here.releasing, *b) || !has(here.working, *b))
                .collect();
            ours.sort_by_key(|b| {
                (
                    !has(here.releasing, *b),
                    has(here.working, *b),
                    std::cmp::Reverse(preference(me, *b)),
                )
            });
            for b in ours.into_iter().take(mine - target) {
                release |= 1u64 << b;
            }
        }
    }
    Plan {
        map,
        release,
        freed,
        over,
    }
}

/// This replica's order of preference of bucket `b`.
fn preference(me: &str, b: usize) -> u64 {
    use std::hash::Hasher;
    let mut hasher = fnv::FnvHasher::default();
    hasher.write(me.as_bytes());
    hasher.write(&[b as u8]);
    hasher.finish()
}

/// A set of buckets as people read it: `0-3,9`.
fn show(set: BucketSet) -> String {
    let mut parts = Vec::new();
    let mut b = 0u8;
    while b < BUCKETS {
        if set & bit(b) == 0 {
            b += 1;
            continue;
        }
        let start = b;
        while b + 1 < BUCKETS && set & bit(b + 1) != 0 {
            b += 1;
        }
        parts.push(if start == b {
            format!("{b}")
        } else {
            format!("{start}-{b}")
        });
        b += 1;
    }
    if parts.is_empty() {
        "none".into()
    } else {
        parts.join(",")
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn empty() -> Vec<String> {
        vec![String::new(); 64]
    }

    fn first_tick() -> Here {
        Here {
            announce_only: true,
            ..Here::default()
        }
    }

    fn count(map: &[String], who: &str) -> usize {
        map.iter().filter(|h| *h == who).count()
    }

    #[test]
    fn a_replica_alone_takes_every_bucket_after_announcing_itself() {
        let live = ["a".to_string()];
        let first = plan(&empty(), &live, "a", &first_tick());
        assert_eq!(first.map, empty(), "the first tick takes nothing");
        let next = plan(&empty(), &live, "a", &Here::default());
        assert_eq!(count(&next.map, "a"), 64);
    }

    #[test]
    fn replicas_starting_together_split_the_buckets() {
        let live: Vec<String> = ["a", "b", "c"].map(String::from).to_vec();
        let mut map = empty();
        for me in ["b", "a", "c"] {
            let mut order = live.clone();
            order.retain(|r| r != me);
            order.insert(0, me.to_string());
            map = plan(&map, &order, me, &Here::default()).map;
        }
        assert_eq!(map.iter().filter(|h| h.is_empty()).count(), 0);
        for me in ["a", "b", "c"] {
            assert!((20..=22).contains(&count(&map, me)), "{me}: {map:?}");
        }
    }

    #[test]
    fn a_gone_replicas_buckets_are_free_and_taken() {
        let mut map = empty();
        for (b, h) in map.iter_mut().enumerate() {
            *h = if b % 2 == 0 { "a" } else { "dead" }.into();
        }
        let next = plan(&map, &["a".to_string()], "a", &Here::default());
        assert_eq!(count(&next.map, "a"), 64);
        assert_eq!(count(&next.map, "dead"), 0);
    }

    #[test]
    fn a_replica_over_its_share_stops_first_and_frees_once_drained() {
        let full = vec!["a".to_string(); 64];
        let live: Vec<String> = ["a", "b"].map(String::from).to_vec();
        let first = plan(&full, &live, "a", &Here::default());
        assert_eq!(first.map, full, "nothing is freed before it drains");
        assert_eq!(first.release.count_ones(), 32);
        let second = plan(
            &full,
            &live,
            "a",
            &Here {
                drained: first.release,
                releasing: first.release,
                ..Here::default()
            },
        );
        assert_eq!(second.freed, first.release);
        assert_eq!(count(&second.map, "a"), 32);
        assert_eq!(count(&second.map, ""), 32);
        // The newcomer takes them.
        let taken = plan(
            &second.map,
            &["b".to_string(), "a".to_string()],
            "b",
            &Here::default(),
        );
        assert_eq!(count(&taken.map, "b"), 32);
    }

    #[test]
    fn a_replica_over_its_share_gives_up_idle_buckets_before_busy_ones() {
        let full = vec!["a".to_string(); 64];
        let live: Vec<String> = ["a", "b"].map(String::from).to_vec();
        // 40 buckets hold calls in flight here: only the 24 idle ones go.
        let working: BucketSet = (1u64 << 40) - 1;
        let patient = plan(
            &full,
            &live,
            "a",
            &Here {
                working,
                ..Here::default()
            },
        );
        assert!(patient.over);
        assert_eq!(patient.release, !working, "only the idle ones, all of them");
        // Still over its share a duration later, it gives up busy ones
        // too, keeping those already stopping.
        let impatient = plan(
            &full,
            &live,
            "a",
            &Here {
                working,
                releasing: patient.release,
                impatient: true,
                ..Here::default()
            },
        );
        assert_eq!(impatient.release.count_ones(), 32);
        assert_eq!(impatient.release & patient.release, patient.release);
        // Fewer busy than the surplus: idle ones are enough, none busy go.
        let few: BucketSet = 0b111;
        let p = plan(
            &full,
            &live,
            "a",
            &Here {
                working: few,
                ..Here::default()
            },
        );
        assert_eq!(p.release.count_ones(), 32);
        assert_eq!(p.release & few, 0);
    }

    #[test]
    fn nobody_gives_up_buckets_nobody_would_take() {
        // Three live by their member Leases, but the third holds its
        // share: a has 22 of ceil(64/3) = 22, nothing to give.
        let mut map = empty();
        for (b, h) in map.iter_mut().enumerate() {
            *h = ["a", "b", "c"][b % 3].into();
        }
        let live: Vec<String> = ["a", "b", "c"].map(String::from).to_vec();
        let p = plan(&map, &live, "a", &Here::default());
        assert_eq!((p.release, p.freed), (0, 0));
        assert_eq!(p.map, map);
    }

    #[test]
    fn sets_read_as_ranges() {
        assert_eq!(show(0), "none");
        assert_eq!(show(0b1011), "0-1,3");
        assert_eq!(show(u64::MAX), "0-63");
    }
}
