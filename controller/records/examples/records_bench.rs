//! What the PostgreSQL records store costs with 100,000 records in one
//! collection: lookup latency (p50/p99) for a selective equality, a range
//! and both together, each `limit 20` ordered by `savedAt` descending; save
//! throughput, one at a time and 8 at once; and the archive's write cost per
//! finished Run (~5 KB of JSON). The lookups and saves are measured again
//! without the GIN index on `value`, then without the `savedAt` index, to
//! show what each index earns.
//!
//! ```sh
//! cargo run --release -p coxswain-records --example records_bench
//! ```
//!
//! The server is `COXSWAIN_POSTGRES_URL`, or the one `e2e/postgres/up`
//! starts. Everything happens in a schema of its own, dropped at the end.
//! `BENCH_RECORDS`, `BENCH_LOOKUPS`, `BENCH_SAVES` and `BENCH_RUNS` change
//! the sizes; `BENCH_KEEP=1` keeps the schema to look at.

use std::path::PathBuf;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use coxswain_core::expr::parse;
use coxswain_records::{ArchivedRun, Lookup, PgSettings, Saving, Store};
use serde_json::{Value, json};
use tokio_postgres::NoTls;

const COMPONENTS: usize = 50;
const TAGS: &[&str] = &[
    "urgent",
    "db",
    "network",
    "ui",
    "regression",
    "flaky",
    "security",
    "docs",
    "perf",
    "customer",
];

/// xorshift64*: the same records every run, no dependency.
struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        self.0.wrapping_mul(0x2545_f491_4f6c_dd1d)
    }
    fn below(&mut self, n: usize) -> usize {
        (self.next() % n as u64) as usize
    }
}

fn ticket(rng: &mut Rng, i: usize) -> Value {
    let tags: Vec<&str> = (0..rng.below(4))
        .map(|_| TAGS[rng.below(TAGS.len())])
        .collect();
    json!({
        "component": format!("component-{}", rng.below(COMPONENTS)),
        "priority": 1 + rng.below(5),
        "title": format!("Ticket {i}: {} fails on node {} after the upgrade", TAGS[rng.below(TAGS.len())], rng.below(1000)),
        "tags": tags,
        "reporter": format!("user-{}", rng.below(400)),
        "opened": format!("2026-{:02}-{:02}", 1 + rng.below(11), 1 + rng.below(28)),
    })
}

fn url() -> String {
    if let Ok(u) = std::env::var("COXSWAIN_POSTGRES_URL") {
        return u;
    }
    let up = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../e2e/postgres/up");
    let out = Command::new(&up)
        .stdin(Stdio::null())
        .stderr(Stdio::inherit())
        .output()
        .expect("running e2e/postgres/up");
    assert!(out.status.success(), "e2e/postgres/up failed");
    String::from_utf8_lossy(&out.stdout)
        .lines()
        .last()
        .and_then(|l| l.strip_prefix("COXSWAIN_POSTGRES_URL="))
        .expect("the URL line")
        .to_string()
}

fn env_usize(name: &str, default: usize) -> usize {
    std::env::var(name)
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or(default)
}

fn ms(d: Duration) -> String {
    format!("{:.2}", d.as_secs_f64() * 1000.0)
}

/// p50 and p99 of `samples`.
fn percentiles(mut samples: Vec<Duration>) -> (Duration, Duration) {
    samples.sort_unstable();
    let n = samples.len();
    (samples[n / 2], samples[(n * 99 / 100).min(n - 1)])
}

struct LookupCase {
    name: &'static str,
    condition: &'static str,
}

