//! The CGI process's allocator: a process that answers one request and exits hands out memory
//! from a fixed static arena by moving a pointer, and frees nothing but the latest block
//! (most are never given back before the exit does it at once). musl's `malloc` and `free`
//! were a third of a CGI request's instructions, with an `mmap` or `munmap` for many blocks.
//! Off by default (tests and benches link the library and never turn it on); the binary turns
//! it on for its main thread as it starts and off again once it knows it lives long: FastCGI,
//! `resolve serve` and the commands use the system allocator, as do the threads a request
//! starts and a CGI process once the arena is full, so memory stays bounded by the arena's
//! size plus what the system allocator would have used. One thread owns the arena, so moving
//! its pointer takes plain loads and stores, no locked instruction.
//! A `GlobalAlloc` has no safe interface, so this module, like `signals`, allows `unsafe` for
//! itself.
#![allow(unsafe_code)]

use std::alloc::{GlobalAlloc, Layout, System};
use std::cell::{Cell, UnsafeCell};
use std::sync::atomic::{AtomicUsize, Ordering};

/// Bytes of the arena. It lies in `.bss`, so only the pages a request touches take memory:
/// a 429 uses some tens of kilobytes; a provider call over TLS spills to the system allocator.
const ARENA_BYTES: usize = 512 * 1024;

/// The arena's bytes. Written only through pointers handed out by `Allocator`.
#[repr(C, align(4096))]
struct Arena(UnsafeCell<[u8; ARENA_BYTES]>);

// SAFETY: the bytes are only reached through blocks handed out once each, by one thread (the
// owner's, below), so no two blocks live at once share a byte.
unsafe impl Sync for Arena {}

static ARENA: Arena = Arena(UnsafeCell::new([0; ARENA_BYTES]));
/// The offset of the first free byte. Read and written by the owning thread only, so plain
/// loads and stores (no locked instruction on every block, as a compare-and-swap would take).
static NEXT: AtomicUsize = AtomicUsize::new(0);
/// The highest offset ever handed out: bytes past it were never written, so they are still the
/// zeros of `.bss`, and a zeroed block there needs no writing (nor its pages). The owner's too.
static HIGH: AtomicUsize = AtomicUsize::new(0);

thread_local! {
    /// Whether this thread takes its blocks from the arena: the thread that turned it on,
    /// while it is on. Every other thread uses the system allocator, and never moves the
    /// arena's offsets: a block of the arena given back by another thread stays used.
    static OWNER: Cell<bool> = const { Cell::new(false) };
}

/// The program's allocator: the arena for its owning thread while on and not full, the system
/// allocator otherwise.
pub struct Allocator;

#[global_allocator]
static GLOBAL: Allocator = Allocator;

/// From now on, this thread's new blocks come from the arena while it has room. For a process
/// that answers one request and exits: the binary turns it on first thing, so that the system
/// allocator is never set up at all on a CGI request (musl's takes a `brk`, three `mmap` and
/// their pages). Threads the request starts (a name lookup's, a lock's waiter) use the system
/// allocator.
pub fn use_for_this_process() {
    OWNER.set(true);
}

/// From now on, new blocks come from the system allocator: for a process found to live long
/// (FastCGI, `resolve serve`, the commands). The few blocks it took from the arena before it
/// knew stay valid; the latest goes back to the arena when freed, the others stay used.
pub fn stop_for_this_process() {
    OWNER.set(false);
}

fn owns() -> bool {
    OWNER.get()
}

fn base() -> usize {
    ARENA.0.get() as usize
}

/// The block's offset in the arena, if it is one of the arena's.
fn offset_of(ptr: *mut u8) -> Option<usize> {
    let off = (ptr as usize).wrapping_sub(base());
    (off < ARENA_BYTES).then_some(off)
}

/// Moves the first free byte from `from` to `to` if it is still at `from` (the block ending
/// there is the latest), keeping the high-water mark up to date. False when it was not. The
/// owner's only.
fn move_next(from: usize, to: usize) -> bool {
    if NEXT.load(Ordering::Relaxed) != from {
        return false;
    }
    NEXT.store(to, Ordering::Relaxed);
    if to > HIGH.load(Ordering::Relaxed) {
        HIGH.store(to, Ordering::Relaxed);
    }
    true
}

/// A block of `layout` from the arena, with the offset from which its bytes were never handed
/// out before; None when the arena has no room. The owner's only.
fn bump(layout: Layout) -> Option<(*mut u8, usize)> {
    // The base is page-aligned and alignments are powers of two, at most a page for any type
    // of this program (a larger one simply finds no room here). The offsets are at most
    // ARENA_BYTES, so nothing below overflows.
    if layout.align() > 4096 || layout.size() > ARENA_BYTES {
        return None;
    }
    let next = NEXT.load(Ordering::Relaxed);
    let start = (next + layout.align() - 1) & !(layout.align() - 1);
    let end = start + layout.size();
    if end > ARENA_BYTES {
        return None;
    }
    let high = HIGH.load(Ordering::Relaxed);
    NEXT.store(end, Ordering::Relaxed);
    if end > high {
        HIGH.store(end, Ordering::Relaxed);
    }
    // The arena's provenance carries over to the block (`wrapping_add` on its pointer).
    let ptr = ARENA.0.get().cast::<u8>().wrapping_add(start);
    Some((ptr, high.max(start)))
}

