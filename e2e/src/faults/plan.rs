//! What the fault proxy does to each request, drawn from a seeded generator
//! so a failing run can be repeated with the seed it printed.

use std::sync::Mutex;
use std::time::Duration;

use super::tally::Kind;

/// A fault the proxy can inject in place of (or on top of) forwarding.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Fault {
    /// 409 Conflict, as for a write with a stale `resourceVersion` (only
    /// for updates and patches: the API server never answers a create or a
    /// read so; a create gets 409 only when the object exists, and lying
    /// about that would be a fault no real server makes).
    Conflict,
    /// 429 Too Many Requests with `Retry-After: 1`, as API priority and
    /// fairness answers an overloaded server.
    TooManyRequests,
    /// 500 Internal Server Error.
    Internal,
    /// 503 Service Unavailable.
    Unavailable,
    /// Forwarded after a pause.
    Delay,
    /// A watch forwarded, then its connection closed mid-stream.
    CutWatch,
    /// A write forwarded and applied by the API server, whose answer the
    /// client never gets: it sees a 500, a 503 or a closed connection
    /// instead ([`Loss`]), as when a load balancer or the connection fails
    /// after the server acted. The client cannot tell it from a write that
    /// never happened; retrying it finds the change already made.
    LostResponse,
}

impl Fault {
    /// Every kind, for reports.
    pub const ALL: [Fault; 7] = [
        Fault::Conflict,
        Fault::TooManyRequests,
        Fault::Internal,
        Fault::Unavailable,
        Fault::Delay,
        Fault::CutWatch,
        Fault::LostResponse,
    ];

    /// The HTTP status the proxy answers with, for the faults that answer
    /// instead of the API server.
    pub fn status(self) -> Option<u16> {
        match self {
            Fault::Conflict => Some(409),
            Fault::TooManyRequests => Some(429),
            Fault::Internal => Some(500),
            Fault::Unavailable => Some(503),
            Fault::Delay | Fault::CutWatch | Fault::LostResponse => None,
        }
    }

    /// Whether the client saw the request fail: an error answered in place
    /// of the API server's, or a write's answer lost after it was applied.
    pub fn is_error(self) -> bool {
        self.status().is_some() || self == Fault::LostResponse
    }
}

/// What the client gets in place of a write's lost answer.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Loss {
    /// A 500 `Status`.
    Internal,
    /// A 503 `Status`.
    Unavailable,
    /// The connection closed before any answer.
    Cut,
}

/// What a request is, as far as the dice care.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Request {
    /// A watch (may be cut; never delayed).
    pub watch: bool,
    /// An update or patch (may get a 409).
    pub update: bool,
    /// A write whose answer may be lost after it is applied: any create,
    /// update, patch or delete except a Lease's (the leader's renewals;
    /// a lost one only makes the leader step down, which the restart
    /// tests cover) and the reviews (TokenReview, SubjectAccessReview),
    /// which change nothing.
    pub lossable: bool,
}

/// Resources whose writes change nothing (or only the leader's Lease):
/// never lossable.
const NOT_LOSSABLE: [&str; 5] = [
    "leases",
    "tokenreviews",
    "subjectaccessreviews",
    "selfsubjectaccessreviews",
    "localsubjectaccessreviews",
];

impl Request {
    /// What a request of this verb and resource is.
    pub fn of(kind: &Kind) -> Self {
        let verb = kind.verb.as_str();
        let write = matches!(
            verb,
            "create" | "update" | "patch" | "delete" | "deletecollection"
        );
        Self {
            watch: verb == "watch",
            update: matches!(verb, "update" | "patch"),
            lossable: write && !NOT_LOSSABLE.contains(&kind.resource.as_str()),
        }
    }
}

/// What to do with one request.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Decision {
    /// Forward it untouched.
    Forward,
    /// Answer with this error instead of forwarding.
    Answer(Fault),
    /// Wait this long, then forward.
    Delay(Duration),
    /// Forward the watch and close its connection after this long.
    CutAfter(Duration),
    /// Forward the write, wait for the API server's answer, and give the
    /// client this instead.
    Lose(Loss),
}

/// How often each fault happens (probabilities per request) and how long
/// delays and watches last. The error probabilities add up (drawn once).
#[derive(Clone, Debug)]
pub struct FaultPlan {
    /// The generator's seed (printed when the proxy starts).
    pub seed: u64,
    /// Chance of a 409 for an update or patch.
    pub conflict: f64,
    /// Chance of a 429.
    pub too_many_requests: f64,
    /// Chance of a 500.
    pub internal: f64,
    /// Chance of a 503.
    pub unavailable: f64,
    /// Chance that a write (see [`Request::lossable`]) is applied and its
    /// answer lost.
    pub lost_response: f64,
    /// Chance that a request not answered with an error is delayed.
    pub delay: f64,
    /// Longest delay.
    pub max_delay: Duration,
    /// Chance that a watch is cut.
    pub cut_watch: f64,
    /// A cut watch lives between this and [`FaultPlan::max_watch`].
    pub min_watch: Duration,
    /// See [`FaultPlan::min_watch`].
    pub max_watch: Duration,
}