const LOOKUPS: &[LookupCase] = &[
    LookupCase {
        name: "no where: the 20 newest",
        condition: "",
    },
    LookupCase {
        name: "equality: `$record.value.component == $input.component` (2% of records)",
        condition: "$record.value.component == $input.component",
    },
    LookupCase {
        name: "range: `$record.value.priority >= 4` (40%)",
        condition: "$record.value.priority >= 4",
    },
    LookupCase {
        name: "text range: `$record.value.opened >= \"2026-11\"` (9%)",
        condition: "$record.value.opened >= \"2026-11\"",
    },
    LookupCase {
        name: "both: `component == $input.component and priority >= 2` (1.6%)",
        condition: "$record.value.component == $input.component and $record.value.priority >= 2",
    },
];

async fn lookups(
    store: &Store,
    n: usize,
    rows: &mut Vec<(String, String, String, String)>,
    setup: &str,
) {
    let order = parse("$record.savedAt").unwrap();
    let order_ref = order.references().next().unwrap();
    let mut rng = Rng(7);
    for case in LOOKUPS {
        let cond = (!case.condition.is_empty()).then(|| parse(case.condition).unwrap());
        let mut samples = Vec::with_capacity(n);
        let mut found = 0;
        for i in 0..n + 10 {
            let scope =
                json!({"input": {"component": format!("component-{}", rng.below(COMPONENTS))}});
            let t = Instant::now();
            let got = store
                .lookup(&Lookup {
                    namespace: "bench",
                    collection: "tickets",
                    condition: cond.as_ref(),
                    scope: &scope,
                    order_by: Some(order_ref),
                    descending: true,
                    limit: 20,
                })
                .await
                .unwrap_or_else(|e| panic!("{}: {e}", case.condition));
            let d = t.elapsed();
            found = got.len();
            if i >= 10 {
                samples.push(d);
            }
        }
        let (p50, p99) = percentiles(samples);
        eprintln!(
            "{setup}: {}: p50 {} ms, p99 {} ms ({found} records)",
            case.name,
            ms(p50),
            ms(p99)
        );
        rows.push((setup.to_string(), case.name.to_string(), ms(p50), ms(p99)));
    }
}

/// One save of the mix: on even `i` a new key `{new}-{i}`, else an update
/// of a random existing ticket; `{once}-{i}` is its idempotency key. The
/// sequential and the concurrent runs save alike.
async fn save_one(store: &Store, rng: &mut Rng, i: usize, new: &str, once: &str) {
    let key = if i.is_multiple_of(2) {
        format!("{new}-{i}")
    } else {
        format!("t{}", rng.below(100_000))
    };
    store
        .save(&Saving {
            namespace: "bench".into(),
            collection: "tickets".into(),
            key,
            value: ticket(rng, i),
            run: "bench".into(),
            step: "save".into(),
            idempotency: format!("{once}-{i}"),
        })
        .await
        .unwrap();
}

/// The bytes a table takes on disk, its indexes and TOAST included.
async fn table_size(client: &tokio_postgres::Client, table: &str) -> i64 {
    let sql = format!("SELECT pg_total_relation_size('{table}')");
    client.query_one(&sql, &[]).await.unwrap().get(0)
}

/// Drops one of the records' indexes, so the next figures are without it.
async fn drop_index(client: &tokio_postgres::Client, index: &str) {
    let sql = format!("DROP INDEX {index}; ANALYZE records");
    client.batch_execute(&sql).await.unwrap();
}

async fn saves(store: &Store, n: usize, tag: &str) -> (f64, f64) {
    // One at a time: half new keys, half updates of existing ones.
    let mut rng = Rng(11);
    let t = Instant::now();
    let (new, once) = (format!("new-{tag}"), format!("seq-{tag}"));
    for i in 0..n {
        save_one(store, &mut rng, i, &new, &once).await;
    }
    let sequential = n as f64 / t.elapsed().as_secs_f64();
    // Eight at once.
    let t = Instant::now();
    let tasks: Vec<_> = (0..8)
        .map(|w| {
            let store = store.clone();
            let tag = tag.to_string();
            tokio::spawn(async move {
                let mut rng = Rng(100 + w as u64);
                let both = format!("par-{tag}-{w}");
                for i in 0..n / 8 {
                    save_one(&store, &mut rng, i, &both, &both).await;
                }
            })
        })
        .collect();
    for t in tasks {
        t.await.unwrap();
    }
    let concurrent = (n / 8 * 8) as f64 / t.elapsed().as_secs_f64();
    eprintln!("saves ({tag}): {sequential:.0}/s one at a time, {concurrent:.0}/s 8 at once");
    (sequential, concurrent)
}

