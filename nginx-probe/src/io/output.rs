//! Report sinks: stdout and the `--record` file, each written from its own thread so
//! that a slow or stalled reader (a paused pager, a full or slow disk) never blocks
//! worker tracking (a blocked tracker would miss reloads); and [`print_all`], stdout
//! for the commands that read recordings.

use std::{
    io::Write,
    sync::mpsc::{sync_channel, SyncSender, TrySendError},
    thread::JoinHandle,
};

use log::warn;

use crate::{error::ProbeError, safe};

/// Writes `text` to stdout, its control characters escaped ([`safe::block`]); a reader
/// that went away (`| head`) is not an error.
///
/// Errors: any other write error (a full disk behind a redirect).
pub fn print_all(text: &str) -> Result<(), ProbeError> {
    let text = safe::block(text);
    let mut o = std::io::stdout().lock();
    match o.write_all(text.as_bytes()).and_then(|_| o.flush()) {
        Err(e) if e.kind() != std::io::ErrorKind::BrokenPipe => Err(e.into()),
        _ => Ok(()),
    }
}

/// What happened to a report handed to a [`Sink`].
#[derive(Debug, PartialEq)]
pub enum Sent {
    /// Queued for the writer thread.
    Queued,
    /// The queue was full: the report was dropped and counted in [`Sink::dropped`].
    Dropped,
    /// The writer stopped (a closed pipe, a write error); see [`Sink::close`].
    Closed,
}

/// A destination for reports, written by its own thread through a bounded queue.
pub struct Sink {
    tx: Option<SyncSender<String>>,
    writer: Option<JoinHandle<std::io::Result<()>>>,
    /// What this sink is called in messages (`stdout`, the record file's path).
    name: String,
    /// Reports dropped because the queue was full (the destination was not keeping up).
    pub dropped: u64,
}

impl Sink {
    /// Starts a writer thread for `out` with room for `queue` reports in flight.
    pub fn spawn(mut out: Box<dyn Write + Send>, name: &str, queue: usize) -> Sink {
        let (tx, rx) = sync_channel::<String>(queue);
        let writer = std::thread::spawn(move || -> std::io::Result<()> {
            for text in rx {
                // On error the thread ends, and dropping rx tells the sender.
                out.write_all(text.as_bytes())?;
                out.flush()?;
            }
            Ok(())
        });
        Sink {
            tx: Some(tx),
            writer: Some(writer),
            name: name.to_string(),
            dropped: 0,
        }
    }

    /// Queues an interval report without blocking.
    pub fn interval(&mut self, text: String) -> Sent {
        let Some(tx) = &self.tx else {
            return Sent::Closed;
        };
        match tx.try_send(text) {
            Ok(()) => Sent::Queued,
            Err(TrySendError::Full(_)) => {
                self.dropped += 1;
                if self.dropped == 1 {
                    warn!(
                        "{} is not keeping up: dropping interval reports (counted in the summary)",
                        self.name
                    );
                }
                Sent::Dropped
            }
            Err(TrySendError::Disconnected(_)) => Sent::Closed,
        }
    }

    /// Writes the final report, waiting for everything queued before it, and stops the
    /// writer.
    ///
    /// Errors: the write error (a full disk, a closed pipe), so that a lost summary is
    /// never silent. A reader that went away (`| head`) is not an error: it is how the
    /// run ended.
    pub fn finish(mut self, text: String) -> std::io::Result<()> {
        if let Some(tx) = self.tx.take() {
            let _ = tx.send(text);
        }
        self.join()
    }

    /// Stops the writer after what is queued and returns its error, if it failed.
    pub fn close(mut self) -> std::io::Result<()> {
        self.tx.take();
        self.join()
    }

    fn join(&mut self) -> std::io::Result<()> {
        match self.writer.take().map(|w| w.join()) {
            Some(Ok(Err(e))) if e.kind() == std::io::ErrorKind::BrokenPipe => Ok(()),
            Some(Ok(res)) => res,
            Some(Err(_)) => Err(std::io::Error::other("the output thread panicked")),
            None => Ok(()),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A writer that fails every write, like a full disk.
    struct Full;
    impl Write for Full {
        fn write(&mut self, _: &[u8]) -> std::io::Result<usize> {
            Err(std::io::Error::from_raw_os_error(libc::ENOSPC))
        }
        fn flush(&mut self) -> std::io::Result<()> {
            Ok(())
        }
    }

    #[test]
    fn a_failed_writer_closes_and_reports_its_error() {
        let mut s = Sink::spawn(Box::new(Full), "test", 4);
        assert_eq!(s.interval("a\n".into()), Sent::Queued);
        // The writer thread fails on the first line and ends; the sender sees it.
        let mut closed = false;
        for _ in 0..200 {
            if s.interval("b\n".into()) == Sent::Closed {
                closed = true;
                break;
            }
            std::thread::sleep(std::time::Duration::from_millis(5));
        }
        assert!(closed, "the sink did not notice its writer failed");
        let e = s.close().unwrap_err();
        assert_eq!(e.raw_os_error(), Some(libc::ENOSPC));
    }

    #[test]
    fn finish_writes_everything_queued_in_order() {
        let file = tempfile::NamedTempFile::new().unwrap();
        let f = file.reopen().unwrap();
        let mut s = Sink::spawn(Box::new(f), "test", 4);
        assert_eq!(s.interval("1\n".into()), Sent::Queued);
        s.finish("2\n".into()).unwrap();
        assert_eq!(std::fs::read_to_string(file.path()).unwrap(), "1\n2\n");
    }
}
