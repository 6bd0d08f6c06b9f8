//! How a tile's elements are spread over the threads of a block.
//!
//! A tile of `n` elements (row-major) is cut into chunks of `v` consecutive elements along its
//! last axis; chunk `c` belongs to thread `c mod threads`, so consecutive threads hold
//! consecutive chunks (coalesced) and a thread holds `slots = max(1, chunks / threads)` chunks.
//! When a tile has fewer chunks than the block has threads, thread `t` holds a copy of chunk
//! `t mod chunks`: only threads `t < chunks` own their elements (and write them to memory).
//!
//! The layout depends only on the shape and the thread count, so two tiles of one shape always
//! agree and elementwise ops never move data. All sizes are powers of two.

/// The layout of one tile shape in a block of `threads` threads.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Layout {
    pub shape: Vec<usize>,
    pub numel: usize,
    /// Elements per chunk (along the last axis).
    pub vec: usize,
    pub chunks: usize,
    /// Chunks held by each thread.
    pub slots: usize,
    pub threads: usize,
}

impl Layout {
    /// The layout of `shape` for `threads` threads, with chunks of at most `max_vec` elements.
    pub fn new(shape: &[usize], threads: u32, max_vec: usize) -> Layout {
        let numel: usize = shape.iter().product();
        let last = shape.last().copied().unwrap_or(1);
        let vec = max_vec.min(last).min((numel / threads as usize).max(1)).max(1);
        let chunks = numel / vec;
        let threads = threads as usize;
        Layout {
            shape: shape.to_vec(),
            numel,
            vec,
            chunks,
            slots: (chunks / threads).max(1),
            threads,
        }
    }

    /// Elements a thread holds.
    pub fn per_thread(&self) -> usize {
        self.slots * self.vec
    }

    /// Whether threads beyond `chunks` hold copies (then only `tid < chunks` own elements).
    pub fn replicated(&self) -> bool {
        self.chunks < self.threads
    }

    /// Row-major strides.
    pub fn strides(&self) -> Vec<usize> {
        strides(&self.shape)
    }
}

/// Row-major strides of a shape.
pub fn strides(shape: &[usize]) -> Vec<usize> {
    let mut s = vec![1; shape.len()];
    for i in (0..shape.len().saturating_sub(1)).rev() {
        s[i] = s[i + 1] * shape[i + 1];
    }
    s
}
