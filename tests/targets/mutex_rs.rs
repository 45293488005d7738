// SPDX-License-Identifier: MIT
//! mutex_rs: N threads taking one std::sync::Mutex, about 100 us of work inside and 1 us
//! outside, for the lock-contended verdict (the Rust twin of `bounds mutex`).
//! Usage: mutex_rs [SECONDS [THREADS]]; prints "truth wait=W" (the threads' mean share of wall
//! time spent in lock(), by Instant around each call) and "done".
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

#[inline(never)]
fn work(n: u64, seed: u64) -> u64 {
    let mut x = seed;
    for i in 0..n {
        x = x.wrapping_mul(6364136223846793005).wrapping_add(i);
    }
    x
}

fn main() {
    let args: Vec<String> = std::env::args().collect();
    let secs: f64 = args.get(1).and_then(|s| s.parse().ok()).unwrap_or(2.0);
    let n: usize = args.get(2).and_then(|s| s.parse().ok()).unwrap_or(8);
    let shared = Arc::new(Mutex::new(0u64));
    let stop = Arc::new(AtomicBool::new(false));
    let handles: Vec<_> = (0..n)
        .map(|_| {
            let shared = Arc::clone(&shared);
            let stop = Arc::clone(&stop);
            std::thread::spawn(move || {
                let t0 = Instant::now();
                let mut waited = Duration::ZERO;
                let mut local = 1u64;
                while !stop.load(Ordering::Relaxed) {
                    let w = Instant::now();
                    let mut g = shared.lock().unwrap();
                    waited += w.elapsed();
                    *g = work(15000, *g);
                    drop(g);
                    local = work(150, local);
                }
                std::hint::black_box(local);
                waited.as_secs_f64() / t0.elapsed().as_secs_f64()
            })
        })
        .collect();
    std::thread::sleep(Duration::from_secs_f64(secs));
    stop.store(true, Ordering::Relaxed);
    let shares: Vec<f64> = handles.into_iter().map(|h| h.join().unwrap()).collect();
    println!("truth wait={:.3}", shares.iter().sum::<f64>() / shares.len() as f64);
    println!("done");
}
