//! `uncarried-job`: a closure made to run on another thread without the submitter's context.
//!
//! A pool thread started while owned (through `identity::spawn`) that runs closures sent to it
//! from a cron scope would run the cron job's code as the worker. The sanctioned job type is
//! `identity::Job`, which captures the submitter's context and installs it around the closure.
//! Flags, outside `runtime/src/identity/`, every trait object of a closure that is `Send`
//! (`dyn FnOnce() + Send`, `dyn FnMut(..) -> T + Send + 'static`, …): that is the shape of a job
//! handed to another thread. A `&mut dyn FnMut()` callback (not `Send`) stays on its thread and is
//! not flagged.

use syn::spanned::Spanned;
use syn::visit::{self, Visit};

use super::{Context, FileCx, Rule};
use crate::diag::Diagnostic;

pub struct UncarriedJob;

const NAME: &str = "uncarried-job";
const FIX: &str = "submit work to another thread as `identity::Job::new(closure)` and run it with \
     `job.run()`, which installs the context captured at submission";

impl Rule for UncarriedJob {
    fn name(&self) -> &'static str {
        NAME
    }

    fn check_file(&self, _cx: &Context<'_>, file: &FileCx<'_>, out: &mut Vec<Diagnostic>) {
        if file.file.in_identity() {
            return;
        }
        Scan {
            path: &file.file.path,
            out,
        }
        .visit_file(&file.file.ast);
    }
}

struct Scan<'a> {
    path: &'a str,
    out: &'a mut Vec<Diagnostic>,
}

fn last_ident(bound: &syn::TypeParamBound) -> Option<String> {
    match bound {
        syn::TypeParamBound::Trait(t) => t.path.segments.last().map(|s| s.ident.to_string()),
        _ => None,
    }
}

impl Visit<'_> for Scan<'_> {
    fn visit_type_trait_object(&mut self, t: &syn::TypeTraitObject) {
        let names: Vec<String> = t.bounds.iter().filter_map(last_ident).collect();
        let closure = names
            .iter()
            .any(|n| matches!(n.as_str(), "Fn" | "FnMut" | "FnOnce"));
        if closure && names.iter().any(|n| n == "Send") {
            self.out.push(Diagnostic::error(
                self.path,
                t.span(),
                NAME,
                "a `Send` closure object is a job for another thread, and it does not carry the \
                 ownership context of the code that submits it",
                FIX,
            ));
        }
        visit::visit_type_trait_object(self, t);
    }
}
