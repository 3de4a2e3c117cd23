//! The cost of crossing the host↔guest boundary: records/s and ns/record for batches of 1 to
//! 10 000 records of 100 B, 1 KiB and 10 KiB, in both directions. `source`: the guest returns a
//! batch from `poll` and the host lifts it. `sink`: the host lowers a batch into `put`. The
//! plugins (`bench/plugins`) do no work of their own beyond cloning a prepared record.
//!
//! Run with `cargo bench --profile release -p wasm-connect-bench --bench boundary` (after
//! `scripts/build-plugins`).

use std::path::PathBuf;
use std::time::Duration;

use criterion::{BenchmarkId, Criterion, Throughput, criterion_group, criterion_main};
use wasm_connect::plugin::Plugin;
use wasm_connect::sandbox::wit::types::{Data, SinkRecord};
use wasm_connect::sandbox::{
    InstanceContext, Limits, PutBatch, Sandbox, SinkTaskInstance, SourceTaskInstance,
};

const BATCHES: &[u32] = &[1, 10, 100, 1_000, 10_000];
const SIZES: &[(usize, &str)] = &[(100, "100B"), (1024, "1KiB"), (10 * 1024, "10KiB")];

fn plugin_file(name: &str) -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("../dist/bench-plugins")
        .join(format!("{name}.wasm"))
}

/// Linear memory of the benchmark's instances: 10 000 records of 10 KiB are 100 MB on each
/// side of the boundary, and the guest's vectors grow by doubling.
const MEMORY: usize = 1 << 30;

fn context() -> InstanceContext {
    let mut ctx = InstanceContext::bare("bench");
    ctx.limits = Limits {
        memory_bytes: MEMORY,
        ..Limits::default()
    };
    ctx
}

fn boundary(c: &mut Criterion) {
    let rt = tokio::runtime::Runtime::new().expect("runtime");
    // Reserved as the worker would for this limit (a memory cannot grow past its reservation).
    let sandbox = Sandbox::with_reservation(None, MEMORY as u64).expect("sandbox");
    let load = |name: &str| {
        rt.block_on(Plugin::load(&sandbox, &plugin_file(name)))
            .unwrap_or_else(|e| panic!("{e} (run scripts/build-plugins first)"))
    };
    let source = load("bench-source");
    let sink = load("bench-sink");

    let mut group = c.benchmark_group("source");
    group
        .sample_size(10)
        .measurement_time(Duration::from_secs(1))
        .warm_up_time(Duration::from_millis(300));
    for (size, label) in SIZES {
        let config = vec![("record.size".to_owned(), size.to_string())];
        let mut task = rt
            .block_on(SourceTaskInstance::create(
                &sandbox,
                &source.component,
                source.contract,
                &context(),
                &config,
            ))
            .expect("instantiate")
            .expect("create");
        for &batch in BATCHES {
            group.throughput(Throughput::Elements(u64::from(batch)));
            group.bench_with_input(BenchmarkId::new(*label, batch), &batch, |b, &batch| {
                // As the task loop reads it: lifted, checked, borrowed in place.
                b.iter(|| {
                    let polled = rt.block_on(task.poll_batch(batch)).expect("poll");
                    polled.read().expect("well-formed").len()
                })
            });
        }
    }
    group.finish();

    let mut group = c.benchmark_group("sink");
    group
        .sample_size(10)
        .measurement_time(Duration::from_secs(1))
        .warm_up_time(Duration::from_millis(300));
    let mut task = rt
        .block_on(SinkTaskInstance::create(
            &sandbox,
            &sink.component,
            sink.contract,
            &context(),
            &Vec::new(),
        ))
        .expect("instantiate")
        .expect("create");
    for (size, label) in SIZES {
        for &batch in BATCHES {
            let records: Vec<SinkRecord> = (0..batch)
                .map(|i| SinkRecord {
                    topic: "bench".into(),
                    partition: 0,
                    offset: i64::from(i),
                    key: None,
                    value: Some(Data::Bytes(vec![b'x'; *size])),
                    headers: Vec::new(),
                    timestamp: None,
                })
                .collect();
            group.throughput(Throughput::Elements(u64::from(batch)));
            group.bench_with_input(BenchmarkId::new(*label, batch), &records, |b, records| {
                // Packing counts: the worker packs as it consumes, once per record like this.
                b.iter(|| {
                    let batch = PutBatch::from_records(records).expect("pack");
                    rt.block_on(task.put(&batch)).expect("put")
                })
            });
        }
    }
    group.finish();
}

criterion_group!(benches, boundary);
criterion_main!(benches);
