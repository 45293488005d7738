// SPDX-License-Identifier: MIT
//! overflow_rs: spins for SECONDS of wall time (default 0.3; sampled meanwhile), prints
//! "recursing", then recurses until its stack overflows. Rust's runtime catches the fault on its
//! guard page with its own SIGSEGV handler on an alternate stack, prints "thread 'main' has
//! overflowed its stack" and aborts (SIGABRT): the truth a test checks under the preload agent,
//! which holds SIGSEGV (src/agent/safecopy.c). Dependency-free (rustc -O -g).
use std::hint::black_box;
use std::time::{Duration, Instant};

#[allow(unconditional_recursion)]
fn deeper(n: u64) -> u64 {
    let pad = black_box([n; 64]);
    black_box(deeper(pad[(n % 64) as usize] + 1)) + pad[0]
}

fn main() {
    let secs: f64 = std::env::args().nth(1).and_then(|s| s.parse().ok()).unwrap_or(0.3);
    let end = Instant::now() + Duration::from_secs_f64(secs);
    let mut n = 0u64;
    while Instant::now() < end {
        n = black_box(n.wrapping_mul(31).wrapping_add(7));
    }
    println!("recursing");
    black_box(deeper(black_box(n)));
}
