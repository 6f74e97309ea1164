//! The CGI process's allocator: a process that answers one request and exits hands out memory
//! from a fixed static arena by moving a pointer, and frees nothing but the latest block
//! (most are never given back before the exit does it at once). musl's `malloc` and `free`
//! were a third of a CGI request's instructions, with an `mmap` or `munmap` for many blocks.
//! Off by default: FastCGI, `resolve serve` and the commands, which live long, keep the
//! system allocator, as does a CGI process once the arena is full, so memory stays bounded by
//! the arena's size plus what the system allocator would have used. A `GlobalAlloc` has no
//! safe interface, so this module, like `signals`, allows `unsafe` for itself.
#![allow(unsafe_code)]

use std::alloc::{GlobalAlloc, Layout, System};
use std::cell::UnsafeCell;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};

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
/// Offset of the first free byte of the arena.
static NEXT: AtomicUsize = AtomicUsize::new(0);
/// Whether new blocks come from the arena (set once, by a CGI process).
static ON: AtomicBool = AtomicBool::new(false);

/// The program's allocator: the arena when on and not full, the system allocator otherwise.
pub struct Allocator;

#[global_allocator]
static GLOBAL: Allocator = Allocator;

/// From now on, blocks come from the arena while it has room. For a process that answers one
/// request and exits; call it once its mode is known.
pub fn use_for_this_process() {
    ON.store(true, Ordering::Relaxed);
}

fn base() -> usize {
    ARENA.0.get() as usize
}

/// The block's offset in the arena, if it is one of the arena's.
fn offset_of(ptr: *mut u8) -> Option<usize> {
    let off = (ptr as usize).wrapping_sub(base());
    (off < ARENA_BYTES).then_some(off)
}

/// A block of `layout` from the arena, or None when it has no room.
fn bump(layout: Layout) -> Option<*mut u8> {
    let mut next = NEXT.load(Ordering::Relaxed);
    loop {
        // The base is page-aligned and alignments are powers of two, at most a page for any
        // type of this program (a larger one simply finds no room here).
        let start = next.checked_add(layout.align() - 1)? & !(layout.align() - 1);
        let end = start.checked_add(layout.size())?;
        if end > ARENA_BYTES || layout.align() > 4096 {
            return None;
        }
        match NEXT.compare_exchange_weak(next, end, Ordering::Relaxed, Ordering::Relaxed) {
            // The arena's provenance carries over to the block (`wrapping_add` on its pointer).
            Ok(_) => return Some(ARENA.0.get().cast::<u8>().wrapping_add(start)),
            Err(now) => next = now,
        }
    }
}

// SAFETY: blocks from the arena are distinct (see `bump`), aligned as asked and inside the
// arena; blocks from `System` are given back to `System`, recognised by their address being
// outside the arena. A block is given back to where it came from whether the arena is on or
// not, so turning it on while blocks of the system allocator are live is sound.
unsafe impl GlobalAlloc for Allocator {
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        if ON.load(Ordering::Relaxed)
            && let Some(ptr) = bump(layout)
        {
            return ptr;
        }
        // SAFETY: the caller's guarantees for `layout` are `System`'s.
        unsafe { System.alloc(layout) }
    }

    unsafe fn alloc_zeroed(&self, layout: Layout) -> *mut u8 {
        if ON.load(Ordering::Relaxed)
            && let Some(ptr) = bump(layout)
        {
            // A block given back to the arena may be handed out again: zero it.
            // SAFETY: the block is `layout.size()` bytes, just handed out.
            unsafe { ptr.write_bytes(0, layout.size()) };
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
                let _ = NEXT.compare_exchange(
                    off + layout.size(),
                    off,
                    Ordering::Relaxed,
                    Ordering::Relaxed,
                );
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
            && NEXT
                .compare_exchange(end, new_end, Ordering::Relaxed, Ordering::Relaxed)
                .is_ok()
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
}
