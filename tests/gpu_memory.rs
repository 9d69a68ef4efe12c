//! A GPU without room for a program's vectors (VECTORS.md, "Backends"): with most
//! of the device's memory held by this test, `--backend auto` computes on the CPU
//! and `--backend cuda` fails with an error that says so. Its own test binary, so
//! that no other GPU test runs while the GPU is full (cargo runs test binaries
//! one at a time). Prints "skipped: no CUDA device" where there is none.

#[test]
fn auto_computes_on_the_cpu_where_the_gpu_is_full() {
    if vlad::vec::cuda_available() {
        #[cfg(feature = "cuda")]
        full::run();
    } else {
        use std::io::Write;
        let _ = writeln!(
            std::io::stderr(),
            "auto_computes_on_the_cpu_where_the_gpu_is_full: skipped: no CUDA device ({})",
            vlad::vec::cuda_unavailable_reason()
        );
    }
}

#[cfg(feature = "cuda")]
mod full {
    /// The program: vectors of 3 × 10⁸ numbers (2.4 GB each), all 1.5: the sum of
    /// their squares is 2.25 n, the gradient of `x · x` is 2x, whose sum is 3 n
    /// (sums of multiples of 0.25 far below 2^53: exact in any order).
    const N: usize = 300_000_000;

    fn program() -> String {
        format!(
            "(define x (vec-shift 1.5 (make-vec {N} 0)))
             (vec-sum (vec* x x))
             (vec-sum ((gradient-R (lambda (x) (vec-dot x x))) x))\n"
        )
    }

    pub fn run() {
        let dir = std::env::temp_dir().join(format!("vlad-gpu-memory-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let f = dir.join("full.vlad");
        std::fs::write(&f, program()).unwrap();
        let run = |b: &str| {
            std::process::Command::new(env!("CARGO_BIN_EXE_vlad"))
                .args(["--backend", b])
                .arg(&f)
                .output()
                .unwrap()
        };

        let expected = format!("{:.1}\n{:.1}\n", 2.25 * N as f64, 3.0 * N as f64);
        let ctx = cudarc::driver::CudaContext::new(0).unwrap();
        let stream = ctx.default_stream();
        let (free, _) = ctx.mem_get_info().unwrap();

        // With the GPU's memory free, `cuda` computes it there (the same values),
        // on a device with room for the program's few vectors of 2.4 GB.
        if free >= 16_000_000_000 {
            let o = run("cuda");
            assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
            assert_eq!(String::from_utf8_lossy(&o.stdout), expected);
        } else {
            use std::io::Write;
            let _ = writeln!(
                std::io::stderr(),
                "auto_computes_on_the_cpu_where_the_gpu_is_full: the run with the GPU free skipped: {free} bytes free"
            );
        }

        // Hold all but 1.5 GB of the device's free memory: room for vlad's context and
        // kernels, not for one of its vectors.
        let keep = 1_500_000_000usize;
        let held = (free > keep).then(|| stream.alloc_zeros::<u8>(free - keep).unwrap());
        stream.synchronize().unwrap();
        let (left, _) = ctx.mem_get_info().unwrap();
        assert!(left < N * 8, "{} bytes still free", left);

        let o = run("auto");
        assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
        assert_eq!(String::from_utf8_lossy(&o.stdout), expected);

        let o = run("cuda");
        let err = String::from_utf8_lossy(&o.stderr);
        assert_eq!(o.status.code(), Some(1), "{}", err);
        assert!(err.contains(&format!("the GPU has no room for {N} numbers (2.4 GB)")), "{}", err);
        assert!(err.contains("--backend auto or cpu computes on the host"), "{}", err);

        drop(held);
        let _ = std::fs::remove_dir_all(&dir);
    }
}
