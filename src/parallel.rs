//! Work shared by threads: items handed out one at a time from a single queue.

use std::sync::Mutex;

/// Runs `work` on every item of `items` on `threads` scoped threads, each taking the
/// next item when it is free (so items of uneven cost balance). Each thread makes its
/// own state with `init` and hands it to `finish` when the queue is empty.
pub fn on_demand<I, S>(
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