fn finished_run(i: usize, rng: &mut Rng) -> ArchivedRun {
    let name = format!("triage-{i}");
    let steps: serde_json::Map<String, Value> = (0..10)
        .map(|s| {
            (
                format!("step-{s}"),
                json!({
                    "phase": "Succeeded",
                    "startedAt": "2026-05-01T09:00:00Z",
                    "finishedAt": "2026-05-01T09:00:07Z",
                    "attempts": [{"attempt": 1, "phase": "Succeeded", "log": {"text": format!("line {} of the step's output, as scripts print it\n", rng.below(1000)).repeat(4), "cut": false}}],
                    "output": {"summary": format!("{} tickets looked at, {} updated", rng.below(50), rng.below(10)), "ok": true},
                }),
            )
        })
        .collect();
    ArchivedRun {
        namespace: "bench".into(),
        name: name.clone(),
        uid: format!("00000000-0000-4000-8000-{i:012}"),
        flow: format!("flow-{}", i % 20),
        phase: if i.is_multiple_of(10) {
            "Failed"
        } else {
            "Succeeded"
        }
        .into(),
        created: "2026-05-01T09:00:00Z".into(),
        finished: Some(format!(
            "2026-05-01T{:02}:{:02}:{:02}Z",
            9 + i / 3600 % 14,
            i / 60 % 60,
            i % 60
        )),
        flow_digest: Some(
            "sha256:4f1c0e8a9b7d6c5e4f3a2b1c0d9e8f7a6b5c4d3e2f1a0b9c8d7e6f5a4b3c2d1e".into(),
        ),
        run: json!({
            "apiVersion": "coxswain.dev/v1alpha1",
            "kind": "Run",
            "metadata": {"name": name, "namespace": "bench", "uid": format!("00000000-0000-4000-8000-{i:012}"), "labels": {"coxswain.dev/flow": format!("flow-{}", i % 20)}},
            "spec": {"flow": format!("flow-{}", i % 20), "input": {"ticket": format!("t{}", rng.below(100_000))}},
            "status": {"phase": "Succeeded", "steps": steps, "output": {"done": true}},
        }),
        offloaded: json!({"steps.step-3.output": {"configMap": format!("{name}-out-1"), "bytes": 40_000}}),
    }
}

