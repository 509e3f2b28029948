//! The persistent worker pool every parallel kernel runs on.
//!
//! Threads are started once (`threads - 1` of them: the calling thread always takes part)
//! and then wait for work by spinning on an atomic for a short while ([`SPIN`]) before
//! parking, so the ops of a decode step, which follow each other within microseconds,
//! find the workers awake. A dispatch publishes a job that lives on the caller's stack
//! (no heap allocation), wakes parked workers, and every participant claims chunks of
//! the item range from a shared counter until none are left (guided: large chunks
//! first, shrinking to the task minimum, so the participants finish together); the
//! caller then waits until no worker is inside the job.
//!
//! Small jobs stay on the calling thread: [`WorkerPool::parallel_for`] splits `n_items`
//! into at most `n_items / min_items_per_task` tasks. A dispatch that finds the pool
//! busy (another thread is dispatching, or a task dispatches again from inside a job)
//! runs serially on its caller instead of waiting, so nested and concurrent use cannot
//! deadlock.

use std::any::Any;
use std::fmt;
use std::ops::Range;
use std::panic::{AssertUnwindSafe, catch_unwind, resume_unwind};
use std::sync::atomic::{AtomicBool, AtomicPtr, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, OnceLock, TryLockError};
use std::thread::{self, JoinHandle, Thread};
use std::time::{Duration, Instant};

use crossbeam_utils::CachePadded;

use crate::parallel::DisjointWrites;

/// How long an idle worker spins on the job word before parking.
pub const SPIN: Duration = Duration::from_micros(100);

/// The environment variable that sets the default thread count.
pub const THREADS_ENV: &str = "TEMPRA_CPU_THREADS";

/// A type-erased job: the caller's closure and how to cut the item range.
struct Job<'a> {
    f: &'a (dyn Fn(Range<usize>) + Sync),
    schedule: Schedule,
}

/// How a job's items are cut into chunks: guided, each chunk `1 / (2 · tasks)` of the
/// items left after the chunks before it, never under `min_chunk` items. Early chunks
/// are large (few claims), the last ones small, so the participants finish close
/// together: with equal chunks of an eighth of the work (the previous scheme), the
/// caller waited on the last worker for about half a chunk per op (`WorkerPool::run`'s
/// wait stood out in decode profiles). The cuts depend only on the chunk's index, never
/// on timing, so a result that depends on the ranges is the same from run to run. Decode
/// gained from the guided cuts (most for Q4_K_M); prefill was unchanged.
#[derive(Clone, Copy, Debug)]
struct Schedule {
    n_items: usize,
    divisor: usize,
    min_chunk: usize,
}

impl Schedule {
    /// The length of the chunk starting at `start`.
    fn len_at(&self, start: usize) -> usize {
        let left = self.n_items - start;
        left.div_ceil(self.divisor).max(self.min_chunk).min(left)
    }
}

/// What the dispatcher and the workers share.
struct Shared {
    /// `2e + 1` while job `e` is open, `2e + 2` once it is closed.
    state: CachePadded<AtomicUsize>,
    /// The open job (valid while `state` is odd and the reader is counted in `active`).
    job: AtomicPtr<Job<'static>>,
    /// The next unclaimed item of the open job.
    next: CachePadded<AtomicUsize>,
    /// Workers inside the current job.
    active: CachePadded<AtomicUsize>,
    /// Per worker: parked (or about to park) and needs an unpark.
    sleeping: Box<[CachePadded<AtomicBool>]>,
    shutdown: AtomicBool,
    /// The first panic payload of a worker during the current job.
    panic: Mutex<Option<Box<dyn Any + Send>>>,
    spin: Duration,
}

/// A fixed set of threads that run [`WorkerPool::parallel_for`] jobs with the caller.
pub struct WorkerPool {
    shared: Arc<Shared>,
    threads: Vec<Thread>,
    handles: Vec<JoinHandle<()>>,
    /// Held by the thread dispatching a job.
    dispatch: Mutex<()>,
}

impl WorkerPool {
    /// A pool running jobs on `threads` threads in all (the caller plus `threads - 1`
    /// workers started now); `threads` is clamped to at least 1.
    pub fn new(threads: usize) -> WorkerPool {
        WorkerPool::with_spin(threads, SPIN)
    }