impl FaultPlan {
    /// A plan that hurts every kind of request now and then, seeded with
    /// `E2E_FAULT_SEED` when set, else from the clock; `E2E_FAULT_LOST`
    /// sets the chance of a lost answer (to study that fault alone, at a
    /// rate that finds its bugs in a few runs); `E2E_FAULT_SCALE` then
    /// multiplies every chance (`0` measures the same work without faults).
    pub fn from_env() -> Self {
        let number = |name: &str| {
            std::env::var(name)
                .ok()
                .and_then(|s| s.trim().parse::<f64>().ok())
        };
        let seed = std::env::var("E2E_FAULT_SEED")
            .ok()
            .and_then(|s| s.trim().parse().ok())
            .unwrap_or_else(clock_seed);
        let mut plan = Self::seeded(seed);
        if let Some(lost) = number("E2E_FAULT_LOST") {
            plan.lost_response = lost.clamp(0.0, 1.0);
        }
        plan.scaled(number("E2E_FAULT_SCALE").unwrap_or(1.0))
    }

    /// The same plan with every chance multiplied by `factor` (capped at 1).
    pub fn scaled(mut self, factor: f64) -> Self {
        for chance in [
            &mut self.conflict,
            &mut self.too_many_requests,
            &mut self.internal,
            &mut self.unavailable,
            &mut self.lost_response,
            &mut self.delay,
            &mut self.cut_watch,
        ] {
            *chance = (*chance * factor).clamp(0.0, 1.0);
        }
        self
    }

    /// The default rates with a given seed: about one request in ten gets an
    /// error (writes 3% more: their answer lost after they were applied),
    /// one in five of the rest waits up to 300 ms, and most watches are cut
    /// within 1–8 s.
    pub fn seeded(seed: u64) -> Self {
        Self {
            seed,
            conflict: 0.04,
            too_many_requests: 0.03,
            internal: 0.03,
            unavailable: 0.03,
            lost_response: 0.03,
            delay: 0.2,
            max_delay: Duration::from_millis(300),
            cut_watch: 0.7,
            min_watch: Duration::from_secs(1),
            max_watch: Duration::from_secs(8),
        }
    }
}

fn clock_seed() -> u64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_nanos() as u64)
        .unwrap_or(12)
        ^ u64::from(std::process::id())
}

/// The plan with its generator: one draw sequence for the whole proxy, so
/// the same seed gives the same sequence of decisions (which request gets
/// which still depends on the order requests arrive in).
#[derive(Debug)]
pub struct Dice {
    plan: FaultPlan,
    state: Mutex<u64>,
}

impl Dice {
    /// Dice for `plan`.
    pub fn new(plan: FaultPlan) -> Self {
        let state = Mutex::new(plan.seed);
        Self { plan, state }
    }

    /// The plan.
    pub fn plan(&self) -> &FaultPlan {
        &self.plan
    }

    /// A number in [0, 1) (SplitMix64: tiny, and good enough for choosing faults).
    fn draw(&self) -> f64 {
        let mut state = self.state.lock().unwrap_or_else(|e| e.into_inner());
        *state = state.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut z = *state;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        z ^= z >> 31;
        (z >> 11) as f64 / (1u64 << 53) as f64
    }

    fn between(&self, low: Duration, high: Duration) -> Duration {
        low + (high.saturating_sub(low)).mul_f64(self.draw())
    }

