#!/usr/bin/python3
# SPDX-License-Identifier: MIT
"""The end of a recording (issue 13, point 3): from the program's exit to pyrsprof's, the time
the symbolization and both graphs (and the reports) take, on programs with big binaries loaded.
`make bench` runs this; a table, no assertion. Goal: under 2 s.

1. CPython with NumPy and a large Rust library loaded: tests/targets/py/bigmods.py under Debian's
   python3 (its NumPy: stripped extensions, named from .dynsym) with rustc's librustc_driver and
   LLVM (~350 MB of code, from the Rust toolchain's lib folder) loaded into the process.
2. A large Rust binary at work: rustc itself (librustc_driver, LLVM) compiling a generated source
   of FNS generic functions at -C opt-level=1, recorded with --subprocesses under sh, which
   prints the time rustc ended. Its samples are nearly all in those libraries: thousands of
   distinct frames to symbolize, demangle and inline.

The end is measured from the time the program printed as its last act (time.time(), or date in
the shell after rustc) to pyrsprof's exit; stats.json's symbols.time_s is the symbolization's
part. Usage: PYRSPROF=build/release/pyrsprof /usr/bin/python3 tests/bench/bench_endrec.py [--quick]
"""
import glob
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(REPO / "tests" / "bench"))
from run import table  # noqa: E402  (the benchmarks' table format)

PRS = os.environ.get("PYRSPROF", str(REPO / "bin" / "pyrsprof"))
PY = "/usr/bin/python3"
QUICK = "--quick" in sys.argv
GOAL_S = 2.0


def rust_libdir():
    rustc = shutil.which("rustc")
    if not rustc:
        return None
    root = subprocess.run([rustc, "--print", "sysroot"], capture_output=True, text=True).stdout.strip()
    lib = Path(root) / "lib"
    return lib if glob.glob(str(lib / "librustc_driver-*.so")) else None


def generated_rust(path: Path, fns: int):
    out = ["use std::collections::HashMap;"]
    for i in range(fns):
        out.append(f"""
#[inline(never)]
pub fn f{i}<T: Copy + Into<u64>>(v: &[T], m: &mut HashMap<u64, u64>) -> u64 {{
    let s: u64 = v.iter().map(|x| (*x).into()).filter(|x| x % {i + 2} != 0)
        .fold(0u64, |a, b| a.wrapping_mul(31).wrapping_add(b));
    *m.entry(s % 97).or_insert(0) += s;
    let w: Vec<String> = v.iter().take({i % 7 + 2}).map(|x| format!("{{}}-{i}", (*x).into())).collect();
    s ^ w.len() as u64
}}""")
    out.append("fn main() {\n  let mut m = HashMap::new();\n  let v: Vec<u32> = (0..100).collect();\n"
               "  let v16: Vec<u16> = v.iter().map(|x| *x as u16).collect();\n  let mut t = 0u64;")
    out += [f"  t ^= f{i}(&v, &mut m) ^ f{i}(&v16, &mut m);" for i in range(fns)]
    out.append('  println!("{} {}", t, m.len());\n}')
    path.write_text("\n".join(out))


def recorded(cmd, outdir, env=None, extra=()):
    """Runs `pyrsprof run` on cmd: (end of recording s, stats.json, stdout)."""
    p = subprocess.run([PRS, "run", *extra, "-o", str(outdir), "--", *map(str, cmd)],
                       capture_output=True, text=True, env=env, timeout=600)
    t_exit = time.time()
    ends = [line.split()[1] for line in p.stdout.splitlines() if line.startswith("end ")]
    if p.returncode != 0 or not ends:
        raise RuntimeError(f"{cmd[0]}: exit {p.returncode}: {p.stderr[-500:]}")
    return t_exit - float(ends[-1]), json.loads((outdir / "stats.json").read_text()), p.stdout


def main():
    tmp = Path(tempfile.mkdtemp(prefix="pyrsprof-endrec-"))
    rows = []
    lib = rust_libdir()
    try:
        has_numpy = subprocess.run([PY, "-c", "import numpy"], capture_output=True).returncode == 0
        if has_numpy:
            env = dict(os.environ, GLIBC_TUNABLES="glibc.rtld.optional_static_tls=16777216")
            cmd = [PY, REPO / "tests" / "targets" / "py" / "bigmods.py", 5 if QUICK else 20]
            if lib:
                cmd.append(lib)
            end, st, out = recorded(cmd, tmp / "bigmods", env=env)
            what = "CPython + NumPy" + (" + rustc's libraries loaded" if "loaded" in out else "")
            rows.append((what, st["samples"], st["symbols"]["frames"], f"{st['symbols']['time_s']:.2f}",
                         f"{end:.2f}", "met" if end < GOAL_S else "NOT met"))
        else:
            rows.append(("CPython + NumPy: no numpy for /usr/bin/python3 (python3-numpy)", "", "", "",
                         "", "skipped"))
        if lib:
            src = tmp / "big.rs"
            generated_rust(src, 60 if QUICK else 200)
            shell = f"rustc -C opt-level=1 -o {tmp / 'big'} {src} && date +'end %s.%N'"
            end, st, _ = recorded(["sh", "-c", shell], tmp / "rustc", extra=["--subprocesses"])
            rows.append(("rustc (librustc_driver + LLVM sampled)", st["samples"], st["symbols"]["frames"],
                         f"{st['symbols']['time_s']:.2f}", f"{end:.2f}",
                         "met" if end < GOAL_S else "NOT met"))
        else:
            rows.append(("rustc: no Rust toolchain with librustc_driver", "", "", "", "", "skipped"))
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    table(f"end of the recording: program exit -> pyrsprof exit (goal < {GOAL_S:g} s; 1-min load "
          f"{os.getloadavg()[0]:.1f})",
          ["program", "samples", "frames symbolized", "symbolization s", "end s", "goal"], rows)
    return 0


if __name__ == "__main__":
    sys.exit(main())