    /// [`WorkerPool::new`] with idle workers spinning `spin` before they park.
    pub fn with_spin(threads: usize, spin: Duration) -> WorkerPool {
        let workers = threads.max(1) - 1;
        let shared = Arc::new(Shared {
            state: CachePadded::new(AtomicUsize::new(0)),
            job: AtomicPtr::new(std::ptr::null_mut()),
            next: CachePadded::new(AtomicUsize::new(0)),
            active: CachePadded::new(AtomicUsize::new(0)),
            sleeping: (0..workers)
                .map(|_| CachePadded::new(AtomicBool::new(false)))
                .collect(),
            shutdown: AtomicBool::new(false),
            panic: Mutex::new(None),
            spin,
        });
        let mut handles = Vec::with_capacity(workers);
        for index in 0..workers {
            let shared = Arc::clone(&shared);
            let handle = thread::Builder::new()
                .name(format!("tempra-cpu-{index}"))
                .spawn(move || worker_loop(&shared, index));
            match handle {
                Ok(handle) => handles.push(handle),
                // Out of threads: run with the ones we have (the caller always works).
                Err(_) => break,
            }
        }
        let threads = handles.iter().map(|h| h.thread().clone()).collect();
        WorkerPool {
            shared,
            threads,
            handles,
            dispatch: Mutex::new(()),
        }
    }

    /// The process-wide pool default backends share, started on first use with
    /// [`default_threads`] threads.
    pub fn global() -> Arc<WorkerPool> {
        static GLOBAL: OnceLock<Arc<WorkerPool>> = OnceLock::new();
        Arc::clone(GLOBAL.get_or_init(|| Arc::new(WorkerPool::new(default_threads()))))
    }

    /// Threads a job runs on: the workers plus the caller.
    pub fn threads(&self) -> usize {
        self.handles.len() + 1
    }

    /// Calls `f` on disjoint ranges covering `0..n_items`, in parallel on up to
    /// [`Self::threads`] threads, with at least `min_items_per_task` items per task
    /// (so `n_items < 2 · min_items_per_task` runs on the caller alone). Returns when
    /// every call has returned; a panic in any call is resumed on the caller.
    ///
    /// Ranges are claimed dynamically, so which thread runs which range varies; results
    /// that depend only on the range are the same for any thread count.
    pub fn parallel_for<F>(&self, n_items: usize, min_items_per_task: usize, f: F)
    where
        F: Fn(Range<usize>) + Sync,
    {
        if n_items == 0 {
            return;
        }
        let tasks = self.threads().min(n_items / min_items_per_task.max(1));
        if tasks <= 1 {
            return f(0..n_items);
        }
        let _guard = match self.dispatch.try_lock() {
            Ok(guard) => guard,
            // Busy (a concurrent or nested dispatch): run here rather than wait.
            Err(TryLockError::WouldBlock) => return f(0..n_items),
            Err(TryLockError::Poisoned(e)) => e.into_inner(),
        };
        let job = Job {
            f: &f,
            schedule: Schedule {
                n_items,
                divisor: 2 * tasks,
                min_chunk: min_items_per_task.max(1),
            },
        };
        self.run(&job);
    }

    /// Like [`Self::parallel_for`] over the items of `data` (consecutive runs of
    /// `item_len` values; a shorter last run counts as an item), giving each call its
    /// items' values to write: `f(item_range, values_of_those_items)`.
    pub fn parallel_chunks_mut<T, F>(
        &self,
        data: &mut [T],
        item_len: usize,
        min_items_per_task: usize,
        f: F,
    ) where
        T: Send,
        F: Fn(Range<usize>, &mut [T]) + Sync,
    {
        let item_len = item_len.max(1);
        let len = data.len();
        let n_items = len.div_ceil(item_len);
        let base = DisjointWrites::new(data);
        self.parallel_for(n_items, min_items_per_task, |items| {
            let start = items.start * item_len;
            let end = (items.end * item_len).min(len);
            // SAFETY: `parallel_for` hands out disjoint item ranges, each once, so the
            // element ranges `start..end` (inside `data`, as `end <= len`) never overlap;
            // `data` is mutably borrowed for the whole call, which outlives every task.
            let part =
                unsafe { std::slice::from_raw_parts_mut(base.ptr().add(start), end - start) };
            f(items, part)
        });
    }