    /// Decides the fate of one request.
    pub fn decide(&self, request: Request) -> Decision {
        let p = &self.plan;
        let roll = self.draw();
        let conflict = if request.update { p.conflict } else { 0.0 };
        let mut edge = 0.0;
        for (chance, fault) in [
            (conflict, Fault::Conflict),
            (p.too_many_requests, Fault::TooManyRequests),
            (p.internal, Fault::Internal),
            (p.unavailable, Fault::Unavailable),
        ] {
            edge += chance;
            if roll < edge {
                return Decision::Answer(fault);
            }
        }
        if request.lossable {
            edge += p.lost_response;
            if roll < edge {
                return Decision::Lose(match self.draw() {
                    x if x < 1.0 / 3.0 => Loss::Internal,
                    x if x < 2.0 / 3.0 => Loss::Unavailable,
                    _ => Loss::Cut,
                });
            }
        }
        if request.watch {
            return if self.draw() < p.cut_watch {
                Decision::CutAfter(self.between(p.min_watch, p.max_watch))
            } else {
                Decision::Forward
            };
        }
        if self.draw() < p.delay {
            Decision::Delay(self.between(Duration::ZERO, p.max_delay))
        } else {
            Decision::Forward
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn request(watch: bool, update: bool) -> Request {
        Request {
            watch,
            update,
            lossable: false,
        }
    }

    fn tally(dice: &Dice, watch: bool, write: bool, n: usize) -> [usize; 4] {
        let mut seen = [0; 4];
        for _ in 0..n {
            match dice.decide(request(watch, write)) {
                Decision::Answer(_) | Decision::Lose(_) => seen[0] += 1,
                Decision::Delay(d) => {
                    assert!(d <= dice.plan().max_delay, "{d:?}");
                    seen[1] += 1
                }
                Decision::CutAfter(d) => {
                    assert!(d >= dice.plan().min_watch && d <= dice.plan().max_watch);
                    seen[2] += 1
                }
                Decision::Forward => seen[3] += 1,
            }
        }
        seen
    }

    #[test]
    fn the_same_seed_gives_the_same_decisions() {
        let (a, b) = (
            Dice::new(FaultPlan::seeded(7)),
            Dice::new(FaultPlan::seeded(7)),
        );
        let first: Vec<_> = (0..200)
            .map(|i| a.decide(request(i % 3 == 0, i % 2 == 0)))
            .collect();
        let again: Vec<_> = (0..200)
            .map(|i| b.decide(request(i % 3 == 0, i % 2 == 0)))
            .collect();
        assert_eq!(first, again);
        let other = Dice::new(FaultPlan::seeded(8));
        let different: Vec<_> = (0..200)
            .map(|i| other.decide(request(i % 3 == 0, i % 2 == 0)))
            .collect();
        assert_ne!(first, different);
    }

    #[test]
    fn rates_are_roughly_the_plan() {
        let dice = Dice::new(FaultPlan::seeded(1));
        // Reads: 9% errors, then 20% of the rest delayed.
        let [errors, delays, cuts, _] = tally(&dice, false, false, 10_000);
        assert!((700..1100).contains(&errors), "{errors}");
        assert!((1600..2100).contains(&delays), "{delays}");
        assert_eq!(cuts, 0);
        // Writes add 4% conflicts.
        let [errors, ..] = tally(&dice, false, true, 10_000);
        assert!((1100..1500).contains(&errors), "{errors}");
        // Watches: never delayed, 70% of those not refused are cut.
        let [_, delays, cuts, _] = tally(&dice, true, false, 10_000);
        assert_eq!(delays, 0);
        assert!((6000..6800).contains(&cuts), "{cuts}");
    }

    #[test]
    fn conflicts_only_for_writes() {
        let dice = Dice::new(FaultPlan::seeded(3));
        for _ in 0..5_000 {
            assert_ne!(
                dice.decide(request(false, false)),
                Decision::Answer(Fault::Conflict)
            );
            assert_ne!(
                dice.decide(request(true, false)),
                Decision::Answer(Fault::Conflict)
            );
        }
    }

    #[test]
    fn only_lossable_writes_lose_their_answer_in_every_way() {
        let dice = Dice::new(FaultPlan::seeded(5));
        for _ in 0..5_000 {
            assert!(!matches!(
                dice.decide(request(false, true)),
                Decision::Lose(_)
            ));
        }
        let lossable = Request {
            lossable: true,
            ..Request::default()
        };
        let mut ways = Vec::new();
        let mut lost = 0;
        for _ in 0..10_000 {
            if let Decision::Lose(way) = dice.decide(lossable) {
                lost += 1;
                if !ways.contains(&way) {
                    ways.push(way);
                }
            }
        }
        // 3% of 10 000.
        assert!((200..400).contains(&lost), "{lost}");
        assert_eq!(ways.len(), 3, "{ways:?}");
    }

    #[test]
    fn writes_are_lossable_except_leases_and_reviews() {
        let lossable = |verb: &str, resource: &str| {
            Request::of(&Kind {
                verb: verb.into(),
                resource: resource.into(),
            })
            .lossable
        };
        for verb in ["create", "update", "patch", "delete", "deletecollection"] {
            assert!(lossable(verb, "jobs"), "{verb}");
            assert!(lossable(verb, "runs/status"), "{verb}");
            assert!(!lossable(verb, "leases"), "{verb}");
        }
        assert!(!lossable("create", "tokenreviews"));
        assert!(!lossable("create", "subjectaccessreviews"));
        for verb in ["get", "list", "watch"] {
            assert!(!lossable(verb, "jobs"), "{verb}");
        }
    }
}
