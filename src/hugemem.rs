//! Zero-filled arrays for large tables read at random, and for a short run's working
//! memory: an anonymous memory map advised to use huge pages, or the heap.
//!
//! Random reads of a table of tens of megabytes miss the TLB as well as the cache, and on
//! a virtual machine the page walks dominate: huge pages halve the cost of a random read
//! of a 100 MB array (40 ns versus 70-90 ns measured on the project machine, where
//! transparent huge pages are `madvise`-only). A short run gains too: each 4 KB page a
//! process touches costs a fault, its zeroing and its teardown (about 1.5-2 us on that
//! machine), and a 2 MB page is one fault. Maps are rounded up to whole 2 MB pages, the
//! length Linux (6.7 and later) aligns an anonymous map to, so that the kernel can back
//! them with huge pages at all. The map is memmap2's safe anonymous map; on any failure
//! the memory lives on the heap.

use memmap2::{MmapMut, MmapOptions};
use zerocopy::IntoBytes;

/// The huge page size of x86-64 (and of arm64 with 4 KB pages).
const HUGE_PAGE: usize = 2 << 20;

/// `len` zero bytes, mapped in huge pages when `len >= map_min`. The memory is aligned to
/// 8 bytes, so it can be viewed as words of up to 8 bytes.
pub(crate) struct HugeBytes {
    mem: Mem,
    len: usize,
}

enum Mem {
    Map(MmapMut),
    /// Words, not bytes, for the alignment.
    Heap(Vec<u64>),
}

impl HugeBytes {
    /// `len` zero bytes; below `map_min` on the heap, where a map's system calls and
    /// 2 MB zeroings would cost more than the faults and page walks they save.
    pub(crate) fn zeroed(len: usize, map_min: usize) -> HugeBytes {
        if len >= map_min {
            if let Ok(map) = MmapOptions::new()
                .len(len.next_multiple_of(HUGE_PAGE))
                .map_anon()
            {
                // Advice is a hint; without it (or off Linux, where there is no such
                // advice) the map still works, in small pages.
                #[cfg(target_os = "linux")]
                let _ = map.advise(memmap2::Advice::HugePage);
                return HugeBytes {
                    mem: Mem::Map(map),
                    len,
                };
            }
        }
        HugeBytes {
            mem: Mem::Heap(vec![0; len.div_ceil(8)]),
            len,
        }
    }

    #[inline(always)]
    pub(crate) fn bytes(&self) -> &[u8] {
        match &self.mem {
            Mem::Map(map) => &map[..self.len],
            Mem::Heap(heap) => &heap.as_bytes()[..self.len],
        }
    }

    #[inline(always)]
    pub(crate) fn bytes_mut(&mut self) -> &mut [u8] {
        match &mut self.mem {
            Mem::Map(map) => &mut map[..self.len],
            Mem::Heap(heap) => &mut heap.as_mut_bytes()[..self.len],
        }
    }
}

impl Clone for HugeBytes {
    /// A copy on the heap (tables are cloned rarely, never on a hot path).
    fn clone(&self) -> Self {
        let mut copy = HugeBytes::zeroed(self.len, usize::MAX);
        copy.bytes_mut().copy_from_slice(self.bytes());
        copy
    }
}

#[cfg(test)]
mod tests {
    use super::HugeBytes;

    /// Both backings give `len` zero bytes that keep what is written, and a clone that
    /// copies the contents.
    #[test]
    fn map_and_heap_hold_the_same_memory() {
        for (len, map_min) in [(0, usize::MAX), (13, usize::MAX), (4099, 0), (3 << 20, 1)] {
            let mut mem = HugeBytes::zeroed(len, map_min);
            assert_eq!(mem.bytes().len(), len);
            assert!(mem.bytes().iter().all(|&b| b == 0));
            for (i, b) in mem.bytes_mut().iter_mut().enumerate() {
                *b = (i * 7 + 1) as u8;
            }
            let copy = mem.clone();
            assert!((0..len).all(|i| mem.bytes()[i] == (i * 7 + 1) as u8));
            assert_eq!(copy.bytes(), mem.bytes());
        }
    }
}