    /// Publishes `job`, takes part in it, and returns once no worker is inside it.
    fn run(&self, job: &Job<'_>) {
        let shared = &*self.shared;
        let closed = shared.state.load(Ordering::Relaxed);
        let open = closed + 1;
        shared.next.store(0, Ordering::Relaxed);
        // SAFETY of the erased lifetime: workers only dereference this pointer while the
        // state is `open` and they are counted in `active`; `CloseOnDrop` below closes
        // the state and waits for `active == 0` before this function (and so `job`'s
        // borrow) ends, also when a task panics.
        let erased = (job as *const Job<'_>).cast_mut().cast::<Job<'static>>();
        shared.job.store(erased, Ordering::Relaxed);
        shared.state.store(open, Ordering::SeqCst);
        for (sleeping, thread) in shared.sleeping.iter().zip(&self.threads) {
            if sleeping.load(Ordering::SeqCst) {
                thread.unpark();
            }
        }
        let close = CloseOnDrop {
            shared,
            closed: open + 1,
        };
        claim_chunks(shared, job);
        drop(close);
        let payload = shared
            .panic
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .take();
        if let Some(payload) = payload {
            resume_unwind(payload);
        }
    }
}

/// Closes the current job and waits for the workers inside it to leave (on return and
/// on unwind alike, so no worker ever sees a dangling job).
struct CloseOnDrop<'a> {
    shared: &'a Shared,
    closed: usize,
}

impl Drop for CloseOnDrop<'_> {
    fn drop(&mut self) {
        self.shared.state.store(self.closed, Ordering::SeqCst);
        let mut spins = 0u32;
        while self.shared.active.load(Ordering::Acquire) != 0 {
            spins += 1;
            if spins < 1 << 16 {
                std::hint::spin_loop();
            } else {
                // A worker was descheduled mid-chunk: let it run.
                thread::yield_now();
            }
        }
    }
}

/// Claims chunks of `job` by index (`next` counts them) and runs them until none are
/// left. Each participant's indices only grow, so it walks the schedule forward from its
/// previous chunk.
fn claim_chunks(shared: &Shared, job: &Job<'_>) {
    let (mut index, mut start) = (0usize, 0usize);
    loop {
        let claimed = shared.next.fetch_add(1, Ordering::Relaxed);
        let n_items = job.schedule.n_items;
        while index < claimed && start < n_items {
            start += job.schedule.len_at(start);
            index += 1;
        }
        if start >= n_items {
            return;
        }
        let len = job.schedule.len_at(start);
        (job.f)(start..start + len);
    }
}

/// A worker: wait for an open job, join it, run chunks, repeat until shutdown.
fn worker_loop(shared: &Shared, index: usize) {
    let mut seen = 0usize;
    loop {
        let state = wait_for_change(shared, index, seen);
        if shared.shutdown.load(Ordering::Acquire) {
            return;
        }
        seen = state;
        if state.is_multiple_of(2) {
            continue; // a closed job: nothing to join
        }
        shared.active.fetch_add(1, Ordering::SeqCst);
        if shared.state.load(Ordering::SeqCst) == state {
            // SAFETY: the job is still open and this worker is counted in `active`, so
            // the dispatcher keeps `job` alive until we decrement (see `WorkerPool::run`).
            let job = unsafe { &*shared.job.load(Ordering::Acquire) };
            if let Err(payload) = catch_unwind(AssertUnwindSafe(|| claim_chunks(shared, job))) {
                let mut slot = shared.panic.lock().unwrap_or_else(|e| e.into_inner());
                slot.get_or_insert(payload);
            }
        }
        shared.active.fetch_sub(1, Ordering::Release);
    }
}

