// SPDX-License-Identifier: MIT
//! cpu_split (Rust): two hot functions in a known CPU split, one with an inlined helper.
//!
//! Built as build/targets/cpu_split_rs with --crate-name cpu_split (mk/targets.mk), so its functions
//! demangle as cpu_split::hot_a etc. Usage: cpu_split_rs [SECONDS [EXIT_CODE]]   (default 4 s, exit 0). Dependency-free (rustc -O -g).
//!
//! The main loop alternates hot_a (7 work units) and hot_b (3 units). hot_a's loop calls
//! `mix`, which is `#[inline(always)]`, so a profile must show `cpu_split::mix` as an inlined frame
//! above `cpu_split::hot_a`. Each call is timed with CLOCK_THREAD_CPUTIME_ID and the measured truth
//! is printed at the end, e.g. `split hot_a=0.703 hot_b=0.297`. Markers: BEGIN:/END: bound each
//! function's body, HOT: tags the hot line; tests read line numbers from this file.
use std::hint::black_box;
use std::time::{Duration, Instant};

#[repr(C)]
struct Timespec {
    tv_sec: i64,
    tv_nsec: i64,
}

extern "C" {
    // glibc, which std links anyway.
    fn clock_gettime(clk: i32, ts: *mut Timespec) -> i32;
}

const CLOCK_THREAD_CPUTIME_ID: i32 = 3;
const UNIT_ITERS: u64 = 40_000;

fn thread_cpu_s() -> f64 {
    let mut ts = Timespec { tv_sec: 0, tv_nsec: 0 };
    // SAFETY: ts is a valid, writable timespec; the clock id is a Linux constant.
    unsafe { clock_gettime(CLOCK_THREAD_CPUTIME_ID, &mut ts) };
    ts.tv_sec as f64 + ts.tv_nsec as f64 / 1e9
}

#[inline(always)]
fn mix(x: u64, k: u64) -> u64 { // BEGIN:mix
    let y = (x ^ (x >> 31)).wrapping_mul(0xbf58476d1ce4e5b9 ^ k); // HOT:mix
    y.rotate_left(17).wrapping_add(k)
} // END:mix

#[inline(never)]
fn hot_a(mut x: u64, units: u64) -> u64 { // BEGIN:hot_a
    for i in 0..units * UNIT_ITERS {
        x = mix(black_box(x), i); // HOT:hot_a
    }
    x
} // END:hot_a

#[inline(never)]
fn hot_b(mut x: u64, units: u64) -> u64 { // BEGIN:hot_b
    for _ in 0..units * UNIT_ITERS {
        x = black_box(x).wrapping_mul(6364136223846793005).wrapping_add(1442695040888963407); // HOT:hot_b
        x ^= x >> 29;
    }
    x
} // END:hot_b

fn main() {
    let args: Vec<String> = std::env::args().collect();
    let seconds: f64 = args.get(1).and_then(|s| s.parse().ok()).unwrap_or(4.0);
    let code: i32 = args.get(2).and_then(|s| s.parse().ok()).unwrap_or(0);
    let end = Instant::now() + Duration::from_secs_f64(seconds);
    let (mut ta, mut tb) = (0.0f64, 0.0f64);
    let mut x: u64 = 88172645463325252;
    let mut iters: u64 = 0;
    while Instant::now() < end {
        let t0 = thread_cpu_s();
        x = hot_a(x, 7);
        let t1 = thread_cpu_s();
        x = hot_b(x, 3);
        let t2 = thread_cpu_s();
        ta += t1 - t0;
        tb += t2 - t1;
        iters += 1;
    }
    if ta + tb > 0.0 {
        println!("split hot_a={:.3} hot_b={:.3}", ta / (ta + tb), tb / (ta + tb));
    }
    println!("cpu_s hot_a={:.3} hot_b={:.3}", ta, tb);
    println!("iterations {} result {:x}", iters, x);
    std::process::exit(code);
}