#[tokio::main]
async fn main() {
    let records = env_usize("BENCH_RECORDS", 100_000);
    let n_lookups = env_usize("BENCH_LOOKUPS", 200);
    let n_saves = env_usize("BENCH_SAVES", 2000);
    let n_runs = env_usize("BENCH_RUNS", 2000);
    let base = url();
    let schema = format!("bench_{}", std::process::id());
    let (admin, conn) = tokio_postgres::connect(&base, NoTls)
        .await
        .expect("connecting");
    tokio::spawn(conn);
    admin
        .batch_execute(&format!("CREATE SCHEMA {schema}"))
        .await
        .unwrap();
    let sep = if base.contains('?') { '&' } else { '?' };
    let url = format!("{base}{sep}options=-csearch_path%3D{schema}");
    let store = Store::connect_postgres(&url, PgSettings::default())
        .await
        .expect("the store");
    let (client, conn) = tokio_postgres::connect(&url, NoTls).await.unwrap();
    tokio::spawn(conn);

    // Fill: in batches, saved over the last 30 days.
    let t = Instant::now();
    let mut rng = Rng(1);
    for start in (0..records).step_by(5000) {
        let end = (start + 5000).min(records);
        let keys: Vec<String> = (start..end).map(|i| format!("t{i}")).collect();
        let values: Vec<Value> = (start..end).map(|i| ticket(&mut rng, i)).collect();
        let ages: Vec<i64> = (start..end)
            .map(|_| (rng.next() % (30 * 86_400 * 1_000_000)) as i64)
            .collect();
        client
            .execute(
                "INSERT INTO records (namespace, collection, key, value, version, saved_at, run, step) \
                 SELECT 'bench', 'tickets', k, v, 1, now() - a * interval '1 microsecond', 'fill', 'save' \
                 FROM unnest($1::text[], $2::jsonb[], $3::int8[]) AS t(k, v, a)",
                &[&keys, &values, &ages],
            )
            .await
            .unwrap();
    }
    client.batch_execute("ANALYZE records").await.unwrap();
    let size = table_size(&client, "records").await;
    eprintln!(
        "filled {records} records in {:.1} s ({} MiB with indexes)",
        t.elapsed().as_secs_f64(),
        size / (1 << 20)
    );

    let mut rows = Vec::new();
    lookups(&store, n_lookups, &mut rows, "all indexes").await;
    let with_gin = saves(&store, n_saves, "all").await;

    drop_index(&client, "records_value").await;
    lookups(&store, n_lookups, &mut rows, "without the GIN index").await;
    let without_gin = saves(&store, n_saves, "nogin").await;

    drop_index(&client, "records_saved_at").await;
    lookups(
        &store,
        n_lookups,
        &mut rows,
        "without GIN and savedAt indexes",
    )
    .await;

    // The archive.
    let mut rng = Rng(5);
    let runs: Vec<ArchivedRun> = (0..n_runs).map(|i| finished_run(i, &mut rng)).collect();
    let json_bytes = runs
        .iter()
        .map(|r| serde_json::to_vec(&r.run).unwrap().len())
        .sum::<usize>()
        / n_runs;
    let before = table_size(&client, "runs").await;
    let t = Instant::now();
    let mut samples = Vec::new();
    for r in &runs {
        let s = Instant::now();
        store.archive(r).await.unwrap();
        samples.push(s.elapsed());
    }
    let total = t.elapsed();
    client.batch_execute("VACUUM ANALYZE runs").await.unwrap();
    let after = table_size(&client, "runs").await;
    let (a50, a99) = percentiles(samples);

    println!("| setup | lookup (limit 20, orderBy savedAt desc) | p50 ms | p99 ms |");
    println!("| --- | --- | ---: | ---: |");
    for (setup, name, p50, p99) in &rows {
        println!("| {setup} | {name} | {p50} | {p99} |");
    }
    println!();
    println!("| saves ({n_saves} each, half new keys, half updates) | one at a time | 8 at once |");
    println!("| --- | ---: | ---: |");
    println!(
        "| with the GIN index | {:.0}/s | {:.0}/s |",
        with_gin.0, with_gin.1
    );
    println!(
        "| without it | {:.0}/s | {:.0}/s |",
        without_gin.0, without_gin.1
    );
    println!();
    println!("| archive ({n_runs} finished Runs, {json_bytes} bytes of JSON each) | figure |");
    println!("| --- | ---: |");
    println!("| per Run, p50 | {} ms |", ms(a50));
    println!("| per Run, p99 | {} ms |", ms(a99));
    println!(
        "| Runs per second, one at a time | {:.0} |",
        n_runs as f64 / total.as_secs_f64()
    );
    println!(
        "| on disk per Run (table, TOAST, 4 indexes) | {} bytes |",
        (after - before) / n_runs as i64
    );

    drop(store);
    if std::env::var_os("BENCH_KEEP").is_some() {
        eprintln!("kept schema {schema} (BENCH_KEEP)");
        return;
    }
    admin
        .batch_execute(&format!("DROP SCHEMA {schema} CASCADE"))
        .await
        .unwrap();
}
