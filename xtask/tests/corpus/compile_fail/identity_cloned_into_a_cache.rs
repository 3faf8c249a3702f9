// expect: expected `WorkerIdentity`, found `&WorkerIdentity`
// bypass (own): the identity cloned to keep it after the gated call returns
use crate::identity::WorkerIdentity;

pub fn keep(id: &WorkerIdentity) -> WorkerIdentity {
    id.clone()
}
