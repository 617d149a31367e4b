//! The trainer's per-position array: each position's token and the record of the pair
//! starting there, 8 bytes per position, in huge pages where the kernel allows.

use crate::hugemem::HugeBytes;

/// Below this many bytes the array lives on the heap: a map's system calls would cost more
/// than the page-table walks they save.
const MAP_MIN_BYTES: usize = 8 << 20;

/// Byte offsets within a slot: the token, then the record.
const TOK: usize = 0;
const REC: usize = 4;

/// Writes `v` at byte `at` of `bytes`.
#[inline(always)]
fn put(bytes: &mut [u8], at: usize, v: u32) {
    bytes[at..at + 4].copy_from_slice(&v.to_ne_bytes());
}

/// `len` slots of (token: u32, record: u32), zero-initialised.
///
/// Random access into this array is the trainer's bottleneck, so it lives in huge pages
/// ([`HugeBytes`]): TLB misses, not cache misses, dominate on a virtual machine.
pub(super) struct Slots {
    mem: HugeBytes,
}

impl Slots {
    pub(super) fn new(len: usize) -> Slots {
        Slots {
            mem: HugeBytes::zeroed(len * 8, MAP_MIN_BYTES),
        }
    }

    #[inline(always)]
    fn bytes(&self) -> &[u8] {
        self.mem.bytes()
    }

    #[inline(always)]
    fn bytes_mut(&mut self) -> &mut [u8] {
        self.mem.bytes_mut()
    }

    #[inline(always)]
    fn read(&self, i: usize) -> u32 {
        let b = self.bytes();
        u32::from_ne_bytes(b[i..i + 4].try_into().unwrap_or([0; 4]))
    }

    /// The token at position `p`.
    #[inline(always)]
    pub(super) fn tok(&self, p: u32) -> u32 {
        self.read(p as usize * 8 + TOK)
    }

    /// The token at `p` and the record of the pair that started at `p` when last set
    /// (one 8-byte load of the [`TOK`], [`REC`] layout).
    #[inline(always)]
    pub(super) fn get(&self, p: u32) -> (u32, u32) {
        let i = p as usize * 8;
        let b = self.bytes();
        let v = u64::from_ne_bytes(b[i..i + 8].try_into().unwrap_or([0; 8]));
        if cfg!(target_endian = "little") {
            (v as u32, (v >> 32) as u32)
        } else {
            ((v >> 32) as u32, v as u32)
        }
    }

    #[inline(always)]
    pub(super) fn set_tok(&mut self, p: u32, t: u32) {
        put(self.bytes_mut(), p as usize * 8 + TOK, t);
    }

    #[inline(always)]
    pub(super) fn set_rec(&mut self, p: u32, r: u32) {
        put(self.bytes_mut(), p as usize * 8 + REC, r);
    }

    /// The slots before `mid` and those from `mid` on.
    pub(super) fn split_at_mut(&mut self, mid: u32) -> (SlotRange<'_>, SlotRange<'_>) {
        let (low, high) = self.bytes_mut().split_at_mut(mid as usize * 8);
        (
            SlotRange {
                bytes: low,
                first: 0,
            },
            SlotRange {
                bytes: high,
                first: mid,
            },
        )
    }
}

/// A run of slots starting at `first`, for one thread to fill while another fills the
/// rest.
pub(super) struct SlotRange<'a> {
    bytes: &'a mut [u8],
    first: u32,
}

impl SlotRange<'_> {
    /// Sets slot `p`'s token and record, as `Slots::set_tok` and `Slots::set_rec` do.
    #[inline(always)]
    pub(super) fn set(&mut self, p: u32, tok: u32, rec: u32) {
        let i = (p - self.first) as usize * 8;
        put(self.bytes, i + TOK, tok);
        put(self.bytes, i + REC, rec);
    }
}
