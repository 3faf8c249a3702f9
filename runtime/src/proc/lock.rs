//! The one way this crate takes a file lock: a non-blocking exclusive `flock` on an open file,
//! released when the file is closed (a crashed holder releases it with its descriptor). The tick
//! lock (`home::lock`), the cron scheduler's lock and the owner's lock all go through it.

use std::fs::File;
use std::io;

/// Takes `file`'s exclusive lock without waiting: `Ok(true)` when taken, `Ok(false)` when another
/// descriptor holds it.
pub(crate) fn try_exclusive(file: &File) -> io::Result<bool> {
    match rustix::fs::flock(file, rustix::fs::FlockOperation::NonBlockingLockExclusive) {
        Ok(()) => Ok(true),
        Err(rustix::io::Errno::WOULDBLOCK) => Ok(false),
        Err(e) => Err(e.into()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_second_descriptor_waits_for_the_first_to_close() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("x.lock");
        let open = || File::create(&path).unwrap();
        let first = open();
        assert!(try_exclusive(&first).unwrap());
        assert!(!try_exclusive(&open()).unwrap());
        drop(first);
        assert!(try_exclusive(&open()).unwrap());
    }
}