/// Spins, then parks, until the state differs from `seen` or the pool shuts down.
fn wait_for_change(shared: &Shared, index: usize, seen: usize) -> usize {
    let start = Instant::now();
    let mut spins = 0u32;
    loop {
        let state = shared.state.load(Ordering::Acquire);
        if state != seen || shared.shutdown.load(Ordering::Relaxed) {
            return state;
        }
        spins = spins.wrapping_add(1);
        if !spins.is_multiple_of(64) || start.elapsed() < shared.spin {
            std::hint::spin_loop();
            continue;
        }
        // Park. The flag is raised before the last check (both SeqCst), and the
        // dispatcher stores the state before reading the flag, so either we see the new
        // state here or the dispatcher sees the flag and unparks us (an unpark before
        // `park` makes it return at once).
        shared.sleeping[index].store(true, Ordering::SeqCst);
        let state = shared.state.load(Ordering::SeqCst);
        if state == seen && !shared.shutdown.load(Ordering::SeqCst) {
            thread::park();
        }
        shared.sleeping[index].store(false, Ordering::Relaxed);
        spins = 0;
        if state != seen {
            return state;
        }
    }
}

impl Drop for WorkerPool {
    fn drop(&mut self) {
        self.shared.shutdown.store(true, Ordering::SeqCst);
        self.shared.state.fetch_add(2, Ordering::SeqCst);
        for thread in &self.threads {
            thread.unpark();
        }
        for handle in self.handles.drain(..) {
            // A worker never panics outside `catch_unwind`; nothing to report if it did.
            let _ = handle.join();
        }
    }
}

impl fmt::Debug for WorkerPool {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("WorkerPool")
            .field("threads", &self.threads())
            .field("spin", &self.shared.spin)
            .finish()
    }
}

impl crate::parallel::Parallel for WorkerPool {
    fn threads(&self) -> usize {
        WorkerPool::threads(self)
    }

    fn parallel_for(&self, n_items: usize, min_items: usize, f: &(dyn Fn(Range<usize>) + Sync)) {
        WorkerPool::parallel_for(self, n_items, min_items, f)
    }
}

/// The default thread count: `TEMPRA_CPU_THREADS` when set to a positive number, else
/// the number of physical cores this process may run on (hyper-threads share a core's
/// vector units, so they add little to these kernels).
pub fn default_threads() -> usize {
    if let Some(n) = std::env::var(THREADS_ENV)
        .ok()
        .and_then(|v| v.trim().parse::<usize>().ok())
        .filter(|&n| n > 0)
    {
        return n;
    }
    physical_cores()
}

/// Physical cores available to this process: logical CPUs (affinity and cgroup quota
/// aware, from `available_parallelism`) divided by the SMT width read from Linux sysfs;
/// the logical count elsewhere.
pub fn physical_cores() -> usize {
    let logical = thread::available_parallelism()
        .map(|n| n.get())
        .unwrap_or(1);
    (logical / smt_width()).max(1)
}

/// Hardware threads per core (1 when unknown).
fn smt_width() -> usize {
    let siblings =
        std::fs::read_to_string("/sys/devices/system/cpu/cpu0/topology/thread_siblings_list");
    siblings
        .map(|list| count_cpu_list(list.trim()))
        .unwrap_or(1)
        .max(1)
}

