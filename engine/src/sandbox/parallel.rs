//! File work spread over a few threads: a work tree's files are written, compared or diffed
//! in chunks, one chunk per thread.

/// The threads for file work: the machine's parallelism, at most eight.
pub(crate) fn threads() -> usize {
    std::thread::available_parallelism()
        .map(|n| n.get())
        .unwrap_or(1)
        .clamp(1, 8)
}

/// Runs `work` on `items` cut into one chunk per thread ([`threads`]) and returns the first
/// error, or `panicked()` for a thread that panicked.
pub(crate) fn each_chunk<T: Sync, E: Send>(
    items: &[T],
    panicked: impl Fn() -> E,
    work: impl Fn(&[T]) -> Result<(), E> + Sync,
) -> Result<(), E> {
    let chunk = items.len().div_ceil(threads()).max(1);
    let work = &work;
    std::thread::scope(|scope| {
        let handles: Vec<_> = items
            .chunks(chunk)
            .map(|part| scope.spawn(move || work(part)))
            .collect();
        handles
            .into_iter()
            .try_for_each(|h| h.join().unwrap_or_else(|_| Err(panicked())))
    })
}
