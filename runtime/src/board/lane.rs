//! The lane a claim takes a task from: a task in `review` is claimed for its reviewer (the review
//! lane, [`Board::claim_review`]); any other from `ready` ([`Board::claim`], whose checks say why
//! a task that is not ready cannot be claimed).

use super::{Board, ClaimOutcome, ClaimSpec, Result, Status};

/// A lane of the board: the status a claim takes a task from.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Lane {
    /// `ready`: the task's implementer works on it.
    Ready,
    /// `review`: the task's reviewer looks at it.
    Review,
}

impl Lane {
    /// The lane a task in `status` is claimed from.
    pub fn of(status: Status) -> Lane {
        match status {
            Status::Review => Lane::Review,
            _ => Lane::Ready,
        }
    }
}

impl Board {
    /// Claims task `id` from the lane its status puts it in ([`Lane::of`]).
    pub fn claim_in_its_lane(&self, id: &str, spec: &ClaimSpec, now: i64) -> Result<ClaimOutcome> {
        match Lane::of(self.get_task(id)?.status) {
            Lane::Review => self.claim_review(id, spec, now),
            Lane::Ready => self.claim(id, spec, now),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::board::{ClaimOrigin, NewTask, OpenOptions};

    #[test]
    fn only_a_task_in_review_is_claimed_from_the_review_lane() {
        for status in Status::ALL {
            let lane = Lane::of(status);
            assert_eq!(lane == Lane::Review, status == Status::Review, "{status}");
        }
    }

    #[test]
    fn a_review_task_is_claimed_for_its_reviewer_and_a_ready_one_for_its_implementer() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("kanban.db");
        Board::create_new(&path, &OpenOptions::create()).unwrap();
        let board = Board::open_path(&path, &OpenOptions::default()).unwrap();
        let new = NewTask {
            title: "t".to_owned(),
            ..NewTask::default()
        };
        let id = board.create_task(&new, 10).unwrap().id;
        let spec = ClaimSpec {
            lock: "h:1".to_owned(),
            ttl_seconds: 60,
            origin: ClaimOrigin::External,
        };
        let ClaimOutcome::Claimed(first) = board.claim_in_its_lane(&id, &spec, 10).unwrap() else {
            panic!("a ready task is claimed");
        };
        board
            .request_review(&id, Some(first.run_id), Some("rev"), None, 11)
            .unwrap()
            .into_result()
            .unwrap();
        let ClaimOutcome::Claimed(second) = board.claim_in_its_lane(&id, &spec, 12).unwrap() else {
            panic!("a review task is claimed for its reviewer");
        };
        assert_ne!(first.run_id, second.run_id);
        let claimed: Vec<_> = board
            .events(&id, None)
            .unwrap()
            .into_iter()
            .filter(|e| e.kind == "claimed")
            .map(|e| e.payload.unwrap_or_default()["source_status"].clone())
            .collect();
        assert_eq!(claimed.last().unwrap(), "review", "{claimed:?}");
    }
}
