//! Timing on the GPU with CUDA events: kernels between two events recorded on the stream, after
//! warm-up, with the L2 cache flushed before every timed run, and the device-to-device copy
//! bandwidth measured the same way (the ceiling memory-bound kernels are compared with).

use crate::gpu::{Function, Gpu, KernelArg, RuntimeError};
use crate::memory::DeviceBuffer;

/// How to time: runs after warm-up, and the size of the buffer written to evict the L2 cache.
#[derive(Clone, Copy, Debug)]
pub struct TimingOptions {
    pub warmup: usize,
    pub runs: usize,
    /// Bytes zeroed before each timed run (several times the L2 size); 0 disables flushing.
    pub flush_bytes: usize,
}

impl Default for TimingOptions {
    fn default() -> TimingOptions {
        // The H200's L2 is 50 MB: writing 256 MB evicts it.
        TimingOptions {
            warmup: 5,
            runs: 50,
            flush_bytes: 256 << 20,
        }
    }
}

/// Milliseconds of each timed run, in run order.
#[derive(Clone, Debug, PartialEq)]
pub struct Timings {
    pub ms: Vec<f64>,
}

impl Timings {
    fn sorted(&self) -> Vec<f64> {
        let mut v = self.ms.clone();
        v.sort_by(|a, b| a.total_cmp(b));
        v
    }

    /// The value below which `q` of the runs fall (0.5: the median).
    pub fn quantile(&self, q: f64) -> f64 {
        let v = self.sorted();
        if v.is_empty() {
            return f64::NAN;
        }
        v[((v.len() - 1) as f64 * q).round() as usize]
    }

    pub fn median(&self) -> f64 {
        self.quantile(0.5)
    }
}

impl Gpu {
    /// Times `runs` launches of `f`, each alone between two events, the L2 flushed before each.
    pub fn time_kernel(
        &self,
        f: &Function,
        grid: [u32; 3],
        block: u32,
        dynamic_smem: u32,
        args: &[KernelArg<'_>],
        opts: &TimingOptions,
    ) -> Result<Timings, RuntimeError> {
        let flush = if opts.flush_bytes > 0 {
            Some(self.zeros(opts.flush_bytes)?)
        } else {
            None
        };
        for _ in 0..opts.warmup {
            self.launch_async(f, grid, block, dynamic_smem, args)?;
        }
        let timed = |g: &Gpu| g.launch_async(f, grid, block, dynamic_smem, args);
        self.time_each(opts.runs, flush, &timed)
    }

    /// The device-to-device copy bandwidth a kernel moving `bytes` (read plus written) could
    /// reach: copies of `bytes / 2`, timed like [`time_kernel`](Self::time_kernel) (warm-up,
    /// L2 flushed before each run), in GB/s. A small case cannot reach a large copy's rate.
    pub fn copy_bandwidth_like(&self, bytes: usize, opts: &TimingOptions) -> Result<f64, RuntimeError> {
        let half = (bytes / 2).max(4);
        let src = self.zeros(half)?;
        let mut dst = self.zeros(half)?;
        for _ in 0..opts.warmup {
            self.copy_on(&self.stream, &src, &mut dst)?;
        }
        let flush = if opts.flush_bytes > 0 {
            Some(self.zeros(opts.flush_bytes)?)
        } else {
            None
        };
        let cell = std::cell::RefCell::new(dst);
        let copy = |g: &Gpu| g.copy_on(&g.stream, &src, &mut cell.borrow_mut());
        let t = self.time_each(opts.runs, flush, &copy)?;
        Ok(2.0 * half as f64 / (t.median() * 1e-3) / 1e9)
    }

    /// Device-to-device copy bandwidth in GB/s (bytes read plus bytes written per second), the
    /// median of `runs` copies of `bytes`.
    pub fn copy_bandwidth(&self, bytes: usize, runs: usize) -> Result<f64, RuntimeError> {
        let src = self.zeros(bytes)?;
        let mut dst = self.zeros(bytes)?;
        for _ in 0..3 {
            self.copy_on(&self.stream, &src, &mut dst)?;
        }
        let cell = std::cell::RefCell::new(dst);
        let copy = |g: &Gpu| g.copy_on(&g.stream, &src, &mut cell.borrow_mut());
        let t = self.time_each(runs, None, &copy)?;
        Ok(2.0 * bytes as f64 / (t.median() * 1e-3) / 1e9)
    }

    fn time_each(
        &self,
        runs: usize,
        mut flush: Option<DeviceBuffer>,
        work: &dyn Fn(&Gpu) -> Result<(), RuntimeError>,
    ) -> Result<Timings, RuntimeError> {
        let (start, end) = (self.new_event()?, self.new_event()?);
        let mut ms = Vec::with_capacity(runs);
        for _ in 0..runs {
            if let Some(buf) = flush.as_mut() {
                self.memset_zero_on(&self.stream, buf)?;
            }
            start.record(&self.stream)?;
            work(self)?;
            end.record(&self.stream)?;
            ms.push(start.elapsed_ms(&end)? as f64);
        }
        Ok(Timings { ms })
    }
}
