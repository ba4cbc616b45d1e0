//! Work split over the two halves of a list, on two threads where there are
//! two CPUs: reading or setting thousands of tasks is independent per task,
//! and the second CPU halves the wall time of what the kernel lets run at once.

/// Runs `work` on the first half of `items` here and on the second half on a
/// thread named `name`, when `items` holds at least `from` and there are two
/// CPUs; otherwise (or when the thread cannot be started) on all of `items`
/// here. Returns the results in the items' order: one, or one per half.
pub(crate) fn on_two_threads<T: Sync, R: Send>(
    items: &[T],
    from: usize,
    name: &str,
    work: impl Fn(&[T]) -> R + Sync,
) -> Vec<R> {
    let cpus = std::thread::available_parallelism().map_or(1, |n| n.get());
    if items.len() < from || cpus < 2 {
        return vec![work(items)];
    }
    let (first, second) = items.split_at(items.len() / 2);
    std::thread::scope(|s| {
        let other = std::thread::Builder::new()
            .name(name.into())
            .spawn_scoped(s, || work(second));
        let Ok(other) = other else {
            return vec![work(items)];
        };
        let here = work(first);
        let there = other
            .join()
            .unwrap_or_else(|panic| std::panic::resume_unwind(panic));
        vec![here, there]
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn below_the_threshold_one_call_takes_everything() {
        let out = on_two_threads(&[1, 2, 3], 4, "t", |part: &[i32]| part.to_vec());
        assert_eq!(out, vec![vec![1, 2, 3]]);
    }

    #[test]
    fn from_the_threshold_the_halves_come_back_in_order() {
        let items: Vec<i32> = (0..10).collect();
        let out = on_two_threads(&items, 4, "t", |part: &[i32]| part.to_vec());
        assert_eq!(out.concat(), items);
        if std::thread::available_parallelism().map_or(1, |n| n.get()) >= 2 {
            assert_eq!(out.len(), 2);
        }
    }
}
