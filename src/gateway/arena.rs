//! The CGI process's allocator: a process that answers one request and exits hands out memory
//! from a fixed static arena by moving a pointer, and frees nothing but the latest block
//! (most are never given back before the exit does it at once). musl's `malloc` and `free`
//! were a third of a CGI request's instructions, with an `mmap` or `munmap` for many blocks.
//! Off by default (tests and benches link the library and never turn it on); the binary turns
//! it on as it starts and off again once it knows it lives long: FastCGI, `resolve serve` and
//! the commands use the system allocator, as does a CGI process once the arena is full, so
//! memory stays bounded by the arena's size plus what the system allocator would have used.
//! A `GlobalAlloc` has no safe interface, so this module, like `signals`, allows `unsafe` for
//! itself.
#![allow(unsafe_code)]

use std::alloc::{GlobalAlloc, Layout, System};
use std::cell::UnsafeCell;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};

/// Bytes of the arena. It lies in `.bss`, so only the pages a request touches take memory:
/// a 429 uses some tens of kilobytes; a provider call over TLS spills to the system allocator.
const ARENA_BYTES: usize = 512 * 1024;

/// The arena's bytes. Written only through pointers handed out by `Allocator`.
#[repr(C, align(4096))]
struct Arena(UnsafeCell<[u8; ARENA_BYTES]>);

// SAFETY: the bytes are only reached through blocks handed out once each (the bump offset is
// advanced with compare-and-swap), so no two threads are ever given the same byte.
unsafe impl Sync for Arena {}

static ARENA: Arena = Arena(UnsafeCell::new([0; ARENA_BYTES]));
/// The offset of the first free byte (low 32 bits) and the highest offset ever handed out
/// (high 32 bits), changed together: bytes past the second were never written, so they are
/// still the zeros of `.bss`, and a zeroed block there needs no writing (nor its pages).
static STATE: AtomicU64 = AtomicU64::new(0);
/// Whether new blocks come from the arena (set once, by a CGI process).
static ON: AtomicBool = AtomicBool::new(false);

/// The program's allocator: the arena when on and not full, the system allocator otherwise.
pub struct Allocator;

#[global_allocator]
static GLOBAL: Allocator = Allocator;

/// From now on, blocks come from the arena while it has room. For a process that answers one
/// request and exits: the binary turns it on first thing, so that the system allocator is
/// never set up at all on a CGI request (musl's takes a `brk`, three `mmap` and their pages).
pub fn use_for_this_process() {
    ON.store(true, Ordering::Relaxed);
}

/// From now on, new blocks come from the system allocator: for a process found to live long
/// (FastCGI, `resolve serve`, the commands). The few blocks it took from the arena before it
/// knew stay valid and go back to the arena when freed.
pub fn stop_for_this_process() {
    ON.store(false, Ordering::Relaxed);
}

fn base() -> usize {
    ARENA.0.get() as usize
}

/// The block's offset in the arena, if it is one of the arena's.
fn offset_of(ptr: *mut u8) -> Option<usize> {
    let off = (ptr as usize).wrapping_sub(base());
    (off < ARENA_BYTES).then_some(off)
}

fn pack(next: usize, high: usize) -> u64 {
    // Both are at most ARENA_BYTES, far below 2^32.
    ((high as u64) << 32) | next as u64
}

fn unpack(state: u64) -> (usize, usize) {
    ((state & 0xffff_ffff) as usize, (state >> 32) as usize)
}

/// Moves the first free byte as `step` says, keeping the high-water mark up to date: `step`
/// gets the first free byte and the mark, and answers where the first free byte goes and what
/// to return once it is there, or None to leave it (then None). Another thread's move in
/// between has `step` asked again.
fn move_next_by<T>(step: impl Fn(usize, usize) -> Option<(usize, T)>) -> Option<T> {
    let mut state = STATE.load(Ordering::Relaxed);
    loop {
        let (next, high) = unpack(state);
        let (to, out) = step(next, high)?;
        match STATE.compare_exchange_weak(
            state,
            pack(to, high.max(to)),
            Ordering::Relaxed,
            Ordering::Relaxed,
        ) {
            Ok(_) => return Some(out),
            Err(now) => state = now,
        }
    }
}

/// Moves the first free byte from `from` to `to` if it is still at `from` (the block ending
/// there is the latest), keeping the high-water mark up to date. False when it was not.
fn move_next(from: usize, to: usize) -> bool {
    move_next_by(|next, _| (next == from).then_some((to, ()))).is_some()
}

/// A block of `layout` from the arena, with the offset from which its bytes were never handed
/// out before; None when the arena has no room.
fn bump(layout: Layout) -> Option<(*mut u8, usize)> {
    let (start, fresh) = move_next_by(|next, high| {
        // The base is page-aligned and alignments are powers of two, at most a page for any
        // type of this program (a larger one simply finds no room here).
        let start = next.checked_add(layout.align() - 1)? & !(layout.align() - 1);
        let end = start.checked_add(layout.size())?;
        if end > ARENA_BYTES || layout.align() > 4096 {
            return None;
        }
        Some((end, (start, high.max(start))))
    })?;
    // The arena's provenance carries over to the block (`wrapping_add` on its pointer).
    Some((ARENA.0.get().cast::<u8>().wrapping_add(start), fresh))
}

