//! How a stored run's results document encodes: the bytes and the time to write and read it
//! back as JSON and as MessagePack (the stored encoding), beside the time to analyse the run.
//!
//!     cargo run --release -p isobench-experiment --example document_encoding -- DB [RUN]

use std::time::Instant;

use isobench_experiment::analysis::{analyze, Results};
use isobench_store::Store;

/// The best of five timings of `f`, in milliseconds, with its last value.
fn best<T>(mut f: impl FnMut() -> T) -> (f64, T) {
    let mut best = f64::INFINITY;
    let mut last = None;
    for _ in 0..5 {
        let start = Instant::now();
        last = Some(f());
        best = best.min(start.elapsed().as_secs_f64() * 1e3);
    }
    (best, last.expect("ran"))
}

/// Prints the size of `r` encoded as `name`, the times to encode and decode it, and
/// whether it decodes to the same results.
fn encoding(
    name: &str,
    r: &Results,
    encode: impl Fn(&Results) -> Vec<u8>,
    decode: impl Fn(&[u8]) -> Results,
) {
    let (write_ms, data) = best(|| encode(r));
    let (read_ms, back) = best(|| decode(&data));
    println!(
        "{name:8} {:8.2} MB  write {write_ms:6.1} ms  read {read_ms:6.1} ms  same: {}",
        data.len() as f64 / 1e6,
        back == *r
    );
}

fn main() -> anyhow::Result<()> {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let db = args.first().expect("usage: document_encoding DB [RUN]");
    let store = Store::open_read_only(db)?;
    let run = store.resolve_run(args.get(1).map_or("latest", String::as_str))?;
    let (load_ms, loaded) = best(|| store.load_run(&run).expect("loads"));
    let (analyze_ms, r) = best(|| analyze(&loaded));
    println!("run {run}: load {load_ms:.1} ms, analyse {analyze_ms:.1} ms");
    encoding(
        "json",
        &r,
        |r| serde_json::to_vec(r).expect("encodes"),
        |d| serde_json::from_slice(d).expect("decodes"),
    );
    encoding(
        "msgpack",
        &r,
        |r| rmp_serde::to_vec_named(r).expect("encodes"),
        |d| rmp_serde::from_slice(d).expect("decodes"),
    );
    Ok(())
}
