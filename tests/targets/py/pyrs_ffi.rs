// SPDX-License-Identifier: MIT
// A dependency-free Rust cdylib called from Python through ctypes (ffi_rust.py): pyrs_spin(n)
// spends its time in pyrs_ffi::hot::mix, kept out of line so it is a frame of its own.

pub mod hot {
    #[inline(never)]
    pub fn mix(n: u64) -> u64 {
        let mut x: u64 = 0x9e37_79b9_7f4a_7c15;
        for i in 0..n {
            x ^= i.wrapping_mul(0x2545_f491_4f6c_dd1d); // HOT:mix
            x = x.rotate_left(17).wrapping_add(i);
        }
        x
    }
}

#[no_mangle]
pub extern "C" fn pyrs_spin(n: u64) -> u64 {
    std::hint::black_box(hot::mix(std::hint::black_box(n)))
}