// SAFETY: blocks from the arena are distinct (see `bump`), aligned as asked and inside the
// arena; blocks from `System` are given back to `System`, recognised by their address being
// outside the arena. A block is given back to where it came from whether the arena is on or
// not, so turning it on while blocks of the system allocator are live is sound.
unsafe impl GlobalAlloc for Allocator {
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        if ON.load(Ordering::Relaxed)
            && let Some((ptr, _)) = bump(layout)
        {
            return ptr;
        }
        // SAFETY: the caller's guarantees for `layout` are `System`'s.
        unsafe { System.alloc(layout) }
    }

    unsafe fn alloc_zeroed(&self, layout: Layout) -> *mut u8 {
        if ON.load(Ordering::Relaxed)
            && let Some((ptr, fresh)) = bump(layout)
        {
            // Bytes handed out before (and given back) may hold anything: those are zeroed.
            // The rest are still the zeros of `.bss`, and their pages stay untouched until
            // used (a read buffer mostly unfilled).
            let start = ptr as usize - base();
            let dirty = fresh.saturating_sub(start).min(layout.size());
            // SAFETY: the block is `layout.size()` bytes, just handed out; `dirty` is no more.
            unsafe { ptr.write_bytes(0, dirty) };
            return ptr;
        }
        // SAFETY: the caller's guarantees for `layout` are `System`'s.
        unsafe { System.alloc_zeroed(layout) }
    }

    unsafe fn dealloc(&self, ptr: *mut u8, layout: Layout) {
        match offset_of(ptr) {
            // The latest block goes back to the arena (a string built and dropped at once);
            // any other stays used until the process exits.
            Some(off) => {
                move_next(off + layout.size(), off);
            }
            // SAFETY: not the arena's, so `System` handed it out with this layout.
            None => unsafe { System.dealloc(ptr, layout) },
        }
    }

    unsafe fn realloc(&self, ptr: *mut u8, layout: Layout, new_size: usize) -> *mut u8 {
        let Some(off) = offset_of(ptr) else {
            // SAFETY: not the arena's, so `System` handed it out with this layout.
            return unsafe { System.realloc(ptr, layout, new_size) };
        };
        // The latest block grows or shrinks where it is while the arena has room.
        let end = off + layout.size();
        if let Some(new_end) = off.checked_add(new_size)
            && new_end <= ARENA_BYTES
            && move_next(end, new_end)
        {
            return ptr;
        }
        // Any other block that shrinks keeps its place.
        if new_size <= layout.size() {
            return ptr;
        }
        // SAFETY: `new_size` is nonzero and, rounded to the alignment, does not overflow (the
        // caller's guarantees for `realloc`).
        let new_layout = unsafe { Layout::from_size_align_unchecked(new_size, layout.align()) };
        // SAFETY: as for `alloc`.
        let new = unsafe { self.alloc(new_layout) };
        if !new.is_null() {
            // SAFETY: both blocks are at least `layout.size()` long and distinct.
            unsafe { std::ptr::copy_nonoverlapping(ptr, new, layout.size()) };
        }
        new
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn blocks_outside_the_arena_are_the_systems() {
        assert_eq!(offset_of(std::ptr::null_mut()), None);
        // Tests never turn the arena on: every block is the system allocator's.
        let mut b = Box::new(7u64);
        assert_eq!(offset_of((&raw mut *b).cast()), None);
    }

    #[test]
    fn blocks_are_aligned_distinct_and_the_latest_goes_back() {
        // Only this test takes blocks from the arena (it is never on in tests), directly.
        let layout = |size, align| Layout::from_size_align(size, align).unwrap();
        let (a, fresh_a) = bump(layout(3, 1)).unwrap();
        let (b, fresh_b) = bump(layout(16, 8)).unwrap();
        let (off_a, off_b) = (offset_of(a).unwrap(), offset_of(b).unwrap());
        assert_eq!(off_b % 8, 0);
        assert!(off_b >= off_a + 3);
        assert_eq!((fresh_a, fresh_b), (off_a, off_b));
        // b is the latest: given back, its bytes are handed out again, and known to be used.
        assert!(move_next(off_b + 16, off_b));
        let (c, fresh_c) = bump(layout(16, 8)).unwrap();
        assert_eq!((offset_of(c), fresh_c), (Some(off_b), off_b + 16));
        // a is not the latest any more: it stays used.
        assert!(!move_next(off_a + 3, off_a));
        assert!(bump(layout(ARENA_BYTES, 1)).is_none());
        assert!(bump(layout(8, 8192)).is_none());
    }
}