// SAFETY: blocks from the arena are distinct (see `bump`: only the owning thread hands them out
// and moves the offsets), aligned as asked and inside the arena; blocks from `System` are given
// back to `System`, recognised by their address being outside the arena. A block is given back
// to where it came from whichever thread frees it and whether the arena is on or not, so
// turning it on while blocks of the system allocator are live is sound.
unsafe impl GlobalAlloc for Allocator {
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        if owns()
            && let Some((ptr, _)) = bump(layout)
        {
            return ptr;
        }
        // SAFETY: the caller's guarantees for `layout` are `System`'s.
        unsafe { System.alloc(layout) }
    }

    unsafe fn alloc_zeroed(&self, layout: Layout) -> *mut u8 {
        if owns()
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
            // The latest block goes back to the arena (a string built and dropped at once),
            // when its owner frees it; any other stays used until the process exits.
            Some(off) => {
                if owns() {
                    move_next(off + layout.size(), off);
                }
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
        // The latest block grows or shrinks where it is while the arena has room (its
        // owner's doing only).
        let end = off + layout.size();
        if owns()
            && let Some(new_end) = off.checked_add(new_size)
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

    /// The arena's offsets are shared by the whole test binary: the tests that move them run
    /// as one test, one after the other.
    #[test]
    fn the_arena() {
        blocks_are_aligned_distinct_and_the_latest_goes_back();
        only_the_owning_thread_takes_and_gives_back_blocks();
    }

    fn blocks_are_aligned_distinct_and_the_latest_goes_back() {
        // Blocks from the arena directly, as its owner would take them.
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

    fn only_the_owning_thread_takes_and_gives_back_blocks() {
        use std::sync::{Arc, Condvar, Mutex};
        /// The owner's latest blocks, handed to the other thread, and whether it dropped them.
        type Handed = (Option<Vec<u8>>, bool);
        // A thread of its own turns the arena on, as the binary's main thread does.
        std::thread::spawn(|| {
            use_for_this_process();
            let slot: Arc<(Mutex<Handed>, Condvar)> = Arc::default();
            let theirs = Arc::clone(&slot);
            // Another thread, started before the owner's blocks are taken (starting it takes
            // blocks too), grows and frees what it is handed, and takes blocks of its own.
            let other = std::thread::spawn(move || {
                let (lock, changed) = &*theirs;
                let mut handed = lock.lock().unwrap();
                while handed.0.is_none() {
                    handed = changed.wait(handed).unwrap();
                }
                let mut grown = handed.0.take().unwrap();
                grown.extend_from_slice(&[1; 100]);
                assert_eq!(
                    offset_of(grown.as_mut_ptr()),
                    None,
                    "grown by another thread"
                );
                drop(grown);
                let own = Box::new(1u64);
                assert_eq!(offset_of((&raw const *own).cast_mut().cast()), None);
                handed.1 = true;
                changed.notify_all();
            });
            // The owner's latest block, handed over: growing and freeing it on the other
            // thread leaves the arena's offsets where they were.
            let mut mine: Vec<u8> = Vec::with_capacity(8);
            let at = offset_of(mine.as_mut_ptr()).expect("the arena's");
            let next = NEXT.load(Ordering::Relaxed);
            assert_eq!(next, at + 8);
            let (lock, changed) = &*slot;
            let mut handed = lock.lock().unwrap();
            handed.0 = Some(mine);
            changed.notify_all();
            while !handed.1 {
                handed = changed.wait(handed).unwrap();
            }
            assert_eq!(NEXT.load(Ordering::Relaxed), next);
            drop(handed);
            other.join().unwrap();
            // The owner's own latest block grows in place, and goes back.
            let mut v: Vec<u8> = Vec::with_capacity(8);
            let v_at = offset_of(v.as_mut_ptr()).expect("the arena's");
            v.extend_from_slice(&[2; 64]);
            assert_eq!(offset_of(v.as_mut_ptr()), Some(v_at));
            drop(v);
            assert_eq!(NEXT.load(Ordering::Relaxed), v_at);
            // Turned off, the thread's blocks are the system allocator's again.
            stop_for_this_process();
            let after = Box::new(3u32);
            assert_eq!(offset_of((&raw const *after).cast_mut().cast()), None);
        })
        .join()
        .unwrap();
    }
}
