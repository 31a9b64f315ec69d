//! Threads for blocking calls that have no timeout (a claim's `flock`): the caller
//! hands the call to one and waits for its answer with a timeout of its own. Threads
//! that finish a call are kept for the next one: in a sweep every job waits for
//! another's claims hundreds of times a second, and a new thread per wait (clone,
//! exit, stack unmapped, thread-locals set up again) was ~7 % of the CPU of 4 tf.data
//! jobs sharing a store (perf of `benchmarks/sweep_bench.py --frontend tf`'s shared
//! jobs over their timed epochs, 2026-11-29).

use std::io;
use std::sync::mpsc::{self, Sender};
use std::sync::Mutex;

type Call = Box<dyn FnOnce() + Send>;

/// Threads kept idle at most; more are let go when their call ends.
const KEPT_IDLE: usize = 32;

/// A set of threads named `name` that run blocking calls, each call on a thread of
/// its own (an idle one, or a new one when none is idle).
pub(crate) struct WaiterThreads {
    name: &'static str,
    /// The idle threads' inboxes, with the process they belong to: a forked child (a
    /// DataLoader worker) inherits the list but none of the threads.
    idle: Mutex<(u32, Vec<Sender<Call>>)>,
}

impl WaiterThreads {
    pub(crate) const fn new(name: &'static str) -> Self {
        Self {
            name,
            idle: Mutex::new((0, Vec::new())),
        }
    }

    fn take_idle(&self) -> Option<Sender<Call>> {
        let mut idle = self.idle.lock().unwrap_or_else(|p| p.into_inner());
        if idle.0 != std::process::id() {
            *idle = (std::process::id(), Vec::new());
        }
        idle.1.pop()
    }

    /// Whether the thread whose inbox is `inbox` stays for another call.
    fn keep(&self, inbox: &Sender<Call>) -> bool {
        let mut idle = self.idle.lock().unwrap_or_else(|p| p.into_inner());
        if idle.0 != std::process::id() || idle.1.len() >= KEPT_IDLE {
            return false;
        }
        idle.1.push(inbox.clone());
        true
    }

    #[cfg(test)]
    fn idle_len(&self) -> usize {
        self.idle.lock().unwrap().1.len()
    }

    /// Runs `call` on an idle thread of this process, or on a new one.
    pub(crate) fn run(&'static self, call: impl FnOnce() + Send + 'static) -> io::Result<()> {
        let mut call: Call = Box::new(call);
        while let Some(inbox) = self.take_idle() {
            match inbox.send(call) {
                Ok(()) => return Ok(()),
                // Its thread is gone (a kept thread waits on its inbox: not expected).
                Err(mpsc::SendError(back)) => call = back,
            }
        }
        let (inbox, calls) = mpsc::channel::<Call>();
        std::thread::Builder::new()
            .name(self.name.into())
            .spawn(move || {
                let mut next = Some(call);
                while let Some(call) = next.take() {
                    call();
                    if !self.keep(&inbox) {
                        return;
                    }
                    next = calls.recv().ok();
                }
            })?;
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::mpsc::{channel, Receiver};
    use std::time::Duration;

    /// A bound on a wait that a hang would make endless (never reached otherwise).
    fn within<T>(rx: &Receiver<T>) -> T {
        rx.recv_timeout(Duration::from_secs(60))
            .expect("a call never ran")
    }

    #[test]
    fn a_thread_that_finished_its_call_runs_the_next() {
        static THREADS: WaiterThreads = WaiterThreads::new("lirs-test");
        let (tx, rx) = channel();
        let first = tx.clone();
        THREADS
            .run(move || first.send(std::thread::current().id()).unwrap())
            .unwrap();
        let one = within(&rx);
        // It puts itself on the idle list right after its call returns.
        let hang = std::time::Instant::now() + Duration::from_secs(60);
        while THREADS.idle_len() == 0 {
            assert!(std::time::Instant::now() < hang, "the thread was not kept");
            std::thread::yield_now();
        }
        THREADS
            .run(move || tx.send(std::thread::current().id()).unwrap())
            .unwrap();
        assert_eq!(within(&rx), one);
    }

    #[test]
    fn calls_that_block_each_get_a_thread() {
        static THREADS: WaiterThreads = WaiterThreads::new("lirs-test");
        // Two calls, each blocked until the other has started: one thread would hang.
        let (a_started, a_seen) = channel();
        let (b_started, b_seen) = channel();
        let (done, finished) = channel();
        let done_a = done.clone();
        THREADS
            .run(move || {
                a_started.send(()).unwrap();
                within(&b_seen);
                done_a.send(()).unwrap();
            })
            .unwrap();
        THREADS
            .run(move || {
                b_started.send(()).unwrap();
                within(&a_seen);
                done.send(()).unwrap();
            })
            .unwrap();
        within(&finished);
        within(&finished);
    }
}
