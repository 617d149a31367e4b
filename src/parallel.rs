//! Work shared by threads: items handed out one at a time from a single queue
//! ([`on_demand`]), or with their results written in order ([`ordered`]); two jobs side
//! by side ([`both`]); and the buffers they reuse ([`Pool`]).

use std::collections::BTreeMap;
use std::ops::ControlFlow;
use std::sync::{mpsc, Condvar, Mutex};

/// Runs `first` here and `second` on a scoped thread beside it if `parallel` (else one
/// after the other), and returns both results. A panic of `second` is passed on, as it
/// would be on one thread.
pub(crate) fn both<A, B: Send>(
    parallel: bool,
    first: impl FnOnce() -> A,
    second: impl FnOnce() -> B + Send,
) -> (A, B) {
    if !parallel {
        return (first(), second());
    }
    std::thread::scope(|s| {
        let handle = s.spawn(second);
        let a = first();
        let b = handle
            .join()
            .unwrap_or_else(|e| std::panic::resume_unwind(e));
        (a, b)
    })
}

/// Runs `work` on every item of `items` on `threads` scoped threads, each taking the
/// next item when it is free (so items of uneven cost balance). Each thread makes its
/// own state with `init` and hands it to `finish` when the queue is empty.
pub(crate) fn on_demand<I, S>(
    threads: usize,
    items: I,
    init: impl Fn() -> S + Sync,
    work: impl Fn(&mut S, I::Item) + Sync,
    finish: impl Fn(S) + Sync,
) where
    I: Iterator + Send,
{
    let queue = Mutex::new(items);
    std::thread::scope(|scope| {
        for _ in 0..threads.max(1) {
            scope.spawn(|| {
                let mut state = init();
                loop {
                    let item = match queue.lock() {
                        Ok(mut items) => items.next(),
                        Err(_) => None,
                    };
                    let Some(item) = item else { break };
                    work(&mut state, item);
                }
                finish(state);
            });
        }
    });
}

/// What a worker of [`ordered`] sends: a result with its item's index, or notice that it
/// panicked (so the writer does not wait for a result that never comes).
enum Sent<R> {
    Done(usize, R),
    Panicked,
}

/// Sends [`Sent::Panicked`] when a worker unwinds.
struct PanicFlag<'a, R> {
    send: &'a mpsc::Sender<Sent<R>>,
}

impl<R> Drop for PanicFlag<'_, R> {
    fn drop(&mut self) {
        if std::thread::panicking() {
            let _ = self.send.send(Sent::Panicked);
        }
    }
}

/// The queue of [`ordered`]: the items, how many were handed out and written.
struct Queue<I> {
    items: std::iter::Enumerate<I>,
    taken: usize,
    written: usize,
    /// The items ran out.
    done: bool,
    stop: bool,
}

/// Runs `work` on every item of `items` on `threads` scoped threads and hands the
/// results to `write`, on the calling thread and in the items' order, while the threads
/// go on with later items. At most `ahead` items are taken beyond those written, so
/// memory stays bounded by `ahead` results. When `write` returns `Break(value)` no
/// further item is taken and `Some(value)` is returned; `None` when every result was
/// written. A panic in `work` is resumed on the calling thread.
pub(crate) fn ordered<I, R, B>(
    threads: usize,
    ahead: usize,
    items: I,
    work: impl Fn(I::Item) -> R + Sync,
    mut write: impl FnMut(R) -> ControlFlow<B>,
) -> Option<B>
where
    I: Iterator + Send,
    R: Send,
{
    let ahead = ahead.max(1);
    let queue = Mutex::new(Queue {
        items: items.enumerate(),
        taken: 0,
        written: 0,
        done: false,
        stop: false,
    });
    let wake = Condvar::new();
    let (send, receive) = mpsc::channel::<Sent<R>>();
    let stop_all = || {
        if let Ok(mut q) = queue.lock() {
            q.stop = true;
        }
        wake.notify_all();
    };
    std::thread::scope(|scope| {
        for _ in 0..threads.max(1) {
            let send = send.clone();
            let (queue, wake, work) = (&queue, &wake, &work);
            scope.spawn(move || {
                let _flag = PanicFlag { send: &send };
                loop {
                    let (index, item) = {
                        let Ok(mut q) = queue.lock() else { return };
                        while !q.stop && !q.done && q.taken >= q.written + ahead {
                            q = match wake.wait(q) {
                                Ok(q) => q,
                                Err(_) => return,
                            };
                        }
                        if q.stop || q.done {
                            return;
                        }
                        // Only real items count as taken: a thread waiting for room
                        // must see it once every item is written.
                        let Some(next) = q.items.next() else {
                            q.done = true;
                            wake.notify_all();
                            return;
                        };
                        q.taken += 1;
                        next
                    };
                    if send.send(Sent::Done(index, work(item))).is_err() {
                        return;
                    }
                }
            });
        }
        drop(send);
        let mut waiting: BTreeMap<usize, R> = BTreeMap::new();
        let mut next = 0;
        let outcome = loop {
            let result = match waiting.remove(&next) {
                Some(result) => result,
                None => match receive.recv() {
                    Ok(Sent::Done(index, result)) => {
                        waiting.insert(index, result);
                        continue;
                    }
                    // A panic: the scope resumes it once the others have stopped.
                    Ok(Sent::Panicked) | Err(_) => break None,
                },
            };
            next += 1;
            if let Ok(mut q) = queue.lock() {
                q.written = next;
            }
            wake.notify_all();
            if let ControlFlow::Break(value) = write(result) {
                break Some(value);
            }
        };
        stop_all();
        outcome
    })
}

/// Values kept for reuse across threads (buffers whose memory is worth keeping: fresh
/// memory costs page faults).
pub(crate) struct Pool<T> {
    free: Mutex<Vec<T>>,
}

impl<T> Default for Pool<T> {
    fn default() -> Self {
        Pool {
            free: Mutex::new(Vec::new()),
        }
    }
}

impl<T> From<Vec<T>> for Pool<T> {
    fn from(free: Vec<T>) -> Self {
        Pool {
            free: Mutex::new(free),
        }
    }
}

impl<T> Pool<T> {
    /// The kept values.
    pub(crate) fn into_inner(self) -> Vec<T> {
        self.free.into_inner().unwrap_or_default()
    }
}

impl<T: Default> Pool<T> {
    /// A kept value, or a new one.
    pub(crate) fn take(&self) -> T {
        let kept = self.free.lock().ok().and_then(|mut free| free.pop());
        kept.unwrap_or_default()
    }

    /// Keeps `value` for a later [`Pool::take`].
    pub(crate) fn put(&self, value: T) {
        if let Ok(mut free) = self.free.lock() {
            free.push(value);
        }
    }
}