/// The number of CPUs in a Linux CPU list such as `0,64` or `0-1`.
fn count_cpu_list(list: &str) -> usize {
    list.split(',')
        .filter(|part| !part.is_empty())
        .map(|part| match part.split_once('-') {
            Some((a, b)) => match (a.parse::<usize>(), b.parse::<usize>()) {
                (Ok(a), Ok(b)) if b >= a => b - a + 1,
                _ => 1,
            },
            None => 1,
        })
        .sum()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn guided_chunks_shrink_to_the_minimum_and_tile_the_range() {
        for (n, tasks, min) in [
            (256, 2, 7),
            (1000, 3, 1),
            (5, 2, 1),
            (100, 2, 60),
            (64, 4, 64),
        ] {
            let schedule = Schedule {
                n_items: n,
                divisor: 2 * tasks,
                min_chunk: min,
            };
            let mut lens = Vec::new();
            let mut start = 0;
            while start < n {
                let len = schedule.len_at(start);
                assert!(len >= 1);
                lens.push(len);
                start += len;
            }
            assert_eq!(start, n, "{n} {tasks} {min}: the chunks tile 0..n");
            assert_eq!(lens[0], n.div_ceil(2 * tasks).max(min).min(n));
            assert!(
                lens.windows(2).all(|w| w[1] <= w[0]),
                "{n} {tasks} {min}: sizes never grow: {lens:?}"
            );
            // All but the last chunk are at least the minimum.
            assert!(lens[..lens.len() - 1].iter().all(|&l| l >= min), "{lens:?}");
        }
        // 256 groups of a decode GEMV at 2 threads, 7 per task at least: the last
        // chunks are a fortieth of the work, not an eighth.
        let s = Schedule {
            n_items: 256,
            divisor: 4,
            min_chunk: 7,
        };
        let mut start = 0;
        let mut last = 0;
        while start < 256 {
            last = s.len_at(start);
            start += last;
        }
        assert!(last <= 7, "{last}");
    }

    #[test]
    fn covers_every_item_once() {
        for threads in [1, 2, 3] {
            let pool = WorkerPool::new(threads);
            for (n, min) in [(0, 1), (1, 1), (7, 1), (1000, 3), (1000, 1000), (12345, 64)] {
                let hits: Vec<AtomicUsize> = (0..n).map(|_| AtomicUsize::new(0)).collect();
                pool.parallel_for(n, min, |range| {
                    assert!(!range.is_empty());
                    for i in range {
                        hits[i].fetch_add(1, Ordering::Relaxed);
                    }
                });
                assert!(
                    hits.iter().all(|h| h.load(Ordering::Relaxed) == 1),
                    "threads {threads} n {n}"
                );
            }
        }
    }

    #[test]
    fn chunks_mut_are_disjoint_and_complete() {
        let pool = WorkerPool::new(2);
        let mut data = vec![0u32; 1003];
        pool.parallel_chunks_mut(&mut data, 10, 2, |items, part| {
            for (k, v) in part.iter_mut().enumerate() {
                *v += (items.start * 10 + k) as u32;
            }
        });
        assert!(data.iter().enumerate().all(|(i, &v)| v == i as u32));
    }

    #[test]
    fn small_jobs_stay_on_the_caller() {
        let pool = WorkerPool::new(2);
        let me = thread::current().id();
        pool.parallel_for(10, 8, |_| assert_eq!(thread::current().id(), me));
    }

    #[test]
    fn nested_dispatch_runs_serially() {
        let pool = WorkerPool::new(2);
        let total = AtomicUsize::new(0);
        pool.parallel_for(64, 1, |outer| {
            for _ in outer {
                pool.parallel_for(8, 1, |inner| {
                    total.fetch_add(inner.len(), Ordering::Relaxed);
                });
            }
        });
        assert_eq!(total.load(Ordering::Relaxed), 64 * 8);
    }

    #[test]
    fn workers_wake_after_parking() {
        let pool = WorkerPool::with_spin(2, Duration::from_micros(1));
        for _ in 0..50 {
            thread::sleep(Duration::from_micros(200));
            let sum = AtomicUsize::new(0);
            pool.parallel_for(100, 1, |r| {
                sum.fetch_add(r.len(), Ordering::Relaxed);
            });
            assert_eq!(sum.load(Ordering::Relaxed), 100);
        }
    }

    #[test]
    fn a_panicking_task_panics_the_caller_and_the_pool_survives() {
        let pool = WorkerPool::new(2);
        let result = catch_unwind(AssertUnwindSafe(|| {
            pool.parallel_for(100, 1, |r| {
                if r.contains(&99) {
                    panic!("task failed");
                }
            })
        }));
        assert!(result.is_err());
        let sum = AtomicUsize::new(0);
        pool.parallel_for(100, 1, |r| {
            sum.fetch_add(r.len(), Ordering::Relaxed);
        });
        assert_eq!(sum.load(Ordering::Relaxed), 100);
    }

    #[test]
    fn cpu_lists_count() {
        assert_eq!(count_cpu_list("0"), 1);
        assert_eq!(count_cpu_list("0,64"), 2);
        assert_eq!(count_cpu_list("0-3"), 4);
        assert!(physical_cores() >= 1);
    }
}
